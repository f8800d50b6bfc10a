"""The two actions of a `trunk` head: `process` (the seed's process stage) and `record`.

`process` follows `decider.plan_process` on a fresh read of the queue row:

* superseded / succeeded / failed / cancelled: nothing;
* processing: make sure its one pipeline exists (found again, else triggered
  if the head is still on its branch: the head or an ancestor of it; a head
  the branch no longer holds is superseded unbuilt and frees its slot);
* accepted and a newer head is kept instead: superseded, no slot used;
* accepted, newest, every slot taken: deferred `gate_recheck_seconds` (the
  engine's deferral burns no attempt) and re-decided, coalescing first, on
  every wake;
* accepted and a slot free: strategy from ancestry, then one compare-and-set
  on the queue row that takes the slot, with the accepted → processing move
  recording strategy and base, and the start event, in the same transaction.
  The build is the next step, so admission is durable before any trigger.

`record` reads the pipeline (after a Pipeline Hook, and every
`pipeline_check_seconds` when hooks are missed) and ends the head in one
transaction: state and phase, the slot released exactly once, last green
moved forward only, the finished event, and the newest waiting heads woken.

Once a head holds a slot, GitLab errors are deferred rather than raised: a
GitLab outage should delay a build, not fail it. `build_deadline_seconds`
bounds the whole build instead: past it the head ends failed and frees its
slot. Anything else that makes the engine fail the head (an unexpected error
until max_attempts) frees the slot through the type's failure hook.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient, is_unknown_ancestry
from workqueue.gitlab.errors import PermanentGitLabError, RetryableGitLabError
from workqueue.queue import DimensionStatus, ExecutionContext, Phase
from workqueue.types.trunk import repository
from workqueue.types.trunk.config import TrunkQueueConfig, TrunkTypeConfig
from workqueue.types.trunk.decider import (
    Ancestry,
    QueueView,
    Step,
    Strategy,
    ancestry_from_merge_base,
    choose_strategy,
    outcome_of,
    plan_process,
)
from workqueue.types.trunk.executors.announce import announce_finished, announce_started
from workqueue.types.trunk.executors.build import ensure_pipeline
from workqueue.types.trunk.models import (
    CompletionReason,
    TrunkDimension,
    TrunkQueue,
    TrunkState,
    TrunkWorkItem,
)

logger = logging.getLogger(__name__)

CAS_TRIES = 5  # admission re-reads the queue row this often before deferring
CONTENDED_RETRY = timedelta(seconds=0.5)
GITLAB_RETRY = timedelta(seconds=10)  # a held slot waits this long after a GitLab error


class TrunkExecutors:
    def __init__(self, client: GitLabClient, config: TrunkTypeConfig) -> None:
        self._client = client
        self._config = config
        self._gate_recheck = timedelta(seconds=config.gate_recheck_seconds)
        self._deadline = timedelta(seconds=config.build_deadline_seconds)
        self._check_every = timedelta(seconds=config.pipeline_check_seconds)

    # -- process --------------------------------------------------------------------------

    def process(self, context: ExecutionContext) -> None:
        item = cast("TrunkWorkItem", context.item)
        queue = self._config.queue_named(item.queue)
        if queue is None:
            self._orphaned(context, item)
            return
        strategies: dict[str | None, Strategy] = {}
        for _ in range(CAS_TRIES):
            row = repository.read_queue(context.session, item.queue)
            if row is None:  # pragma: no cover - ingest creates the row with the head
                raise RuntimeError(f"queue {item.queue} has no row")
            step = plan_process(item.state, item.sequence, _view(row, queue))
            if step is Step.NOTHING:
                context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
                return
            if step is Step.BUILD:
                self._build(context, item, queue)
                return
            if step is Step.SUPERSEDE:
                self._supersede(context, item, row)
                return
            if step is Step.WAIT:
                context.defer(TrunkDimension.NEEDS_PROCESS, self._gate_recheck)
                context.audit(
                    "trunk_gate_closed",
                    f"{row.in_flight} of {_view(row, queue).window} slots in flight",
                    queue=item.queue,
                )
                return
            key = row.last_green_sha
            if key not in strategies:
                strategies[key] = self._strategy(queue, key, item.sha)
            if self._admit(context, item, row, strategies[key]):
                return
        context.defer(TrunkDimension.NEEDS_PROCESS, CONTENDED_RETRY)

    def _strategy(self, queue: TrunkQueueConfig, last_green: str | None, sha: str) -> Strategy:
        """Ancestry from GitLab's merge base; unknown commits mean "full, with a warning".

        Any other GitLab error propagates: the head holds no slot yet, so the
        engine's retry with backoff (and eventual failure) is right for it.
        """
        if last_green is None:
            return choose_strategy(None, None)
        try:
            base = self._client.merge_base(queue.project, [last_green, sha])
        except PermanentGitLabError as error:
            if not is_unknown_ancestry(error):
                raise
            strategy = choose_strategy(last_green, Ancestry.UNKNOWN)
            logger.warning("trunk %s %s: %s (%s)", queue.name, sha, strategy.warning, error)
            return strategy
        return choose_strategy(last_green, ancestry_from_merge_base(last_green, base))

    def _admit(
        self, context: ExecutionContext, item: TrunkWorkItem, row: TrunkQueue, strategy: Strategy
    ) -> bool:
        """Take a slot and move accepted → processing together; False: the row moved on."""
        session = context.session
        if repository.lock_state(session, item) is not TrunkState.ACCEPTED:
            return True  # cancelled meanwhile: the next decision sees it
        if not repository.take_slot(
            session, item.queue, version=row.version, rewrite=strategy.rewrite
        ):
            return False
        repository.record_admission(
            session,
            item,
            strategy=strategy.build_strategy,
            base_sha=strategy.base_sha,
            now=context.now,
        )
        announce_started(session, item)
        context.audit(
            "trunk_admitted",
            strategy.warning or f"{strategy.build_strategy} build",
            queue=item.queue,
            build_strategy=str(strategy.build_strategy),
            base_sha=strategy.base_sha,
            rewrite=strategy.rewrite,
        )
        # needs_process stays: the next step builds, on the committed admission.
        context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.TRUE)
        return True

    def _supersede(self, context: ExecutionContext, item: TrunkWorkItem, row: TrunkQueue) -> None:
        moved = repository.move_state(
            context.session, item, from_states=[TrunkState.ACCEPTED], to=TrunkState.SUPERSEDED
        )
        context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
        if moved is None:
            return
        item.completion_reason = CompletionReason.SUPERSEDED.value
        context.set_phase(
            Phase.COMPLETED, f"superseded: a newer head (sequence {row.latest_sequence}) exists"
        )

    def _build(
        self, context: ExecutionContext, item: TrunkWorkItem, queue: TrunkQueueConfig
    ) -> None:
        if item.pipeline_id is not None:
            context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
            return
        if self._past_deadline(item, context.now):
            self._finish(context, item, TrunkState.FAILED, "no pipeline before the build deadline")
            return
        try:
            build = ensure_pipeline(context.session, self._client, item, queue)
        except RetryableGitLabError as error:
            context.audit("trunk_build_deferred", str(error), queue=item.queue)
            context.defer(TrunkDimension.NEEDS_PROCESS, self._until_deadline(item, context.now))
            return
        except PermanentGitLabError as error:
            self._finish(
                context, item, TrunkState.FAILED, f"GitLab refused the validation pipeline: {error}"
            )
            return
        pipeline = build.pipeline
        if pipeline is None:
            assert build.place is not None  # noqa: S101 - only a read place stops a build
            reason = build.place.describe(item.sha, queue.branch)
            context.audit(
                "trunk_left_branch",
                reason,
                queue=item.queue,
                place=str(build.place.place),
                branch_head=build.place.head,
            )
            self._finish(context, item, TrunkState.SUPERSEDED, f"superseded: {reason}")
            return
        item.pipeline_id = pipeline.id
        item.pipeline_url = pipeline.web_url or None
        item.pipeline_status = pipeline.status
        context.audit(
            "trunk_pipeline_triggered" if build.triggered else "trunk_pipeline_found",
            f"pipeline {pipeline.id}",
            queue=item.queue,
            pipeline_id=pipeline.id,
        )
        context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
        self._check_later(context, item)

    # -- record ---------------------------------------------------------------------------

    def record(self, context: ExecutionContext) -> None:
        item = cast("TrunkWorkItem", context.item)
        queue = self._config.queue_named(item.queue)
        if queue is None:
            self._orphaned(context, item)
            return
        assert item.pipeline_id is not None  # noqa: S101 - the decider checked
        try:
            pipeline = self._client.pipeline(queue.project, item.pipeline_id)
        except RetryableGitLabError as error:
            if self._past_deadline(item, context.now):
                self._finish(context, item, TrunkState.FAILED, self._deadline_message(item))
                return
            context.audit("trunk_record_deferred", str(error), queue=item.queue)
            context.defer(TrunkDimension.NEEDS_RECORD, self._until_deadline(item, context.now))
            return
        except PermanentGitLabError as error:
            message = f"pipeline {item.pipeline_id} cannot be read: {error}"
            self._finish(context, item, TrunkState.FAILED, message)
            return
        item.pipeline_status = pipeline.status
        outcome = outcome_of(pipeline.status)
        if outcome is None:
            if self._past_deadline(item, context.now):
                self._finish(context, item, TrunkState.FAILED, self._deadline_message(item))
            else:
                self._check_later(context, item)
            return
        message = f"pipeline {pipeline.id} {pipeline.status}: {pipeline.web_url}"
        self._finish(context, item, outcome, message)

    # -- endings --------------------------------------------------------------------------

    def _finish(
        self, context: ExecutionContext, item: TrunkWorkItem, outcome: TrunkState, message: str
    ) -> None:
        """processing → terminal with the slot released, in this one transaction."""
        session = context.session
        context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
        context.set_dimension(TrunkDimension.NEEDS_RECORD, DimensionStatus.FALSE)
        if (
            repository.move_state(session, item, from_states=[TrunkState.PROCESSING], to=outcome)
            is None
        ):
            return  # a person cancelled it first; that transaction released the slot
        if outcome is TrunkState.SUCCEEDED:
            item.completion_reason = CompletionReason.GREEN.value
            context.set_phase(Phase.COMPLETED, message)
        elif outcome is TrunkState.SUPERSEDED:
            item.completion_reason = CompletionReason.SUPERSEDED.value
            context.set_phase(Phase.COMPLETED, message)
        elif outcome is TrunkState.CANCELLED:
            context.set_phase(Phase.CANCELLED, message)
        else:
            context.fail(message)
        end_head(session, item, outcome, self._config)
        context.audit("trunk_finished", message, queue=item.queue, result=str(outcome))

    def _orphaned(self, context: ExecutionContext, item: TrunkWorkItem) -> None:
        """The queue was removed from the config: end the head, freeing any slot."""
        message = f"queue {item.queue} is no longer configured"
        if item.state is TrunkState.PROCESSING:
            self._finish(context, item, TrunkState.FAILED, message)
            return
        context.set_dimension(TrunkDimension.NEEDS_PROCESS, DimensionStatus.FALSE)
        if repository.move_state(
            context.session, item, from_states=[TrunkState.ACCEPTED], to=TrunkState.FAILED
        ):
            context.fail(message)

    # -- timing ---------------------------------------------------------------------------

    def _deadline_at(self, item: TrunkWorkItem) -> datetime | None:
        return None if item.admitted_at is None else item.admitted_at + self._deadline

    def _past_deadline(self, item: TrunkWorkItem, now: datetime) -> bool:
        deadline = self._deadline_at(item)
        return deadline is not None and now >= deadline

    def _until_deadline(self, item: TrunkWorkItem, now: datetime) -> timedelta:
        deadline = self._deadline_at(item)
        wait = GITLAB_RETRY if deadline is None else min(GITLAB_RETRY, deadline - now)
        return max(wait, timedelta(seconds=0.01))

    def _check_later(self, context: ExecutionContext, item: TrunkWorkItem) -> None:
        """Read the pipeline again in `pipeline_check_seconds`, or at the deadline if sooner."""
        deadline = self._deadline_at(item)
        wait = self._check_every
        if deadline is not None:
            wait = max(min(wait, deadline - context.now), timedelta(seconds=0.01))
        context.defer(TrunkDimension.NEEDS_RECORD, wait)

    def _deadline_message(self, item: TrunkWorkItem) -> str:
        return (
            f"pipeline {item.pipeline_id} had no result within build_deadline_seconds "
            f"({self._config.build_deadline_seconds:g})"
        )


def end_head(
    session: Session, item: TrunkWorkItem, outcome: TrunkState, config: TrunkTypeConfig
) -> None:
    """What every end of an admitted head does, after its state and phase moved:
    release the slot (moving last green if green), announce, wake the waiting heads."""
    green = item if outcome is TrunkState.SUCCEEDED else None
    repository.release_slot(session, item.queue, green=green)
    announce_finished(session, item)
    queue = config.queue_named(item.queue)
    newest = 1 if queue is None else queue.max_concurrent
    repository.wake_waiting_heads(session, item.queue, newest, cause=item.id)


def _view(row: TrunkQueue, queue: TrunkQueueConfig) -> QueueView:
    return QueueView(
        in_flight=row.in_flight,
        latest_sequence=row.latest_sequence,
        max_concurrent=queue.max_concurrent,
        serial_until_green=row.serial_until_green,
    )
