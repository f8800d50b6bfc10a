"""What the client returns: small frozen dataclasses read from GitLab's JSON.

The readers are the only place that touches GitLab's untyped JSON; a missing or
mistyped field raises `ResponseShapeError` (classified as permanent) instead of
leaking a KeyError or a half-filled object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, TypeVar

from workqueue.gitlab.errors import ResponseShapeError

T = TypeVar("T")


class CommitAction(TypedDict):
    """One entry of the Commits API `actions[]`, in GitLab's own format."""

    action: str  # create | update | delete | move | chmod
    file_path: str
    previous_path: NotRequired[str]
    content: NotRequired[str]
    encoding: NotRequired[str]  # text (default) | base64
    execute_filemode: NotRequired[bool]
    last_commit_id: NotRequired[str]


@dataclass(frozen=True, slots=True)
class ProjectInfo:
    id: int
    path_with_namespace: str
    default_branch: str | None  # None only for a project with an empty repository
    web_url: str
    # The "CI/CD configuration file" setting as GitLab shows it: None or "" when unset
    # (GitLab then reads `.gitlab-ci.yml`), and also None when the token cannot read code.
    ci_config_path: str | None = None
    # How MRs merge: merge | rebase_merge | ff (the last two need the target head in
    # the source); None when not shown. Merge trains are a Premium setting.
    merge_method: str | None = None
    merge_trains_enabled: bool = False


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """A commit. Who made it is in the author and committer emails (git's own fields)."""

    sha: str
    title: str
    message: str
    parent_ids: tuple[str, ...]
    author_email: str
    committer_email: str
    web_url: str


@dataclass(frozen=True, slots=True)
class FileFingerprint:
    """A file at a ref, as the repository files API describes it (no content kept)."""

    content_sha256: str
    executable: bool


@dataclass(frozen=True, slots=True)
class BranchInfo:
    name: str
    sha: str  # = commit.sha
    protected: bool
    default: bool
    commit: CommitInfo  # the head commit
    # For a protected branch: whether its rule lets Developers merge. GitLab answers
    # false for every unprotected branch (where any Developer may merge): read it
    # together with `protected`.
    developers_can_merge: bool = False


@dataclass(frozen=True, slots=True)
class UserInfo:
    """The user a token acts as (`GET /user`)."""

    id: int
    username: str
    name: str
    # `commit_email` is what GitLab writes as author and committer of API
    # commits; `email` is the primary address. Either may be absent.
    email: str | None
    commit_email: str | None
    bot: bool

    @property
    def commit_emails(self) -> frozenset[str]:
        """The addresses this user's API commits may carry, lower-cased."""
        return frozenset(e.casefold() for e in (self.email, self.commit_email) if e)


@dataclass(frozen=True, slots=True)
class MergeRequestInfo:
    """An MR. The `head_pipeline_*` fields are None in list results: GitLab lists omit them."""

    iid: int
    web_url: str
    state: str  # opened | closed | merged | locked
    draft: bool
    sha: str | None  # head of the source branch as the MR last saw it
    source_branch: str
    target_branch: str
    source_project_id: int  # differs from target_project_id for an MR from a fork
    target_project_id: int
    author_id: int
    author_username: str
    title: str
    description: str
    labels: tuple[str, ...]
    detailed_merge_status: str | None
    head_pipeline_id: int | None
    head_pipeline_sha: str | None
    head_pipeline_status: str | None
    merge_commit_sha: str | None
    merge_error: str | None
    closed_by_id: int | None  # who closed it; None while open, or for a merged MR
    # What answers from before GitLab 15.6 (no `detailed_merge_status`) are judged by.
    merge_status: str | None = None  # deprecated: unchecked, checking, can_be_merged, ...
    has_conflicts: bool = False
    blocking_discussions_resolved: bool = True
    # `refs/merge-requests/<iid>/merge` for a merged-results pipeline (its sha is the
    # temporary merge commit, not the MR head); None in lists.
    head_pipeline_ref: str | None = None
    # Only in single reads that ask for them (`include_rebase_in_progress`,
    # `include_diverged_commits_count`); None otherwise.
    rebase_in_progress: bool | None = None
    diverged_commits_count: int | None = None


@dataclass(frozen=True, slots=True)
class MergeTrainCarInfo:
    """An MR's car on a merge train (`GET …/merge_trains/merge_requests/:iid`)."""

    id: int
    iid: int  # of its MR
    status: str  # idle | stale | fresh | merging | merged | skip_merged
    target_branch: str
    pipeline_id: int | None
    pipeline_sha: str | None


@dataclass(frozen=True, slots=True)
class CompareInfo:
    """Result of `repository/compare` (see `GitLabClient.compare` for the semantics)."""

    diffs_count: int
    commit_shas: tuple[str, ...]  # commits in `to` but not in `from`, oldest first
    changed_paths: tuple[str, ...]
    same_ref: bool
    timed_out: bool  # GitLab gave up computing the diff: `diffs` may be incomplete

    @property
    def differs(self) -> bool:
        """True unless GitLab positively reported no difference (a timeout counts as one)."""
        return self.diffs_count > 0 or self.timed_out


@dataclass(frozen=True, slots=True)
class PipelineInfo:
    id: int
    sha: str
    status: str
    ref: str
    source: str | None
    web_url: str


@dataclass(frozen=True, slots=True)
class JobInfo:
    id: int
    name: str
    stage: str
    status: str
    failure_reason: str | None  # GitLab sends it only when status == "failed"
    pipeline_id: int
    sha: str
    ref: str
    allow_failure: bool
    web_url: str


class _Fields:
    """Typed reads from one JSON object, naming the object and field on failure."""

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, Mapping):
            raise ResponseShapeError(f"{what}: expected a JSON object, got {type(data).__name__}")
        self._data: Mapping[str, Any] = data
        self._what = what

    def _fail(self, key: str, expected: str) -> ResponseShapeError:
        found = type(self._data.get(key)).__name__ if key in self._data else "nothing"
        return ResponseShapeError(f"{self._what}.{key}: expected {expected}, got {found}")

    def text(self, key: str) -> str:
        value = self._data.get(key)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string or null")
        return value

    def integer(self, key: str) -> int:
        value = self._data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(key, "an integer")
        return value

    def opt_flag(self, key: str) -> bool | None:
        value = self._data.get(key)
        if value is not None and not isinstance(value, bool):
            raise self._fail(key, "a boolean or null")
        return value

    def opt_integer(self, key: str) -> int | None:
        value = self._data.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise self._fail(key, "an integer or null")
        return value

    def flag(self, key: str, *, default: bool = False) -> bool:
        value = self._data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, "a boolean")
        return value

    @property
    def raw(self) -> Mapping[str, Any]:
        return self._data

    def child(self, key: str) -> _Fields | None:
        value = self._data.get(key)
        if value is None:
            return None
        return _Fields(value, f"{self._what}.{key}")

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._fail(key, "a list of strings")
        return tuple(value)

    def objects(self, key: str, *, required: bool = False) -> list[_Fields]:
        value = self._data.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self._fail(key, "a list")
        return [_Fields(item, f"{self._what}.{key}[{n}]") for n, item in enumerate(value)]


def parse_project(data: Any) -> ProjectInfo:
    fields = _Fields(data, "project")
    return ProjectInfo(
        id=fields.integer("id"),
        path_with_namespace=fields.text("path_with_namespace"),
        default_branch=fields.opt_text("default_branch"),
        web_url=fields.text("web_url"),
        ci_config_path=fields.opt_text("ci_config_path"),
        merge_method=fields.opt_text("merge_method"),
        merge_trains_enabled=fields.flag("merge_trains_enabled"),
    )


def parse_branch(data: Any) -> BranchInfo:
    fields = _Fields(data, "branch")
    commit = fields.child("commit")
    if commit is None:
        raise ResponseShapeError("branch.commit: expected an object, got nothing")
    head = parse_commit(commit.raw, "branch.commit")
    return BranchInfo(
        name=fields.text("name"),
        sha=head.sha,
        protected=fields.flag("protected"),
        default=fields.flag("default"),
        developers_can_merge=fields.flag("developers_can_merge"),
        commit=head,
    )


def parse_file_fingerprint(data: Any) -> FileFingerprint:
    fields = _Fields(data, "file")
    return FileFingerprint(
        content_sha256=fields.text("content_sha256"),
        executable=fields.flag("execute_filemode"),
    )


def parse_commit(data: Any, what: str = "commit") -> CommitInfo:
    fields = _Fields(data, what)
    return CommitInfo(
        sha=fields.text("id"),
        title=fields.opt_text("title") or "",
        message=fields.opt_text("message") or "",
        parent_ids=fields.texts("parent_ids"),
        author_email=fields.opt_text("author_email") or "",
        committer_email=fields.opt_text("committer_email") or "",
        web_url=fields.opt_text("web_url") or "",
    )


def parse_user(data: Any) -> UserInfo:
    fields = _Fields(data, "user")
    return UserInfo(
        id=fields.integer("id"),
        username=fields.text("username"),
        name=fields.opt_text("name") or "",
        email=fields.opt_text("email"),
        commit_email=fields.opt_text("commit_email"),
        bot=fields.flag("bot"),
    )


def parse_merge_request(data: Any) -> MergeRequestInfo:
    fields = _Fields(data, "merge_request")
    pipeline = fields.child("head_pipeline")
    closed_by = fields.child("closed_by")
    author = fields.child("author")
    if author is None:
        raise ResponseShapeError("merge_request.author: expected an object, got nothing")
    # `draft` replaced `work_in_progress` (GitLab 14); read whichever is there.
    draft = fields.flag("draft", default=fields.flag("work_in_progress"))
    return MergeRequestInfo(
        iid=fields.integer("iid"),
        web_url=fields.text("web_url"),
        state=fields.text("state"),
        draft=draft,
        sha=fields.opt_text("sha"),
        source_branch=fields.text("source_branch"),
        target_branch=fields.text("target_branch"),
        source_project_id=fields.integer("source_project_id"),
        target_project_id=fields.integer("target_project_id"),
        author_id=author.integer("id"),
        author_username=author.text("username"),
        title=fields.text("title"),
        description=fields.opt_text("description") or "",
        labels=fields.texts("labels"),
        detailed_merge_status=fields.opt_text("detailed_merge_status"),
        head_pipeline_id=pipeline.integer("id") if pipeline else None,
        head_pipeline_sha=pipeline.opt_text("sha") if pipeline else None,
        head_pipeline_status=pipeline.opt_text("status") if pipeline else None,
        merge_commit_sha=fields.opt_text("merge_commit_sha"),
        merge_error=fields.opt_text("merge_error"),
        closed_by_id=closed_by.integer("id") if closed_by else None,
        merge_status=fields.opt_text("merge_status"),
        has_conflicts=fields.flag("has_conflicts"),
        blocking_discussions_resolved=fields.flag("blocking_discussions_resolved", default=True),
        head_pipeline_ref=pipeline.opt_text("ref") if pipeline else None,
        rebase_in_progress=fields.opt_flag("rebase_in_progress"),
        diverged_commits_count=fields.opt_integer("diverged_commits_count"),
    )


def parse_rebase(data: Any) -> bool:
    """`PUT …/rebase`'s answer: `{"rebase_in_progress": true}`."""
    return _Fields(data, "rebase").flag("rebase_in_progress")


def parse_merge_train_car(data: Any) -> MergeTrainCarInfo:
    fields = _Fields(data, "merge_train_car")
    merge_request = fields.child("merge_request")
    if merge_request is None:
        raise ResponseShapeError("merge_train_car.merge_request: expected an object, got nothing")
    pipeline = fields.child("pipeline")
    return MergeTrainCarInfo(
        id=fields.integer("id"),
        iid=merge_request.integer("iid"),
        status=fields.text("status"),
        target_branch=fields.text("target_branch"),
        pipeline_id=pipeline.integer("id") if pipeline else None,
        pipeline_sha=pipeline.opt_text("sha") if pipeline else None,
    )


def parse_compare(data: Any) -> CompareInfo:
    fields = _Fields(data, "compare")
    # Required: reading a malformed answer as "no diffs" would close a real MR.
    diffs = fields.objects("diffs", required=True)
    paths: list[str] = []
    for diff in diffs:
        for key in ("old_path", "new_path"):
            path = diff.opt_text(key)
            if path is not None and path not in paths:
                paths.append(path)
    return CompareInfo(
        diffs_count=len(diffs),
        commit_shas=tuple(commit.text("id") for commit in fields.objects("commits", required=True)),
        changed_paths=tuple(paths),
        same_ref=fields.flag("compare_same_ref"),
        timed_out=fields.flag("compare_timeout"),
    )


def parse_pipeline(data: Any) -> PipelineInfo:
    fields = _Fields(data, "pipeline")
    return PipelineInfo(
        id=fields.integer("id"),
        sha=fields.text("sha"),
        status=fields.text("status"),
        ref=fields.text("ref"),
        source=fields.opt_text("source"),
        web_url=fields.opt_text("web_url") or "",
    )


def parse_list(data: Any, parse: Callable[[Any], T], what: str) -> list[T]:
    if not isinstance(data, list):
        raise ResponseShapeError(f"{what}: expected a JSON list")
    return [parse(entry) for entry in data]


def parse_variables(data: Any) -> dict[str, str]:
    """`[{"key", "value", ...}]` → key → value (a null value reads as empty)."""
    variables: dict[str, str] = {}
    for entry in parse_list(data, lambda item: _Fields(item, "variable"), "variables"):
        variables[entry.text("key")] = entry.opt_text("value") or ""
    return variables


def parse_job(data: Any) -> JobInfo:
    fields = _Fields(data, "job")
    pipeline = fields.child("pipeline")
    if pipeline is None:
        raise ResponseShapeError("job.pipeline: expected an object, got nothing")
    commit = fields.child("commit")
    sha = pipeline.opt_text("sha") or (commit.text("id") if commit else None)
    if sha is None:
        raise ResponseShapeError("job: no sha in pipeline or commit")
    return JobInfo(
        id=fields.integer("id"),
        name=fields.text("name"),
        stage=fields.text("stage"),
        status=fields.text("status"),
        failure_reason=fields.opt_text("failure_reason"),
        pipeline_id=pipeline.integer("id"),
        sha=sha,
        ref=fields.opt_text("ref") or pipeline.opt_text("ref") or "",
        allow_failure=fields.flag("allow_failure"),
        web_url=fields.opt_text("web_url") or "",
    )


def parse_note_id(data: Any) -> int:
    return _Fields(data, "note").integer("id")


@dataclass(frozen=True, slots=True)
class NoteInfo:
    """A note (comment) on an MR or an issue."""

    id: int
    body: str
    author: str  # username
    system: bool
    author_id: int | None = None
    internal: bool = False  # `internal`, or `confidential` before GitLab 15.x


def parse_note(data: Any) -> NoteInfo:
    fields = _Fields(data, "note")
    author = fields.child("author")
    return NoteInfo(
        id=fields.integer("id"),
        body=fields.opt_text("body") or "",
        author=author.text("username") if author is not None else "",
        system=fields.flag("system"),
        author_id=author.opt_integer("id") if author is not None else None,
        internal=fields.flag("internal") or fields.flag("confidential"),
    )


def parse_discussion_notes(data: Any) -> list[NoteInfo]:
    """The notes of one discussion (`GET …/discussions/:id`), oldest first."""
    fields = _Fields(data, "discussion")
    return parse_list(fields.raw.get("notes"), parse_note, "discussion.notes")


def parse_access_level(data: Any) -> int:
    return _Fields(data, "member").integer("access_level")
