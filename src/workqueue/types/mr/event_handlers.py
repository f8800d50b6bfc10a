"""What GitLab's webhooks mean for an MR item (DDR-33/37/38). Read-only and pure.

Each handler reads the raw hook body (the shapes of `shared/gitlab/hook_*.json`)
and the item, and returns an `EventResult`; the generic layer applies it, and
only to active items (DDR-37). No handler calls GitLab: where an event is only a
hint (an approval, a pipeline finishing), it sets `needs_reconcile` and
`reconcile_mr` looks at the MR itself (DDR-46).

Ordering (DDR-33): `event_ts` is set only on results that carry a phase or
detail change — those are the parts the generic layer refuses to apply when the
event is older than the last one applied (`last_event_at`). Results that only
raise `needs_*` flags carry no `event_ts`: a flag is safe to raise late (the
executor it triggers reads GitLab), and a timestamp on them would only make a
later state-carrying event look stale.

Event types (GitLab's `object_kind`): `merge_request`, `pipeline`, `build` (Job
Hook), `note`, `push`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from workqueue.queue.context import EventContext
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.events import EventResult
from workqueue.queue.models import DimensionStatus
from workqueue.queue.registry import ItemTypeRegistration
from workqueue.types.mr.authorship import stamped_item
from workqueue.types.mr.models import MRDimension, MRWorkItem

ZERO_SHA = "0" * 40  # `before`/`after` of a push that created/deleted a branch
_HEADS_PREFIX = "refs/heads/"

# "2025-03-01 10:00:00 UTC", "2025-03-01T10:00:00Z", "...+02:00", "... +0200".
_TIME_WITH_ZONE = re.compile(
    r"^(?P<stamp>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*"
    r"(?P<zone>UTC|Z|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)

_RECONCILE = DimensionUpdate(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
_EMPTY_CHECK_NOW = DimensionUpdate(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.TRUE)


def register_mr_event_handlers(registration: ItemTypeRegistration) -> None:
    """Attach the `mr` handlers for every GitLab event type the type understands."""
    registration.add_event_handler("merge_request", on_merge_request)
    registration.add_event_handler("pipeline", on_pipeline)
    registration.add_event_handler("build", on_job)
    registration.add_event_handler("note", on_note)
    registration.add_event_handler("push", on_push)


# -- handlers ------------------------------------------------------------------------


def on_merge_request(context: EventContext) -> EventResult | None:
    """Merge Request Hook: merged, closed, new commits, approvals, anything else.

    Every event about the item's MR sets `needs_reconcile`, and that is all a
    merge or a close does: the hook body is not proof (a forged or replayed
    delivery would end the item), so `reconcile_mr` reads the MR from GitLab
    and ends the item only on what GitLab says.
    """
    item = _item(context)
    body = context.body
    attributes = _object(body, "object_attributes")
    if not _kind_is(body, "merge_request") or not _same_project(item, body):
        return None
    iid = _integer(attributes.get("iid"))
    if item.mr_iid is None or iid != item.mr_iid:
        return None  # another MR of the branch (e.g. one closed before a resubmission)
    action = _text(attributes.get("action")) or "update"
    actor = _object(body, "user")
    by = f" by {actor['username']}" if isinstance(actor.get("username"), str) else ""
    event_ts = parse_gitlab_time(attributes.get("updated_at"))

    state = attributes.get("state")
    if state in {"merged", "closed"} or action in {"merge", "close"}:
        # A claim to check, not a phase to apply (see the docstring).
        return EventResult(
            dimensions=(_RECONCILE,),
            reason=f"MR !{iid}: {action}{by}, state {state}; confirming with GitLab",
        )
    if action == "update" and attributes.get("oldrev"):
        last_commit = _object(attributes, "last_commit")
        new_head = _text(last_commit.get("id"))
        if is_foreign_push(
            item,
            before=_text(attributes.get("oldrev")),
            after=new_head,
            head_message=_text(last_commit.get("message")),
        ):
            return _foreign_result(new_head, event_ts, f"MR !{iid} got commits{by}")
    return EventResult(dimensions=(_RECONCILE,), reason=f"MR !{iid}: {action}{by}")


def on_pipeline(context: EventContext) -> EventResult | None:
    """Pipeline Hook for the MR's current head: record it, look at the MR, flag failed jobs.

    Pipelines for another sha (an older push, or a human's commits) are
    ignored: they say nothing about what would be merged. So are pipelines
    older than the head pipeline already recorded for the same sha.
    """
    item = _item(context)
    body = context.body
    if not _kind_is(body, "pipeline") or not _same_project(item, body):
        return None
    attributes = _object(body, "object_attributes")
    pipeline_id = _integer(attributes.get("id"))
    sha = _text(attributes.get("sha"))
    if pipeline_id is None or item.mr_sha is None or sha != item.mr_sha:
        return None
    merge_request = body.get("merge_request")
    if isinstance(merge_request, Mapping):
        if _integer(merge_request.get("iid")) != item.mr_iid:
            return None
    elif attributes.get("ref") != item.source_branch:
        return None  # a branch pipeline of some other branch that has the same commit
    if (
        item.head_pipeline_id is not None
        and pipeline_id < item.head_pipeline_id
        and item.head_pipeline_sha == sha
    ):
        return None  # superseded by a newer pipeline for the same commit
    status = _text(attributes.get("status"))
    failed = sorted(
        {
            name
            for build in _objects(body, "builds")
            if build.get("status") == "failed"
            and not build.get("allow_failure")  # its failure blocks nothing
            and (name := _text(build.get("name")))
        }
    )
    return EventResult(
        event_ts=parse_gitlab_time(attributes.get("finished_at"))
        or parse_gitlab_time(attributes.get("created_at")),
        dimensions=(_RECONCILE, *(_ci_retry(name) for name in failed)),
        detail_updates={
            "head_pipeline_id": pipeline_id,
            "head_pipeline_sha": sha,
            "head_pipeline_status": status,
        },
        reason=f"pipeline {pipeline_id} is {status}"
        + (f"; failed jobs: {', '.join(failed)}" if failed else ""),
    )


def on_job(context: EventContext) -> EventResult | None:
    """Job Hook (`build`): a failed job of the head pipeline may deserve a retry.

    The herder (`retry_ci`) decides; this only raises `needs_ci_retry` for the
    job's name. A job of a pipeline newer than the recorded head pipeline also
    sets `needs_reconcile`, which runs first and records that pipeline.
    """
    item = _item(context)
    body = context.body
    if not _kind_is(body, "build") or not _same_project(item, body):
        return None
    if body.get("build_status") != "failed" or body.get("build_allow_failure") is True:
        return None
    name = _text(body.get("build_name"))
    pipeline_id = _integer(body.get("pipeline_id"))
    if not name or pipeline_id is None:
        return None
    if item.mr_sha is None or _text(body.get("sha")) != item.mr_sha:
        return None
    known = item.head_pipeline_id
    if known is not None and pipeline_id < known:
        return None  # a pipeline the head pipeline superseded
    dimensions = (_ci_retry(name),) if pipeline_id == known else (_RECONCILE, _ci_retry(name))
    reason = _text(body.get("build_failure_reason")) or "unknown_failure"
    return EventResult(
        dimensions=dimensions,
        reason=f"job {name} ({body.get('build_id')}) of pipeline {pipeline_id} failed: {reason}",
    )


def on_note(context: EventContext) -> EventResult | None:
    """Note Hook: ignored.

    A comment changes nothing the service acts on: approvals, draft changes and
    merges come as Merge Request Hooks, and nothing here takes commands from
    comments. Registered so that note events are recorded as seen-and-irrelevant
    rather than as "no handler".
    """
    del context
    return None


def on_push(context: EventContext) -> EventResult | None:
    """Push Hook: to the target branch → re-check for an empty diff now (DDR-43);
    to the bot branch by someone else → remember their head (no force-push over it).
    """
    item = _item(context)
    body = context.body
    if not _kind_is(body, "push") or not _same_project(item, body):
        return None
    ref = _text(body.get("ref"))
    if ref is None or not ref.startswith(_HEADS_PREFIX):
        return None  # tags
    branch = ref.removeprefix(_HEADS_PREFIX)
    after = _text(body.get("checkout_sha")) or _text(body.get("after"))
    deleted = after is None or after == ZERO_SHA
    if branch == item.source_branch:
        return _push_to_bot_branch(item, body, branch, None if deleted else after)
    if item.target_branch is not None and branch == item.target_branch and not deleted:
        return EventResult(
            dimensions=(_EMPTY_CHECK_NOW,),
            reason=f"push to the target branch {branch}: re-check for an empty diff",
        )
    return None


# -- helpers -------------------------------------------------------------------------


def is_foreign_push(
    item: MRWorkItem, *, before: str | None, after: str | None, head_message: str | None
) -> bool:
    """Did someone other than the service move the bot branch from a head we know to `after`?

    * before the service pushed anything (`mr_sha` unset) the branch is not ours yet;
    * `after` equal to our head (or the foreign head already recorded) is nothing new;
    * a push that did not start from our head or the recorded foreign head is a
      late hook of an older push of ours, not news about the current branch;
    * a head commit stamped for this item (its message ends with the
      `Workqueue-Item: <id>` trailer, see `authorship`) is one of our commits
      whose step was rolled back after the push, not a person's work.

    A hint only: hooks carry no trustworthy author, so a person who amends our
    commit keeping its message is taken for us here. That costs nothing:
    `ensure_mr` reads the branch head itself (author and committer included)
    before every push, and `reconcile_mr` merges only `mr_sha`.
    """
    if item.mr_sha is None or after is None or after == ZERO_SHA:
        return False
    known = {item.mr_sha, item.foreign_head_sha} - {None}
    if after in known or before not in known:
        return False
    return item.id is None or stamped_item(head_message) != item.id


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


def _push_to_bot_branch(
    item: MRWorkItem, body: Mapping[str, Any], branch: str, after: str | None
) -> EventResult | None:
    """A push to the item's own branch: deleted, someone else's commits, or ours (None)."""
    if after is None:
        return EventResult(
            dimensions=(_RECONCILE,), reason=f"branch {branch} was deleted on GitLab"
        )
    head = next((c for c in _objects(body, "commits") if c.get("id") == after), {})
    if not is_foreign_push(
        item,
        before=_text(body.get("before")),
        after=after,
        head_message=_text(head.get("message")),
    ):
        return None  # our own push: the MR and pipeline hooks that follow drive the rest
    user = body.get("user_username")
    by = f" by {user}" if isinstance(user, str) else ""
    # Push hooks carry no event time (commit timestamps are authoring times).
    return _foreign_result(after, None, f"push to {branch}{by}")


def _foreign_result(head: str | None, event_ts: datetime | None, what: str) -> EventResult:
    return EventResult(
        event_ts=event_ts,
        dimensions=(_RECONCILE,),
        detail_updates={"foreign_head_sha": head},
        reason=f"{what}: the bot branch now has commits the service did not push ({head}); "
        "it will not push over them nor merge them",
    )


def _ci_retry(job_name: str) -> DimensionUpdate:
    return DimensionUpdate(MRDimension.NEEDS_CI_RETRY, DimensionStatus.TRUE, variant=job_name)


def _item(context: EventContext) -> MRWorkItem:
    return cast("MRWorkItem", context.item)


def _kind_is(body: Mapping[str, Any], kind: str) -> bool:
    found = body.get("object_kind")
    return found is None or found == kind


def _same_project(item: MRWorkItem, body: Mapping[str, Any]) -> bool:
    """Whether the hook is about the item's project (by id or path, as the item names it)."""
    project = _object(body, "project")
    project_id = _integer(project.get("id"))
    if project_id is None:
        project_id = _integer(body.get("project_id"))
    if item.project.isdigit():
        return project_id is None or project_id == int(item.project)
    path = _text(project.get("path_with_namespace"))
    return path is None or path.casefold() == item.project.casefold()


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


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
