"""GitLab webhook bodies read once, into small typed records. Pure; no I/O.

Every item type that reacts to GitLab's hooks reads them through these
records, so one set of rules holds everywhere:

* A body is parsed for the event type the receiver decided (`object_kind`, or
  the `X-Gitlab-Event` header when the body has none). A body whose
  `object_kind` names another kind is not that hook (`None`).
* Ids are JSON integers, positive and at most 2^63 - 1 (PostgreSQL's BIGINT).
  GitLab sends integers; `"123"`, `12.0`, `true` and out-of-range numbers are
  read as absent, never guessed at.
* Text is a non-empty JSON string; anything else is absent. Flags are JSON
  `true` only.
* Times go through `parse_gitlab_time` (GitLab mixes three spellings).
* A hook's project is its numeric id (`project.id`, else the top-level
  `project_id`) and its `path_with_namespace`, GitLab's canonical path.
  `HookProject.is_one_of` compares them exactly with the names an item keeps
  (its canonical path, resolved through GitLab at submission, and the
  spelling the caller gave): no case folding, which could only ever add a
  match GitLab itself would not make, and never "the id or the path" when the
  other contradicts it. That a body's id and path name one project is checked
  with GitLab before it is stored (`api.webhook_projects`); a body whose
  `project.id` and `project_id` differ contradicts itself
  (`project_id_conflict`). A project id that is there but is no JSON integer
  (`1e2`, `100.0`, `"100"`, `true`) is read as absent here, yet PostgreSQL's
  JSONB stores `1e2` as `100`: the receivers refuse such a body
  (`malformed_project_ids`) so the body checked is the body stored.
* `object_kind` is taken only when it is one GitLab sends
  (`GITLAB_OBJECT_KINDS`): item types also store events for themselves (a
  kept trunk hint, `trunk.read_head`), and a delivery from outside must never
  reach their handlers.

A malformed field makes that field absent; a malformed body makes a record
whose fields are absent, which concerns nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_ID = 2**63 - 1

GITLAB_OBJECT_KINDS = frozenset(
    {
        # The `object_kind` values of GitLab's project and group webhooks (GitLab 17.x).
        "access_token",
        "build",
        "deployment",
        "emoji",
        "feature_flag",
        "issue",
        "merge_request",
        "milestone",
        "note",
        "pipeline",
        "push",
        "release",
        "tag_push",
        "vulnerability",
        "wiki_page",
        "work_item",
    }
)
"""What a delivery from outside may be; any other kind (the service's own) is unhandled."""
ZERO_SHA = "0" * 40  # `before`/`after` of a push that created/deleted a branch
HEADS_PREFIX = "refs/heads/"

# "2025-03-01 10:00:00 UTC", "2025-03-01T10:00:00Z", "...+02:00", "... +0200".
_TIME_WITH_ZONE = re.compile(
    r"^(?P<stamp>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*"
    r"(?P<zone>UTC|Z|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class HookProject:
    """The project a hook is about."""

    id: int | None
    path: str | None  # path_with_namespace, as GitLab spells it

    def names(self) -> tuple[str, ...]:
        """The spellings an item may keep for this project: its id in decimal, its path."""
        found = [] if self.id is None else [str(self.id)]
        return (*found, self.path) if self.path is not None else tuple(found)

    def is_one_of(self, *item_names: str | None) -> bool:
        """Whether the item's names for its project (a path, a numeric id in decimal, or
        both) are ours: one of them equals our name of its kind, and none of either kind
        contradicts ours. An item known by path and id is not taken for a hook whose path
        matches while its id names another project, nor the other way round.

        The hook's own id and path are not compared here (that needs GitLab): the
        receivers do it before a body is stored (`api.webhook_projects`).
        """
        ids = {name for name in item_names if name is not None and _is_decimal_id(name)}
        paths = {name for name in item_names if name is not None and name not in ids}
        id_known = self.id is not None and bool(ids)
        path_known = self.path is not None and bool(paths)
        id_agrees = id_known and str(self.id) in ids
        path_agrees = path_known and self.path in paths
        return (id_agrees or path_agrees) and id_agrees == id_known and path_agrees == path_known


@dataclass(frozen=True, slots=True)
class MergeRequestHook:
    project: HookProject
    iid: int | None
    source_branch: str | None
    action: str | None
    state: str | None
    oldrev: str | None  # set on an update that brought new commits
    last_commit_id: str | None
    last_commit_message: str | None
    updated_at: datetime | None
    username: str | None


@dataclass(frozen=True, slots=True)
class MergeRequestRef:
    """The MR a pipeline or note hook names."""

    iid: int | None
    source_branch: str | None


@dataclass(frozen=True, slots=True)
class PipelineBuild:
    name: str | None
    status: str | None
    allow_failure: bool


@dataclass(frozen=True, slots=True)
class PipelineHook:
    project: HookProject
    id: int | None
    sha: str | None
    ref: str | None
    status: str | None
    created_at: datetime | None
    finished_at: datetime | None
    merge_request: MergeRequestRef | None  # None: not an MR pipeline
    builds: tuple[PipelineBuild, ...]
    variables: tuple[tuple[str, str], ...]

    def variable(self, key: str) -> str | None:
        """The value of pipeline variable `key` (the last one when repeated)."""
        found = None
        for name, value in self.variables:
            if name == key:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class JobHook:
    """A Job Hook (`object_kind: build`)."""

    project: HookProject
    build_id: int | None
    name: str | None
    status: str | None
    allow_failure: bool
    failure_reason: str | None
    pipeline_id: int | None
    sha: str | None


@dataclass(frozen=True, slots=True)
class NoteHook:
    project: HookProject
    noteable_type: str | None
    merge_request: MergeRequestRef | None


@dataclass(frozen=True, slots=True)
class PushCommit:
    id: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class PushHook:
    project: HookProject
    ref: str | None
    before: str | None
    after: str | None
    checkout_sha: str | None
    username: str | None
    commits: tuple[PushCommit, ...]

    @property
    def branch(self) -> str | None:
        """The branch pushed to; None for tags and anything that is not `refs/heads/X`."""
        if self.ref is None or not self.ref.startswith(HEADS_PREFIX):
            return None
        return self.ref.removeprefix(HEADS_PREFIX) or None

    @property
    def head(self) -> str | None:
        """The branch's new head; None when the push deleted the branch."""
        head = self.checkout_sha or self.after
        return None if head is None or head == ZERO_SHA else head

    def commit(self, sha: str) -> PushCommit | None:
        return next((commit for commit in self.commits if commit.id == sha), None)


# -- parsers -------------------------------------------------------------------------


def merge_request_hook(body: Mapping[str, Any]) -> MergeRequestHook | None:
    if not _kind_is(body, "merge_request"):
        return None
    attributes = _object(body, "object_attributes")
    last_commit = _object(attributes, "last_commit")
    return MergeRequestHook(
        project=hook_project(body),
        iid=_id(attributes.get("iid")),
        source_branch=_text(attributes.get("source_branch")),
        action=_text(attributes.get("action")),
        state=_text(attributes.get("state")),
        oldrev=_text(attributes.get("oldrev")),
        last_commit_id=_text(last_commit.get("id")),
        last_commit_message=_text(last_commit.get("message")),
        updated_at=parse_gitlab_time(attributes.get("updated_at")),
        username=_text(_object(body, "user").get("username")),
    )


def pipeline_hook(body: Mapping[str, Any]) -> PipelineHook | None:
    if not _kind_is(body, "pipeline"):
        return None
    attributes = _object(body, "object_attributes")
    merge_request = body.get("merge_request")  # null unless an MR pipeline
    return PipelineHook(
        project=hook_project(body),
        id=_id(attributes.get("id")),
        sha=_text(attributes.get("sha")),
        ref=_text(attributes.get("ref")),
        status=_text(attributes.get("status")),
        created_at=parse_gitlab_time(attributes.get("created_at")),
        finished_at=parse_gitlab_time(attributes.get("finished_at")),
        merge_request=_merge_request_ref(merge_request)
        if isinstance(merge_request, Mapping)
        else None,
        builds=tuple(
            PipelineBuild(
                name=_text(build.get("name")),
                status=_text(build.get("status")),
                allow_failure=build.get("allow_failure") is True,
            )
            for build in _objects(body, "builds")
        ),
        variables=tuple(
            (key, value)
            for variable in _objects(attributes, "variables")
            if isinstance(key := variable.get("key"), str)
            and isinstance(value := variable.get("value"), str)
        ),
    )


def job_hook(body: Mapping[str, Any]) -> JobHook | None:
    if not _kind_is(body, "build"):
        return None
    return JobHook(
        project=hook_project(body),
        build_id=_id(body.get("build_id")),
        name=_text(body.get("build_name")),
        status=_text(body.get("build_status")),
        allow_failure=body.get("build_allow_failure") is True,
        failure_reason=_text(body.get("build_failure_reason")),
        pipeline_id=_id(body.get("pipeline_id")),
        sha=_text(body.get("sha")),
    )


def note_hook(body: Mapping[str, Any]) -> NoteHook | None:
    if not _kind_is(body, "note"):
        return None
    merge_request = body.get("merge_request")
    return NoteHook(
        project=hook_project(body),
        noteable_type=_text(_object(body, "object_attributes").get("noteable_type")),
        merge_request=_merge_request_ref(merge_request)
        if isinstance(merge_request, Mapping)
        else None,
    )


def push_hook(body: Mapping[str, Any]) -> PushHook | None:
    if not _kind_is(body, "push"):
        return None
    return PushHook(
        project=hook_project(body),
        ref=_text(body.get("ref")),
        before=_text(body.get("before")),
        after=_text(body.get("after")),
        checkout_sha=_text(body.get("checkout_sha")),
        username=_text(body.get("user_username")),
        commits=tuple(
            PushCommit(id=_text(commit.get("id")), message=_text(commit.get("message")))
            for commit in _objects(body, "commits")
        ),
    )


def project_id_conflict(body: Mapping[str, Any]) -> bool:
    """Whether `project.id` and the top-level `project_id` (Job, Note and Push Hooks carry
    both) are two different ids: a body that contradicts itself, as GitLab never does."""
    nested, top_level = _id(_object(body, "project").get("id")), _id(body.get("project_id"))
    return nested is not None and top_level is not None and nested != top_level


def malformed_project_ids(body: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Where the body has a project id that is no id: present, not null, and not a
    positive JSON integer up to 2^63 - 1 (`project.id`, then `project_id`). Pure."""
    found: list[tuple[str, ...]] = []
    for where, value in (
        (("project", "id"), _object(body, "project").get("id")),
        (("project_id",), body.get("project_id")),
    ):
        if value is not None and _id(value) is None:
            found.append(where)
    return found


def hook_project(body: Mapping[str, Any]) -> HookProject:
    """The hook's project: `project.id` (else the top-level `project_id`) and its path."""
    project = _object(body, "project")
    project_id = _id(project.get("id"))
    if project_id is None:  # job, note and push hooks also carry a top-level project_id
        project_id = _id(body.get("project_id"))
    return HookProject(id=project_id, path=_text(project.get("path_with_namespace")))


def parse_gitlab_time(value: object) -> datetime | None:
    """A hook timestamp as an aware UTC datetime; None when absent or unreadable.

    GitLab mixes "2025-03-01T10:00:00Z", "2025-03-01 10:00:00 UTC" and offsets
    ("+02:00", "+0200"); a stamp without a zone is taken as UTC.
    """
    if not isinstance(value, str):
        return None
    match = _TIME_WITH_ZONE.match(value.strip())
    if match is None:
        return None
    stamp, zone = match["stamp"].replace(" ", "T"), (match["zone"] or "").upper()
    if zone in {"", "UTC", "Z"}:
        zone = "+00:00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        return datetime.fromisoformat(stamp + zone).astimezone(UTC)
    except ValueError:
        return None


# -- field rules ---------------------------------------------------------------------


def _kind_is(body: Mapping[str, Any], kind: str) -> bool:
    """The body may lack `object_kind` (the header named the kind); it may not contradict it."""
    found = body.get("object_kind")
    return found is None or found == kind


def _merge_request_ref(value: Mapping[str, Any]) -> MergeRequestRef:
    return MergeRequestRef(
        iid=_id(value.get("iid")), source_branch=_text(value.get("source_branch"))
    )


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _objects(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = data.get(key)
    if not isinstance(value, list):
        return []
    return [entry for entry in value if isinstance(entry, Mapping)]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_decimal_id(name: str) -> bool:
    """A project named by its id as `names()` spells it (a project path never is digits)."""
    return name.isascii() and name.isdigit()


def _id(value: object) -> int | None:
    """A positive JSON integer that fits BIGINT; anything else (bool, float, text) is None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= MAX_ID else None


# `X-Gitlab-Event` header → `object_kind`, for payloads that lack the latter.
GITLAB_EVENT_TYPES: Mapping[str, str] = {
    "Merge Request Hook": "merge_request",
    "Pipeline Hook": "pipeline",
    "Job Hook": "build",
    "Note Hook": "note",
    "Push Hook": "push",
    "Tag Push Hook": "tag_push",
    "Issue Hook": "issue",
    "Confidential Issue Hook": "issue",
    "Confidential Note Hook": "note",
    "Deployment Hook": "deployment",
    "Release Hook": "release",
    "Wiki Page Hook": "wiki_page",
}


def gitlab_event_type(body: Mapping[str, Any], event_header: str | None = None) -> str | None:
    """The payload's `object_kind`, else the type named by the `X-Gitlab-Event` header;
    None for a kind GitLab does not send (the service's own, `trunk.read_head`)."""
    kind = body.get("object_kind")
    if isinstance(kind, str) and kind:
        return kind if kind in GITLAB_OBJECT_KINDS else None
    if event_header is None:
        return None
    return GITLAB_EVENT_TYPES.get(event_header.strip())
