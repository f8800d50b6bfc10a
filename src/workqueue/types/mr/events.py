"""What GitLab's webhooks mean for an MR item (DDR-33/37/38). Read-only and pure.

Each handler reads the hook through its typed record (`gitlab.hooks`, the one
reader of GitLab's hook bodies) and the item, and returns an `EventResult`;
the generic layer applies it, and only to active items (DDR-37). No handler
calls GitLab: where an event is only a hint (an approval, a pipeline
finishing), it sets `needs_reconcile` and `reconcile_mr` looks at the MR
itself (DDR-46).

Ordering (DDR-33): `event_ts` is set only on results that carry a phase or
detail change — those are the parts the generic layer refuses to apply when the
event is older than the last one applied (`last_event_at`). Results that only
raise `needs_*` flags carry no `event_ts`: a flag is safe to raise late (the
executor it triggers reads GitLab), and a timestamp on them would only make a
later state-carrying event look stale.

Event types (GitLab's `object_kind`): `merge_request`, `pipeline`, `build` (Job
Hook), `note`, `push`; and the service's own `check_signal` (a stored signal
about the item's commit: see `signals/`).
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from workqueue.gitlab.webhook_bodies import (
    ZERO_SHA,
    HookProject,
    MergeRequestRef,
    PipelineHook,
    PushHook,
    job_hook,
    merge_request_hook,
    pipeline_hook,
    push_hook,
)
from workqueue.queue import (
    DimensionStatus,
    DimensionUpdate,
    EventContext,
    EventResult,
    ItemTypeRegistration,
)
from workqueue.signals.signal import CHECK_SIGNAL_EVENT
from workqueue.types.mr.authorship import stamped_item
from workqueue.types.mr.models import MRDimension, MRWorkItem

_RECONCILE = DimensionUpdate(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
_EMPTY_CHECK_NOW = DimensionUpdate(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.TRUE)
_POST_MERGE = DimensionUpdate(MRDimension.NEEDS_POST_MERGE, DimensionStatus.TRUE)


def register_mr_event_handlers(registration: ItemTypeRegistration) -> None:
    """Attach the `mr` handlers for every GitLab event type the type understands."""
    registration.add_event_handler("merge_request", on_merge_request)
    registration.add_event_handler("pipeline", on_pipeline)
    registration.add_event_handler("build", on_job)
    registration.add_event_handler("note", on_note)
    registration.add_event_handler("push", on_push)
    registration.add_event_handler(CHECK_SIGNAL_EVENT, on_check_signal)


# -- handlers ------------------------------------------------------------------------


def on_merge_request(context: EventContext) -> EventResult | None:
    """Merge Request Hook: merged, closed, new commits, approvals, anything else.

    Every event about the item's MR sets `needs_reconcile`, and that is all a
    merge or a close does: the hook body is not proof (a forged or replayed
    delivery would end the item), so `reconcile_mr` reads the MR from GitLab
    and ends the item only on what GitLab says.
    """
    item = _item(context)
    hook = merge_request_hook(context.body)
    if hook is None or not _same_project(item, hook.project):
        return None
    iid = hook.iid
    if item.mr_iid is None or iid != item.mr_iid:
        return None  # another MR of the branch (e.g. one closed before a resubmission)
    action = hook.action or "update"
    by = f" by {hook.username}" if hook.username else ""
    if hook.state in {"merged", "closed"} or action in {"merge", "close"}:
        # A claim to check, not a phase to apply (see the docstring).
        state = f", state {hook.state}" if hook.state else ""
        return EventResult(
            dimensions=(_RECONCILE,),
            reason=f"MR !{iid}: {action}{by}{state}; confirming with GitLab",
        )
    if action == "update" and hook.oldrev is not None:
        new_head = hook.last_commit_id
        if is_foreign_push(
            item, before=hook.oldrev, after=new_head, head_message=hook.last_commit_message
        ):
            return _foreign_result(new_head, hook.updated_at, f"MR !{iid} got commits{by}")
    return EventResult(dimensions=(_RECONCILE,), reason=f"MR !{iid}: {action}{by}")


def on_pipeline(context: EventContext) -> EventResult | None:
    """Pipeline Hook for the MR's current head: record it, look at the MR, flag failed jobs.

    Pipelines for another sha (an older push, or a human's commits) are not
    recorded: they say nothing about what would be merged. One of the item's MR
    only makes `reconcile_mr` look, since it may be a merged-results pipeline
    of the head (whose sha is a temporary merge commit); GitLab decides that,
    not the hook. Pipelines older than the head pipeline already recorded for
    the same sha are ignored.
    """
    item = _item(context)
    hook = pipeline_hook(context.body)
    if hook is None or not _same_project(item, hook.project):
        return None
    pipeline_id, sha = hook.id, hook.sha
    if pipeline_id is None or item.mr_sha is None:
        return None
    if sha != item.mr_sha:
        return _other_sha_pipeline(item, hook.merge_request, pipeline_id, sha)
    if not _for_the_head(item, hook, pipeline_id):
        return None
    failed = sorted(
        {
            build.name
            for build in hook.builds
            if build.status == "failed"
            and not build.allow_failure  # its failure blocks nothing
            and build.name
        }
    )
    return EventResult(
        event_ts=hook.finished_at or hook.created_at,
        dimensions=(_RECONCILE, *(_ci_retry(name) for name in failed)),
        detail_updates={
            "head_pipeline_id": pipeline_id,
            "head_pipeline_sha": sha,
            "head_pipeline_status": hook.status,
        },
        reason=(
            f"pipeline {pipeline_id} is {hook.status}"
            if hook.status
            else f"pipeline {pipeline_id} sent no status"
        )
        + (f"; failed jobs: {', '.join(failed)}" if failed else ""),
    )


def _for_the_head(item: MRWorkItem, hook: PipelineHook, pipeline_id: int) -> bool:
    """Whether a pipeline on the item's head sha is the MR's latest pipeline for it."""
    if hook.merge_request is not None:
        if hook.merge_request.iid != item.mr_iid:
            return False
    elif hook.ref != item.source_branch:
        return False  # a branch pipeline of some other branch that has the same commit
    # A pipeline older than the recorded one for the same commit was superseded.
    return not (
        item.head_pipeline_id is not None
        and pipeline_id < item.head_pipeline_id
        and item.head_pipeline_sha == hook.sha
    )


def _other_sha_pipeline(
    item: MRWorkItem, merge_request: MergeRequestRef | None, pipeline_id: int, sha: str | None
) -> EventResult | None:
    """A pipeline of the item's MR on another sha: an older head's, or a merged-results
    or merge-train pipeline (its sha is a temporary merge commit). Only a hint: nothing
    of it is recorded; `reconcile_mr` asks GitLab what the head pipeline is and reads
    its commit before counting it for the head."""
    if merge_request is None or merge_request.iid != item.mr_iid:
        return None
    return EventResult(
        dimensions=(_RECONCILE,),
        reason=f"pipeline {pipeline_id} of MR !{merge_request.iid} ran on {sha}, not on the "
        "head: asking GitLab whether it tests the head (a merged result)",
    )


def on_job(context: EventContext) -> EventResult | None:
    """Job Hook (`build`): a failed job of the head pipeline may deserve a retry.

    The herder (`retry_ci`) decides; this only raises `needs_ci_retry` for the
    job's name. A job of a pipeline newer than the recorded head pipeline also
    sets `needs_reconcile`, which runs first and records that pipeline.
    """
    item = _item(context)
    hook = job_hook(context.body)
    if hook is None or not _same_project(item, hook.project):
        return None
    if hook.status != "failed" or hook.allow_failure:
        return None
    name, pipeline_id = hook.name, hook.pipeline_id
    if not name or pipeline_id is None:
        return None
    if item.mr_sha is None or hook.sha != item.mr_sha:
        return None
    known = item.head_pipeline_id
    if known is not None and pipeline_id < known:
        return None  # a pipeline the head pipeline superseded
    dimensions = (_ci_retry(name),) if pipeline_id == known else (_RECONCILE, _ci_retry(name))
    reason = hook.failure_reason or "unknown_failure"
    job = f"job {name} ({hook.build_id})" if hook.build_id is not None else f"job {name}"
    return EventResult(
        dimensions=dimensions,
        reason=f"{job} of pipeline {pipeline_id} failed: {reason}",
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
    hook = push_hook(context.body)
    if hook is None or not _same_project(item, hook.project):
        return None
    branch = hook.branch
    if branch is None:
        return None  # tags
    if branch == item.source_branch:
        return _push_to_bot_branch(item, hook, branch)
    if item.target_branch is not None and branch == item.target_branch and hook.head is not None:
        return EventResult(
            dimensions=(_EMPTY_CHECK_NOW,),
            reason=f"push to the target branch {branch}: re-check for an empty diff",
        )
    return None


# -- helpers -------------------------------------------------------------------------


def on_check_signal(context: EventContext) -> EventResult | None:
    """A check reported on the item's MR head (the merge gate looks again) or on its merge
    commit (the wait after the merge looks again). The executors read the checks from the
    signal store: this event only says when."""
    item = _item(context)
    sha = context.body.get("sha")
    if item.post_merge is not None and sha == item.merge_commit_sha:
        return EventResult(dimensions=(_POST_MERGE,), reason="a check reported on the merge commit")
    if item.post_merge is None and sha == item.mr_sha:
        return EventResult(dimensions=(_RECONCILE,), reason="a check reported on the MR head")
    return None


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


def _push_to_bot_branch(item: MRWorkItem, hook: PushHook, branch: str) -> EventResult | None:
    """A push to the item's own branch: deleted, someone else's commits, or ours (None)."""
    after = hook.head
    if after is None:
        return EventResult(
            dimensions=(_RECONCILE,), reason=f"branch {branch} was deleted on GitLab"
        )
    head = hook.commit(after)
    if not is_foreign_push(
        item,
        before=hook.before,
        after=after,
        head_message=None if head is None else head.message,
    ):
        return None  # our own push: the MR and pipeline hooks that follow drive the rest
    by = f" by {hook.username}" if hook.username else ""
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


def _same_project(item: MRWorkItem, project: HookProject) -> bool:
    """Whether the hook is about the item's project: its canonical path (resolved at
    submission) and its numeric id once recorded, compared exactly with the hook's id
    and path, as the resolvers do (a Job Hook of GitLab before 16.0 has only the id)."""
    project_id = None if item.project_id is None else str(item.project_id)
    return project.is_one_of(item.project_path, project_id)
