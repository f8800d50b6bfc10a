"""`GitLabClient`: the GitLab operations the service performs, typed, over python-gitlab.

Each method is one HTTP call (a list follows every page), made once with a timeout:
retrying is the engine's job. Failures arrive as `RetryableGitLabError` or
`PermanentGitLabError` (see `errors.py`); nothing from python-gitlab or requests
escapes, and results are frozen dataclasses (`models.py`), never python-gitlab objects.

Projects are addressed by path (`group/subgroup/name`) or numeric id; paths, branch
names and refs are percent-encoded with `/` as `%2F`, as GitLab's router requires.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import gitlab

from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.http_backend import TokenSafeSession, Urllib3Backend
from workqueue.gitlab.models import (
    BranchInfo,
    CommitInfo,
    CompareInfo,
    FileFingerprint,
    JobInfo,
    MergeRequestInfo,
    MergeTrainCarInfo,
    NoteInfo,
    PipelineInfo,
    ProjectInfo,
    UserInfo,
    parse_access_level,
    parse_branch,
    parse_commit,
    parse_compare,
    parse_discussion_notes,
    parse_file_fingerprint,
    parse_job,
    parse_list,
    parse_merge_request,
    parse_merge_train_car,
    parse_note,
    parse_note_id,
    parse_pipeline,
    parse_project,
    parse_rebase,
    parse_user,
    parse_variables,
)
from workqueue.gitlab.transport import OnCall, Transport

ProjectRef = str | int

DEFAULT_TIMEOUT_SECONDS = 30.0
# How long a project lookup (id, path, default branch) is reused.
PROJECT_CACHE_SECONDS = 300.0
# Keys are whatever callers and hooks spell (GitLab finds a path in any letter case):
# the oldest answers are forgotten first, so the cache is bounded whatever is asked.
MAX_CACHED_PROJECTS = 4096
_BRANCH_NOT_FOUND = "404 Branch Not Found"
_CAR_NOT_FOUND = "404 Merge Train Merge Request Not Found"
_FILE_NOT_FOUND = "404 File Not Found"


def _enc(value: str | int) -> str:
    return quote(str(value), safe="")


def _labels(labels: Sequence[str]) -> str:
    # GitLab's `labels` is comma-separated; an empty string clears them on update.
    return ",".join(labels)


_UPDATE_TEXT_FIELDS = frozenset({"title", "description", "target_branch"})
_UPDATE_LABEL_FIELDS = frozenset({"labels", "add_labels", "remove_labels"})
_UPDATE_FLAG_FIELDS = frozenset({"remove_source_branch", "squash", "discussion_locked"})


def _update_value(name: str, value: object) -> str | bool:
    if name in _UPDATE_TEXT_FIELDS and isinstance(value, str):
        return value
    if name in _UPDATE_FLAG_FIELDS and isinstance(value, bool):
        return value
    if (
        name in _UPDATE_LABEL_FIELDS
        and isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(isinstance(label, str) for label in value)
    ):
        return _labels([str(label) for label in value])
    known = _UPDATE_TEXT_FIELDS | _UPDATE_LABEL_FIELDS | _UPDATE_FLAG_FIELDS
    if name not in known:
        raise TypeError(f"update_merge_request got an unknown field {name!r}")
    raise TypeError(f"update_merge_request: bad value for {name!r}: {value!r}")


def _read_environment_once(gl: gitlab.Gitlab, url: str) -> None:
    """Settle requests' environment lookups for `url` now instead of on every call.

    A session that trusts the environment looks up the proxy variables (and
    `no_proxy`) and the CA bundle variables on each request: about a third of
    the client's own time for a `GET merge_request` (py-spy, 200 webhooks/s).
    The client only talks to `url`'s host, so the same answers are read once
    here and set on the session, and it stops looking. Variables changed after
    the client is built are not seen (a restart is). netrc is not involved:
    python-gitlab always authenticates, and requests reads netrc only without auth.
    """
    session = gl.session
    if not session.trust_env:
        return
    settings = session.merge_environment_settings(url, {}, None, gl.ssl_verify, None)
    session.proxies.update(settings["proxies"])
    gl.ssl_verify = settings["verify"]
    session.trust_env = False


class GitLabClient:
    """Typed access to one GitLab instance with one token.

    `gl` replaces the python-gitlab instance the client would build (tests);
    `on_call(operation, status)` is called after every call (see `transport.py`).
    The token is used for authentication and to scrub error messages; it is
    never logged, stored in errors, or shown by `repr`.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        gl: gitlab.Gitlab | None = None,
        on_call: OnCall | None = None,
    ) -> None:
        token = _usable_token(token)
        self._owns_gl = gl is None
        if gl is None:
            gl = gitlab.Gitlab(
                url,
                private_token=token,
                timeout=timeout,
                retry_transient_errors=False,
                # Follow `Link` pagination on our base URL even if GitLab's external_url differs.
                keep_base_url=True,
                # requests' behaviour in fewer steps: see http_backend.py.
                backend=Urllib3Backend,
                session=TokenSafeSession(),
            )
            _read_environment_once(gl, url)
        self._gl = gl
        self._transport = Transport(gl, timeout=timeout, secrets=(token,), on_call=on_call)
        self._projects: dict[str, tuple[ProjectInfo, float]] = {}  # key -> (info, fetched at)
        self._cache_lock = threading.Lock()
        self._user: UserInfo | None = None

    def __repr__(self) -> str:
        return f"GitLabClient(url={self._transport.url!r})"

    def close(self) -> None:
        """Detach from the python-gitlab session; close it if this client created it."""
        self._transport.detach()
        if self._owns_gl:
            self._gl.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the token's user --------------------------------------------------------------------

    def current_user(self) -> UserInfo:
        """The user the token acts as (`GET /user`), fetched once per client.

        It is how the service tells its own commits and MRs from everyone
        else's; a token does not change users, so the answer is kept.
        """
        with self._cache_lock:
            cached = self._user
        if cached is not None:
            return cached
        info = self._transport.get("user.get", "/user", parse_user)
        with self._cache_lock:
            if self._user is None:
                self._user = info
            return self._user

    # -- projects and branches -------------------------------------------------------------

    def project(self, project: ProjectRef) -> ProjectInfo:
        """The project (id, path, default branch), cached per client and key for
        `PROJECT_CACHE_SECONDS`, at most `MAX_CACHED_PROJECTS` keys (oldest go first).

        The path decides authorization (`projects:` scopes) and the default branch
        where MRs go, so the cache expires: a project renamed or moved to another
        group is seen under its new path within minutes, not at the next restart.
        Two threads asking for the same uncached project at once may both fetch
        it; both get an equal result.
        """
        key = str(project)
        now = time.monotonic()
        with self._cache_lock:
            cached = self._projects.get(key)
        if cached is not None and now - cached[1] < PROJECT_CACHE_SECONDS:
            return cached[0]
        info = self._transport.get("projects.get", f"/projects/{_enc(project)}", parse_project)
        with self._cache_lock:
            # A concurrent fetch that stored a fresh answer first wins: every
            # caller gets the same object.
            current = self._projects.get(key)
            if current is not None and current is not cached:
                return current[0]
            self._projects.pop(key, None)  # re-inserted last: the oldest go first
            self._projects[key] = (info, now)
            while len(self._projects) > MAX_CACHED_PROJECTS:
                del self._projects[next(iter(self._projects))]
        return info

    def branch(self, project: ProjectRef, name: str) -> BranchInfo | None:
        """The branch, or None when it does not exist (a missing project still raises)."""
        try:
            return self._transport.get(
                "branches.get", f"{self._repo(project)}/branches/{_enc(name)}", parse_branch
            )
        except PermanentGitLabError as error:
            if error.status == 404 and error.message == _BRANCH_NOT_FOUND:
                return None
            raise

    def delete_branch(self, project: ProjectRef, name: str) -> bool:
        """Delete a branch; False when it was already gone."""
        try:
            self._transport.delete(
                "branches.delete", f"{self._repo(project)}/branches/{_enc(name)}"
            )
        except PermanentGitLabError as error:
            if error.status == 404 and error.message == _BRANCH_NOT_FOUND:
                return False
            raise
        return True

    def commit(
        self,
        project: ProjectRef,
        *,
        branch: str,
        message: str,
        actions: Sequence[Mapping[str, object]],
        start_branch: str | None = None,
        force: bool = False,
    ) -> CommitInfo:
        """One commit with `actions` (GitLab's format, see `models.CommitAction`) on `branch`.

        With `start_branch`, the commit is built on that branch's head and `branch` is
        created if missing; with `force=True` as well, an existing `branch` is reset to
        that new commit, so it holds exactly start_branch + these actions.
        """
        data: dict[str, Any] = {
            "branch": branch,
            "commit_message": message,
            "actions": [dict(action) for action in actions],
        }
        if start_branch is not None:
            data["start_branch"] = start_branch
        if force:
            data["force"] = True
        return self._transport.post(
            "commits.create", f"{self._repo(project)}/commits", parse_commit, data
        )

    def compare(
        self, project: ProjectRef, from_ref: str, to_ref: str, *, straight: bool = False
    ) -> CompareInfo:
        """What `to_ref` adds over `from_ref`: call it as compare(target, source).

        Default `straight=False` (GitLab's default): the diff runs from
        merge-base(from, to) to `to`, which is exactly the MR's diff ("Changes") and
        what merging `to` into `from` would add, so `diffs_count == 0` means the MR
        would be empty even when the target moved on after the branch was built.
        `straight=True` diffs the two trees directly, so it also counts target commits
        the source lacks. Both are sound for empty-diff detection (no diffs ⇒ a merge
        changes nothing); neither sees a change that reached the target by another
        route after the branch was built, which is why `ensure_mr` rebuilds the branch
        from the current target before comparing. Use `differs`: it also treats a
        GitLab-side compare timeout as a difference, never as empty.
        """
        query = {"from": from_ref, "to": to_ref, "straight": straight}
        return self._transport.get(
            "repository.compare", f"{self._repo(project)}/compare", parse_compare, query=query
        )

    # -- merge requests ----------------------------------------------------------------------

    def open_merge_requests(
        self, project: ProjectRef, source_branch: str, target_branch: str | None = None
    ) -> list[MergeRequestInfo]:
        """Open MRs from `source_branch` (optionally into `target_branch`), newest first.

        List entries carry no head pipeline: `head_pipeline_*` are None.
        """
        query: dict[str, Any] = {"state": "opened", "source_branch": source_branch}
        if target_branch is not None:
            query["target_branch"] = target_branch
        return self._transport.get_all(
            "merge_requests.list",
            f"/projects/{_enc(project)}/merge_requests",
            parse_merge_request,
            query=query,
        )

    def merge_request(
        self,
        project: ProjectRef,
        iid: int,
        *,
        include_rebase_in_progress: bool = False,
        include_diverged_commits_count: bool = False,
    ) -> MergeRequestInfo:
        """One MR; the `include_*` flags ask GitLab for `rebase_in_progress` and
        `diverged_commits_count` (target commits the source lacks), None otherwise."""
        flags = {
            "include_rebase_in_progress": include_rebase_in_progress,
            "include_diverged_commits_count": include_diverged_commits_count,
        }
        query = {name: True for name, wanted in flags.items() if wanted}
        return self._transport.get(
            "merge_requests.get", self._mr(project, iid), parse_merge_request, query=query
        )

    def create_merge_request(
        self,
        project: ProjectRef,
        *,
        source_branch: str,
        target_branch: str,
        title: str,
        description: str = "",
        labels: Sequence[str] = (),
        remove_source_branch: bool = True,
    ) -> MergeRequestInfo:
        """Open an MR. A second open MR for the same branches is a 409 (permanent)."""
        data = {
            "source_branch": source_branch,
            "target_branch": target_branch,
            "title": title,
            "description": description,
            "labels": _labels(labels),
            "remove_source_branch": remove_source_branch,
        }
        return self._transport.post(
            "merge_requests.create",
            f"/projects/{_enc(project)}/merge_requests",
            parse_merge_request,
            data,
        )

    def update_merge_request(
        self, project: ProjectRef, iid: int, **fields: object
    ) -> MergeRequestInfo:
        """Change the given fields; the others stay as they are.

        Accepted: `title`, `description`, `target_branch` (str); `labels` (replaces
        the set), `add_labels`, `remove_labels` (sequences of str);
        `remove_source_branch`, `squash`, `discussion_locked` (bool). Anything else,
        or no field at all, is a `TypeError`/`ValueError` before any HTTP request.
        """
        if not fields:
            raise ValueError("update_merge_request needs at least one field to change")
        data = {name: _update_value(name, value) for name, value in fields.items()}
        return self._transport.put(
            "merge_requests.update", self._mr(project, iid), parse_merge_request, data
        )

    def close_merge_request(self, project: ProjectRef, iid: int) -> MergeRequestInfo:
        """Close the MR (closing a closed MR is a no-op that returns it)."""
        return self._transport.put(
            "merge_requests.close",
            self._mr(project, iid),
            parse_merge_request,
            {"state_event": "close"},
        )

    def merge(self, project: ProjectRef, iid: int, *, sha: str) -> MergeRequestInfo:
        """Merge now, only if the source head is still `sha` (never auto-merge).

        Refusals the caller must tell apart (all `PermanentGitLabError`, by `status`):
        405 not mergeable now (draft, closed, pipeline or approvals missing, ...),
        409 the head is no longer `sha`, 422 (406 before GitLab 16) the merge was
        attempted and failed, e.g. a race with the target branch.
        """
        return self._transport.put(
            "merge_requests.merge",
            f"{self._mr(project, iid)}/merge",
            parse_merge_request,
            {"sha": sha},
        )

    def rebase_merge_request(self, project: ProjectRef, iid: int) -> bool:
        """Ask GitLab to rebase the MR's source branch onto its target (`PUT …/rebase`).

        GitLab rebases in the background and answers 202 at once; read the MR with
        `include_rebase_in_progress` until it is done (a new head, or `merge_error`).
        403: the branch cannot be pushed to; 409: the rebase could not be enqueued.
        """
        return self._transport.put(
            "merge_requests.rebase",
            f"{self._mr(project, iid)}/rebase",
            parse_rebase,
            {},
        )

    def add_to_merge_train(self, project: ProjectRef, iid: int, *, sha: str) -> None:
        """Put the MR on its target's merge train, only if its head is still `sha`.

        GitLab then merges it once the train pipeline passes. Refusals, all
        `PermanentGitLabError`: 409 the head is no longer `sha`, 400 not mergeable
        now (`Failed to merge`), 403 merge trains off for the project.
        """
        self._transport.post(
            "merge_trains.add",
            f"/projects/{_enc(project)}/merge_trains/merge_requests/{int(iid)}",
            lambda data: parse_list(data, parse_merge_train_car, "merge train"),
            {"sha": sha},
        )

    def merge_train_car(self, project: ProjectRef, iid: int) -> MergeTrainCarInfo | None:
        """The MR's car on a merge train; None when it has none (never added, or dropped)."""
        try:
            return self._transport.get(
                "merge_trains.get",
                f"/projects/{_enc(project)}/merge_trains/merge_requests/{int(iid)}",
                parse_merge_train_car,
            )
        except PermanentGitLabError as error:
            if error.status == 404 and error.message == _CAR_NOT_FOUND:
                return None
            raise

    def get_commit(self, project: ProjectRef, sha: str) -> CommitInfo:
        """One commit (message, parents, author and committer emails)."""
        return self._transport.get(
            "commits.get", f"{self._repo(project)}/commits/{_enc(sha)}", parse_commit
        )

    def file_fingerprint(self, project: ProjectRef, path: str, ref: str) -> FileFingerprint | None:
        """The sha256 and executable bit of the file `path` at `ref`; None when there is no
        such file at that ref (`GET repository/files/:path`)."""
        try:
            return self._transport.get(
                "repository_files.get",
                f"{self._repo(project)}/files/{_enc(path)}",
                parse_file_fingerprint,
                query={"ref": ref},
            )
        except PermanentGitLabError as error:
            if error.status == 404 and error.message == _FILE_NOT_FOUND:
                return None
            raise

    def add_note(self, project: ProjectRef, iid: int, body: str) -> int:
        """Comment on the MR; returns the note id."""
        return self._transport.post(
            "notes.create", f"{self._mr(project, iid)}/notes", parse_note_id, {"body": body}
        )

    # -- notes and discussions on MRs and issues (the `agent` type) ------------------------
    # `noteable` is "merge_request" or "issue".

    def thread_notes(
        self, project: ProjectRef, noteable: str, iid: int, discussion_id: str
    ) -> list[NoteInfo]:
        """The notes of one discussion, oldest first."""
        path = f"{self._noteable(project, noteable, iid)}/discussions/{_enc(discussion_id)}"
        try:
            return self._transport.get("discussions.get", path, parse_discussion_notes)
        except PermanentGitLabError as error:
            if error.status == 404:
                return []  # no such thread there
            raise

    def note(self, project: ProjectRef, noteable: str, iid: int, note_id: int) -> NoteInfo | None:
        """One note of the MR or issue as GitLab has it; None when it has no such note."""
        try:
            return self._transport.get(
                "notes.get",
                f"{self._noteable(project, noteable, iid)}/notes/{int(note_id)}",
                parse_note,
            )
        except PermanentGitLabError as error:
            if error.status == 404:
                return None
            raise

    def issue_is_confidential(self, project: ProjectRef, iid: int) -> bool:
        return self._transport.get(
            "issues.get",
            f"{self._noteable(project, 'issue', iid)}",
            lambda data: bool(isinstance(data, Mapping) and data.get("confidential") is True),
        )

    def noteable_notes(self, project: ProjectRef, noteable: str, iid: int) -> list[NoteInfo]:
        """Every note of the MR or issue, oldest first."""
        return self._transport.get_all(
            "notes.list",
            f"{self._noteable(project, noteable, iid)}/notes",
            parse_note,
            query={"sort": "asc", "order_by": "created_at"},
        )

    def reply_in_thread(
        self, project: ProjectRef, noteable: str, iid: int, discussion_id: str, body: str
    ) -> int:
        """Reply in the discussion (an internal thread's replies are internal); the note id."""
        path = f"{self._noteable(project, noteable, iid)}/discussions/{_enc(discussion_id)}/notes"
        return self._transport.post("discussions.notes.create", path, parse_note_id, {"body": body})

    def create_note(
        self, project: ProjectRef, noteable: str, iid: int, body: str, *, internal: bool = False
    ) -> int:
        data: dict[str, Any] = {"body": body}
        if internal:
            data["internal"] = True
        return self._transport.post(
            "notes.create", f"{self._noteable(project, noteable, iid)}/notes", parse_note_id, data
        )

    def edit_note(
        self, project: ProjectRef, noteable: str, iid: int, note_id: int, body: str
    ) -> None:
        self._transport.put(
            "notes.update",
            f"{self._noteable(project, noteable, iid)}/notes/{int(note_id)}",
            parse_note_id,
            {"body": body},
        )

    def member_access_level(self, project: ProjectRef, user_id: int) -> int | None:
        """The user's effective access level on the project (inherited included); None when
        not a member."""
        try:
            return self._transport.get(
                "members.all.get",
                f"/projects/{_enc(project)}/members/all/{int(user_id)}",
                parse_access_level,
            )
        except PermanentGitLabError as error:
            if error.status == 404:
                return None
            raise

    # -- pipelines and jobs ------------------------------------------------------------------

    def pipeline(self, project: ProjectRef, pipeline_id: int) -> PipelineInfo:
        return self._transport.get(
            "pipelines.get", f"/projects/{_enc(project)}/pipelines/{pipeline_id}", parse_pipeline
        )

    def pipeline_jobs(
        self, project: ProjectRef, pipeline_id: int, *, include_retried: bool = False
    ) -> list[JobInfo]:
        """The pipeline's jobs, every page; retried (superseded) jobs only if asked."""
        query = {"include_retried": True} if include_retried else {}
        return self._transport.get_all(
            "pipeline_jobs.list",
            f"/projects/{_enc(project)}/pipelines/{pipeline_id}/jobs",
            parse_job,
            query=query,
        )

    def trigger_pipeline(
        self, project: ProjectRef, *, ref: str, variables: Mapping[str, str]
    ) -> PipelineInfo:
        """Run a new pipeline on `ref`'s head (source `api`) with these CI variables.

        Not idempotent: GitLab has no key for it, so a caller that may repeat the
        call after a crash must look for its pipeline first (`pipelines_since`,
        `pipeline_variables`).
        """
        data = {
            "ref": ref,
            "variables": [
                {"key": key, "value": value, "variable_type": "env_var"}
                for key, value in variables.items()
            ],
        }
        return self._transport.post(
            "pipelines.create", f"/projects/{_enc(project)}/pipeline", parse_pipeline, data
        )

    def pipelines_since(
        self, project: ProjectRef, *, ref: str, source: str, updated_after: datetime
    ) -> list[PipelineInfo]:
        """Pipelines of `ref` from `source` updated after the given time, newest first
        (one page of up to 100: callers look for something they created recently)."""
        query = {
            "ref": ref,
            "source": source,
            "updated_after": updated_after.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "order_by": "id",
            "sort": "desc",
            "per_page": 100,
        }
        return self._transport.get(
            "pipelines.list",
            f"/projects/{_enc(project)}/pipelines",
            lambda data: parse_list(data, parse_pipeline, "pipelines"),
            query=query,
        )

    def pipeline_variables(self, project: ProjectRef, pipeline_id: int) -> dict[str, str]:
        """The variables the pipeline was created with, key → value."""
        return self._transport.get(
            "pipelines.variables",
            f"/projects/{_enc(project)}/pipelines/{int(pipeline_id)}/variables",
            parse_variables,
        )

    def merge_base(self, project: ProjectRef, refs: Sequence[str]) -> str:
        """The sha of the best common ancestor of `refs` (at least two).

        GitLab answers 400 `Could not find ref…` for an unknown ref and 404 when the
        refs share no history; both arrive as `PermanentGitLabError` (see
        `is_unknown_ancestry`).
        """
        return self._transport.get(
            "repository.merge_base",
            f"{self._repo(project)}/merge_base",
            lambda data: parse_commit(data, "merge base").sha,
            query={"refs[]": list(refs)},
        )

    def job(self, project: ProjectRef, job_id: int) -> JobInfo:
        return self._transport.get("jobs.get", self._job(project, job_id), parse_job)

    def retry_job(self, project: ProjectRef, job_id: int) -> JobInfo:
        """Retry a finished job; returns the NEW job (a new id). Not retryable → 403."""
        return self._transport.post(
            "jobs.retry", f"{self._job(project, job_id)}/retry", parse_job, {}
        )

    def job_trace_tail(self, project: ProjectRef, job_id: int, max_bytes: int) -> str:
        """The last `max_bytes` bytes of the job log, decoded as UTF-8 with errors replaced.

        The log is streamed and only the tail is kept, so memory stays bounded by
        `max_bytes` whatever the log size. A character cut by the start of the window
        is dropped rather than shown as a replacement character.
        """
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        tail, truncated = self._transport.get_tail(
            "jobs.trace", f"{self._job(project, job_id)}/trace", max_bytes
        )
        if truncated:
            # Skip UTF-8 continuation bytes (10xxxxxx) left over from a cut character.
            start = 0
            while start < min(3, len(tail)) and tail[start] & 0xC0 == 0x80:
                start += 1
            tail = tail[start:]
        return tail.decode("utf-8", errors="replace")

    # -- paths -------------------------------------------------------------------------------

    @staticmethod
    def _repo(project: ProjectRef) -> str:
        return f"/projects/{_enc(project)}/repository"

    @staticmethod
    def _mr(project: ProjectRef, iid: int) -> str:
        return f"/projects/{_enc(project)}/merge_requests/{int(iid)}"

    @staticmethod
    def _noteable(project: ProjectRef, noteable: str, iid: int) -> str:
        if noteable not in {"merge_request", "issue"}:
            raise ValueError(f"not a noteable: {noteable!r}")
        return f"/projects/{_enc(project)}/{noteable}s/{int(iid)}"

    @staticmethod
    def _job(project: ProjectRef, job_id: int) -> str:
        return f"/projects/{_enc(project)}/jobs/{int(job_id)}"


def is_unknown_ancestry(error: PermanentGitLabError) -> bool:
    """Whether a `merge_base` refusal means "these commits are not (all) known here"."""
    if error.status == 404:
        return True
    return error.status == 400 and "could not find" in error.message.lower()


def _usable_token(token: str) -> str:
    """The token without surrounding whitespace; refused if anything else would break it.

    A secret file written by `echo` or `kubectl create secret --from-file` ends in a
    newline. Sent as it is, the header is refused by http.client with an error that
    quotes it, outside the errors the transport scrubs of the token. Tokens are printable
    ASCII without spaces; the message never repeats the token.
    """
    stripped = token.strip()
    if not stripped.isascii() or not stripped.isprintable() or " " in stripped:
        raise ValueError(
            "the GitLab token contains spaces, control or non-ASCII characters; "
            "check the secret it is read from"
        )
    return stripped
