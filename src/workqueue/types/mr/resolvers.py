"""Which active MR items a GitLab event concerns (DDR-32): one resolver per `object_kind`.

Resolvers read the hook payload defensively (GitLab is trusted, but a payload
that lacks a field, or has an unexpected type, must resolve to nothing rather
than fail the delivery) and return ids of items in phase `active` only:
terminal items ignore events (DDR-37).

A hook's project matches an item whose `project` (kept as the caller gave
it) equals the hook's numeric `project.id` as a string or its
`project.path_with_namespace`, compared exactly.

| event type (`object_kind`) | items                                                     |
|----------------------------|-----------------------------------------------------------|
| `merge_request`            | `mr_iid` = iid; items without an MR yet: `source_branch`  |
| `pipeline`                 | `head_pipeline_id` = id, `mr_iid` = its MR's iid (no MR   |
|                            | yet: source branch), or `mr_sha` = sha                    |
| `build` (Job Hook)         | `head_pipeline_id` = pipeline_id, or `mr_sha` = sha       |
| `note`                     | notes on an MR: `mr_iid` = the MR's iid                   |
| `push`                     | `refs/heads/X`: `target_branch` = X (empty-diff re-check) |
|                            | and `source_branch` = X (someone pushed to the bot branch)|
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.registry import ItemTypeRegistration, Resolver

_INT32_MAX = 2**31 - 1  # mr_details.mr_iid is INTEGER
_INT64_MAX = 2**63 - 1  # mr_details.head_pipeline_id is BIGINT
_BRANCH_REF_PREFIX = "refs/heads/"


def resolve_merge_request(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Merge Request Hook: the item of that MR (by iid, or by source branch before it has one)."""
    attributes = _object(body.get("object_attributes"))
    return _active_items(
        session,
        body,
        mr_iid=_integer(attributes.get("iid"), _INT32_MAX),
        branch_without_mr=_text(attributes, "source_branch"),
    )


def resolve_pipeline(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Pipeline Hook: by pipeline id, by the MR of an MR pipeline, or by the commit sha."""
    attributes = _object(body.get("object_attributes"))
    merge_request = _object(body.get("merge_request"))  # null unless an MR pipeline
    return _active_items(
        session,
        body,
        mr_iid=_integer(merge_request.get("iid"), _INT32_MAX),
        branch_without_mr=_text(merge_request, "source_branch"),
        pipeline_id=_integer(attributes.get("id"), _INT64_MAX),
        sha=_text(attributes, "sha"),
    )


def resolve_job(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Job Hook (`object_kind: build`): by its pipeline being the item's head pipeline, or sha."""
    return _active_items(
        session,
        body,
        pipeline_id=_integer(body.get("pipeline_id"), _INT64_MAX),
        sha=_text(body, "sha"),
    )


def resolve_note(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Note Hook: comments on an MR concern that MR's item; others nothing."""
    if _object(body.get("object_attributes")).get("noteable_type") != "MergeRequest":
        return []
    iid = _integer(_object(body.get("merge_request")).get("iid"), _INT32_MAX)
    return _active_items(session, body, mr_iid=iid)


def resolve_push(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Push Hook on a branch: items targeting it, and the item whose bot branch it is."""
    ref = body.get("ref")
    if not isinstance(ref, str) or not ref.startswith(_BRANCH_REF_PREFIX):
        return []
    branch = ref.removeprefix(_BRANCH_REF_PREFIX) or None
    return _active_items(session, body, target_branch=branch, source_branch=branch)


MR_RESOLVERS: Mapping[str, Resolver] = {
    "merge_request": resolve_merge_request,
    "pipeline": resolve_pipeline,
    "build": resolve_job,
    "note": resolve_note,
    "push": resolve_push,
}
"""Event type (GitLab `object_kind`) → resolver."""


def register_mr_resolvers(registration: ItemTypeRegistration) -> None:
    """Route the GitLab event types above to `mr` items (call once, from `install_mr`)."""
    for event_type, resolver in MR_RESOLVERS.items():
        registration.add_resolver(event_type, resolver)


# -- helpers -------------------------------------------------------------------


# One statement for every hook kind (prepared once per connection): a criterion
# whose parameter is NULL matches nothing. `project = ANY(...)` is served by
# the (project, source_branch) and (project, mr_iid) indexes.
_ACTIVE_ITEMS_SQL = sa.text(
    "SELECT detail.id FROM mr_details AS detail "
    "JOIN work_items AS item ON item.id = detail.id "
    "WHERE item.phase = 'active' AND detail.project = ANY(:projects) AND ("
    "  detail.mr_iid = :mr_iid"
    "  OR (detail.mr_iid IS NULL AND detail.source_branch = :branch_without_mr)"
    "  OR detail.head_pipeline_id = :pipeline_id"
    "  OR detail.mr_sha = :sha"
    "  OR detail.target_branch = :target_branch"
    "  OR detail.source_branch = :source_branch"
    ") ORDER BY detail.id"
)


def _active_items(
    session: Session,
    body: Mapping[str, Any],
    *,
    mr_iid: int | None = None,
    branch_without_mr: str | None = None,
    pipeline_id: int | None = None,
    sha: str | None = None,
    target_branch: str | None = None,
    source_branch: str | None = None,
) -> list[uuid.UUID]:
    """Active items of the hook's project meeting any criterion given (none given: no items)."""
    criteria = {
        "mr_iid": mr_iid,
        "branch_without_mr": branch_without_mr,
        "pipeline_id": pipeline_id,
        "sha": sha,
        "target_branch": target_branch,
        "source_branch": source_branch,
    }
    projects = _project_refs(body)
    if not projects or all(value is None for value in criteria.values()):
        return []
    rows = session.execute(_ACTIVE_ITEMS_SQL, {"projects": projects, **criteria})
    return [row[0] for row in rows]


def _project_refs(body: Mapping[str, Any]) -> list[str]:
    """The forms callers may have used for the hook's project: its numeric id and its path."""
    project = _object(body.get("project"))
    refs: list[str] = []
    project_id = _integer(project.get("id"), _INT64_MAX)
    if project_id is None:  # job, note and push hooks also carry a top-level project_id
        project_id = _integer(body.get("project_id"), _INT64_MAX)
    if project_id is not None:
        refs.append(str(project_id))
    path = _text(project, "path_with_namespace")
    if path is not None:
        refs.append(path)
    return refs


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(container: Mapping[str, Any], key: str) -> str | None:
    value = container.get(key)
    return value if isinstance(value, str) and value else None


def _integer(value: Any, maximum: int) -> int | None:
    """A positive id that fits its column; anything else (bool, float, text, huge) is None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= maximum else None
