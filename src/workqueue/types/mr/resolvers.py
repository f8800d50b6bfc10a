"""Which active MR items a GitLab event concerns (DDR-32): one resolver per `object_kind`.

Resolvers read the hook through its typed record (`gitlab.hooks`: a payload
that lacks a field, or has an unexpected type, resolves to nothing rather than
failing the delivery) and return ids of items in phase `active` only:
terminal items ignore events (DDR-37). The query is
`repository.active_items_for_hooks`, one statement for a
batch of deliveries of one kind.

A hook's project matches an item whose canonical project path (resolved
through GitLab at submission, whatever spelling the caller used) equals the
hook's numeric `project.id` as a string or its `project.path_with_namespace`,
compared exactly; the event handlers apply the same rule. A hook that names
no path (Job Hooks of GitLab before 16.0 carry only `project_id`) matches by
the project id the item recorded (`mr_details.project_id`).

| event type (`object_kind`) | items                                                     |
|----------------------------|-----------------------------------------------------------|
| `merge_request`            | `mr_iid` = iid; items without an MR yet: `source_branch`  |
| `pipeline`                 | `head_pipeline_id` = id, `mr_iid` = its MR's iid (no MR   |
|                            | yet: source branch), or `mr_sha` = sha                    |
| `build` (Job Hook)         | `head_pipeline_id` = pipeline_id, or `mr_sha` = sha       |
| `note`                     | notes on an MR: `mr_iid` = the MR's iid                   |
| `push`                     | `refs/heads/X`: `target_branch` = X (empty-diff re-check) |
|                            | and `source_branch` = X (someone pushed to the bot branch)|
| `check_signal` (ours)      | `mr_sha` or `merge_commit_sha` = the signal's sha         |
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from workqueue.gitlab.webhook_bodies import (
    HookProject,
    job_hook,
    merge_request_hook,
    note_hook,
    pipeline_hook,
    push_hook,
)
from workqueue.queue import ItemTypeRegistration, ManyResolver, Resolver
from workqueue.signals.signal import CHECK_SIGNAL_EVENT
from workqueue.types.mr.repository import (
    HookCriteria,
    active_items_for_hooks,
    active_items_on_commit,
)


def merge_request_criteria(body: Mapping[str, Any]) -> HookCriteria | None:
    """Merge Request Hook: the item of that MR (by iid, or by source branch before it has one)."""
    hook = merge_request_hook(body)
    if hook is None:
        return None
    return HookCriteria(
        hook.project.names(),
        project_id=_id_only(hook.project),
        mr_iid=hook.iid,
        branch_without_mr=hook.source_branch,
    )


def pipeline_criteria(body: Mapping[str, Any]) -> HookCriteria | None:
    """Pipeline Hook: by pipeline id, by the MR of an MR pipeline, or by the commit sha."""
    hook = pipeline_hook(body)
    if hook is None:
        return None
    merge_request = hook.merge_request
    return HookCriteria(
        hook.project.names(),
        project_id=_id_only(hook.project),
        mr_iid=None if merge_request is None else merge_request.iid,
        branch_without_mr=None if merge_request is None else merge_request.source_branch,
        pipeline_id=hook.id,
        sha=hook.sha,
    )


def job_criteria(body: Mapping[str, Any]) -> HookCriteria | None:
    """Job Hook (`object_kind: build`): by its pipeline being the item's head pipeline, or sha."""
    hook = job_hook(body)
    if hook is None:
        return None
    return HookCriteria(
        hook.project.names(),
        project_id=_id_only(hook.project),
        pipeline_id=hook.pipeline_id,
        sha=hook.sha,
    )


def note_criteria(body: Mapping[str, Any]) -> HookCriteria | None:
    """Note Hook: comments on an MR concern that MR's item; others nothing."""
    hook = note_hook(body)
    if hook is None or hook.noteable_type != "MergeRequest" or hook.merge_request is None:
        return None
    return HookCriteria(
        hook.project.names(), project_id=_id_only(hook.project), mr_iid=hook.merge_request.iid
    )


def push_criteria(body: Mapping[str, Any]) -> HookCriteria | None:
    """Push Hook on a branch: items targeting it, and the item whose bot branch it is."""
    hook = push_hook(body)
    if hook is None or hook.branch is None:
        return None
    return HookCriteria(
        hook.project.names(),
        project_id=_id_only(hook.project),
        target_branch=hook.branch,
        source_branch=hook.branch,
    )


def _id_only(project: HookProject) -> int | None:
    """The hook's project id when it names no path: then items are found by the id
    they recorded. With a path, the path decides (and the id must agree, see
    `HookProject.is_one_of`)."""
    return project.id if project.path is None else None


Criteria = Callable[[Mapping[str, Any]], HookCriteria | None]

MR_CRITERIA: Mapping[str, Criteria] = {
    "merge_request": merge_request_criteria,
    "pipeline": pipeline_criteria,
    "build": job_criteria,
    "note": note_criteria,
    "push": push_criteria,
}
"""Event type (GitLab `object_kind`) → what its hooks say about the items they concern."""


def resolver(criteria: Criteria) -> Resolver:
    """The resolver of one hook kind: its criteria, looked up."""

    def resolve(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
        return active_items_for_hooks(session, [criteria(body)])[0]

    return resolve


def resolver_of_many(criteria: Criteria) -> ManyResolver:
    """The same for many hooks of that kind, in one lookup."""

    def resolve_many(
        session: Session, bodies: Sequence[Mapping[str, Any]]
    ) -> list[list[uuid.UUID]]:
        return active_items_for_hooks(session, [criteria(body) for body in bodies])

    return resolve_many


MR_RESOLVERS: Mapping[str, Resolver] = {
    event_type: resolver(criteria) for event_type, criteria in MR_CRITERIA.items()
}
"""Event type (GitLab `object_kind`) → resolver of one hook."""


def signal_items(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """A stored signal's commit (`signals.repository` writes `{"project", "sha"}`)."""
    project, sha = body.get("project"), body.get("sha")
    if not isinstance(project, str) or not isinstance(sha, str):
        return []
    return active_items_on_commit(session, project, sha)


def register_mr_resolvers(registration: ItemTypeRegistration) -> None:
    """Route the GitLab event types above, and stored signals, to `mr` items (call once,
    from `install_mr`)."""
    for event_type, criteria in MR_CRITERIA.items():
        registration.add_resolver(event_type, resolver(criteria), many=resolver_of_many(criteria))
    registration.add_resolver(CHECK_SIGNAL_EVENT, signal_items)
