"""Which active MR items a GitLab event concerns (DDR-32): one resolver per `object_kind`.

Resolvers read the hook through its typed record (`gitlab.hooks`: a payload
that lacks a field, or has an unexpected type, resolves to nothing rather than
failing the delivery) and return ids of items in phase `active` only:
terminal items ignore events (DDR-37). The query is
`repository.active_items_for_hook`.

A hook's project matches an item whose canonical project path (resolved
through GitLab at submission, whatever spelling the caller used) equals the
hook's numeric `project.id` as a string or its `project.path_with_namespace`,
compared exactly; the event handlers apply the same rule.

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

from sqlalchemy.orm import Session

from workqueue.gitlab.hooks import job_hook, merge_request_hook, note_hook, pipeline_hook, push_hook
from workqueue.queue.contract import Resolver
from workqueue.queue.registry import ItemTypeRegistration
from workqueue.types.mr.repository import active_items_for_hook


def resolve_merge_request(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Merge Request Hook: the item of that MR (by iid, or by source branch before it has one)."""
    hook = merge_request_hook(body)
    if hook is None:
        return []
    return active_items_for_hook(
        session,
        hook.project.names(),
        mr_iid=hook.iid,
        branch_without_mr=hook.source_branch,
    )


def resolve_pipeline(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Pipeline Hook: by pipeline id, by the MR of an MR pipeline, or by the commit sha."""
    hook = pipeline_hook(body)
    if hook is None:
        return []
    merge_request = hook.merge_request
    return active_items_for_hook(
        session,
        hook.project.names(),
        mr_iid=None if merge_request is None else merge_request.iid,
        branch_without_mr=None if merge_request is None else merge_request.source_branch,
        pipeline_id=hook.id,
        sha=hook.sha,
    )


def resolve_job(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Job Hook (`object_kind: build`): by its pipeline being the item's head pipeline, or sha."""
    hook = job_hook(body)
    if hook is None:
        return []
    return active_items_for_hook(
        session, hook.project.names(), pipeline_id=hook.pipeline_id, sha=hook.sha
    )


def resolve_note(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Note Hook: comments on an MR concern that MR's item; others nothing."""
    hook = note_hook(body)
    if hook is None or hook.noteable_type != "MergeRequest" or hook.merge_request is None:
        return []
    return active_items_for_hook(session, hook.project.names(), mr_iid=hook.merge_request.iid)


def resolve_push(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    """Push Hook on a branch: items targeting it, and the item whose bot branch it is."""
    hook = push_hook(body)
    if hook is None or hook.branch is None:
        return []
    return active_items_for_hook(
        session, hook.project.names(), target_branch=hook.branch, source_branch=hook.branch
    )


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
