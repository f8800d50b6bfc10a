"""`retry_ci`: retry a failed CI job of an MR's head pipeline when a rule says so (DDR-47).

The decider runs this action once per `needs_ci_retry` variant (a job name) that
is `"true"` and not deferred. The executor looks at GitLab, never at what the
event claimed:

1. the MR is fetched (one GET): it must be open, and its head pipeline must be
   the item's `head_pipeline_id`;
2. the latest (non-retried) job of that name in that pipeline must still be
   failed, must not be `allow_failure` (its failure blocks nothing), and must
   have run on the MR's current head sha (and on `head_pipeline_sha` when the
   item knows it);
3. the matcher (`herder.py`) decides, reading the job log tail (at most
   `ci_retry.log_tail_bytes`) only when a rule needs log patterns;
4. a retry with a delay is first deferred through the dimension's
   `pending_until`; the run after the deferral retries (see `RetryDelays`);
5. the replica's circuit breaker must admit the retry, else the dimension is
   deferred until it closes;
6. the job is retried (`POST /jobs/:id/retry`), the item's
   `ci_retry_counts[job name]` incremented, the dimension set `"false"`.

Whenever it does not retry, the dimension becomes `"false"` and an audit entry
says why: the next failure of that job (a new event) sets it `"true"` again.
GitLab refusing the retry (403 "Job is not retryable", 404) is such an outcome,
not a failure of the item; other GitLab errors take the engine's usual path.

A crash between the retry POST and the commit loses that retry's count (the
retry is not repeated: the new job is no longer failed), so counts can only
under-count by the number of such crashes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import JobInfo, MergeRequestInfo
from workqueue.queue.context import ExecutionContext
from workqueue.queue.models import DimensionStatus
from workqueue.types.mr.config import CIRetryConfig
from workqueue.types.mr.herder import FailedJob, decide, needs_log_tail
from workqueue.types.mr.models import MRDimension, MRWorkItem

logger = logging.getLogger(__name__)

NEEDS_CI_RETRY = MRDimension.NEEDS_CI_RETRY
# GitLab's answers to a retry POST that mean "this job cannot be retried".
_NOT_RETRYABLE = frozenset({403, 404})
# A refused retry waits at least this long, so a breaker about to close does not spin.
_MIN_PAUSE_SECONDS = 1.0
_FORGET_BOOKINGS_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class BreakerAdmission:
    """The breaker's answer to one retry. `ticket` gives the slot back via `release`."""

    admitted: bool
    wait_seconds: float  # 0 when admitted; else until the breaker closes
    ticket: float | None = None


@dataclass(frozen=True, slots=True)
class BreakerState:
    """A snapshot for metrics: gauges (`open`, `retries_in_window`,
    `seconds_until_close`) and monotonically increasing counters (`*_total`)."""

    open: bool
    retries_in_window: int
    max_retries: int
    window_seconds: float
    seconds_until_close: float
    admitted_total: int
    refused_total: int
    opened_total: int


class RetryCircuitBreaker:
    """At most `max_retries` CI retries in any `window_seconds`, across all items.

    A retry wanted beyond that opens the breaker: every retry is refused for
    `window_seconds` from that moment (retries made before it have then left
    the window, so it closes with a clean slate). The state is in-process:
    each replica has its own breaker. Thread-safe.
    """

    def __init__(
        self,
        max_retries: int,
        window_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_retries < 1:
            raise ValueError("max_retries must be at least 1")
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        self._max = max_retries
        self._window = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: deque[float] = deque()
        self._opened_at: float | None = None
        self._admitted_total = 0
        self._refused_total = 0
        self._opened_total = 0

    def acquire(self) -> BreakerAdmission:
        """Take a retry slot, or learn how long retries are paused."""
        with self._lock:
            now = self._clock()
            self._refresh(now)
            if self._opened_at is None and len(self._recent) >= self._max:
                self._opened_at = now
                self._opened_total += 1
                logger.warning(
                    "CI retry circuit breaker OPEN: %d retries in the last %g s reached the "
                    "limit; retries on this replica are paused for %g s",
                    len(self._recent),
                    self._window,
                    self._window,
                )
            if self._opened_at is not None:
                self._refused_total += 1
                return BreakerAdmission(
                    admitted=False, wait_seconds=self._opened_at + self._window - now
                )
            self._recent.append(now)
            self._admitted_total += 1
            return BreakerAdmission(admitted=True, wait_seconds=0.0, ticket=now)

    def release(self, ticket: float) -> None:
        """Give back a slot whose retry did not happen (GitLab refused it)."""
        with self._lock:
            try:
                self._recent.remove(ticket)
            except ValueError:
                return  # already out of the window
            self._admitted_total -= 1

    def is_open(self) -> bool:
        with self._lock:
            self._refresh(self._clock())
            return self._opened_at is not None

    def state(self) -> BreakerState:
        with self._lock:
            now = self._clock()
            self._refresh(now)
            until_close = 0.0 if self._opened_at is None else self._opened_at + self._window - now
            return BreakerState(
                open=self._opened_at is not None,
                retries_in_window=len(self._recent),
                max_retries=self._max,
                window_seconds=self._window,
                seconds_until_close=until_close,
                admitted_total=self._admitted_total,
                refused_total=self._refused_total,
                opened_total=self._opened_total,
            )

    def _refresh(self, now: float) -> None:
        """Close an expired pause and forget retries older than the window (lock held)."""
        if self._opened_at is not None and now >= self._opened_at + self._window:
            self._opened_at = None
            logger.info("CI retry circuit breaker closed: retries resume")
        horizon = now - self._window
        while self._recent and self._recent[0] <= horizon:
            self._recent.popleft()


class RetryDelays:
    """When each delayed retry is due, by (item id, job id). In-process, thread-safe.

    The first run that wants to retry a job with a delay books `now + delay` and
    defers the dimension until then; the run the deferral wakes finds the booking
    due and retries. Keyed by job id, so the next failure (a new job) waits its
    own delay, and an event re-setting the dimension early only defers for what
    is left. The engine's sweep clears `pending_until` when it wakes an item, so
    the dimension row cannot tell a woken run from a fresh one; this book can.
    It is per replica and not durable: after a restart, or on another replica,
    the delay is waited once more (later, never earlier). Bookings not settled
    within a day are forgotten.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[tuple[uuid.UUID, int], datetime] = {}

    def remaining(self, key: tuple[uuid.UUID, int], delay: timedelta, now: datetime) -> timedelta:
        """How long the retry of `key` must still wait (booking it on first sight)."""
        if delay <= timedelta(0):
            return timedelta(0)
        with self._lock:
            horizon = now - _FORGET_BOOKINGS_AFTER
            for stale in [k for k, due in self._due.items() if due < horizon]:
                del self._due[stale]
            due = self._due.setdefault(key, now + delay)
        return max(due - now, timedelta(0))

    def forget(self, key: tuple[uuid.UUID, int]) -> None:
        with self._lock:
            self._due.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)


class CIRetryExecutor:
    """The `retry_ci` executor and its circuit breaker (one per registry, so per replica)."""

    def __init__(
        self,
        gitlab: GitLabClient,
        config: CIRetryConfig,
        *,
        breaker: RetryCircuitBreaker | None = None,
    ) -> None:
        self._gitlab = gitlab
        self._config = config
        self.breaker = breaker or RetryCircuitBreaker(
            config.circuit_breaker.max_retries, config.circuit_breaker.window_seconds
        )
        self.delays = RetryDelays()

    def retry_ci(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        name = context.action.variant
        try:
            self._retry(context, item, name)
        except _NoRetry as no_retry:
            context.set_dimension(NEEDS_CI_RETRY, DimensionStatus.FALSE, variant=name)
            context.audit("ci_retry_skipped", no_retry.reason, job_name=name, **no_retry.details)

    def _retry(self, context: ExecutionContext, item: MRWorkItem, name: str) -> None:
        job = self._current_failed_job(item, name)
        facts = FailedJob(job.name, job.stage, job.failure_reason)
        tail = self._log_tail(item, job) if needs_log_tail(facts, self._config.rules) else None
        retries_done = int(item.ci_retry_counts.get(name, 0))
        decision = decide(facts, self._config.rules, retries_done, tail)
        details: dict[str, Any] = {
            "job_id": job.id,
            "pipeline_id": job.pipeline_id,
            "failure_reason": job.failure_reason,
            "stage": job.stage,
            "rule": decision.rule,
            "retries_done": retries_done,
        }
        if not decision.retry:
            raise _NoRetry(decision.reason, **details)
        delay_key = (item.id, job.id)
        wait = self.delays.remaining(
            delay_key, timedelta(seconds=decision.delay_seconds), context.now
        )
        if wait > timedelta(0):
            context.defer(NEEDS_CI_RETRY, wait, variant=name)
            context.audit(
                "ci_retry_delayed",
                decision.reason,
                job_name=name,
                delay_seconds=decision.delay_seconds,
                wait_seconds=round(wait.total_seconds(), 3),
                **details,
            )
            return

        admission = self.breaker.acquire()
        if admission.ticket is None:
            pause = max(admission.wait_seconds, _MIN_PAUSE_SECONDS)
            context.defer(NEEDS_CI_RETRY, timedelta(seconds=pause), variant=name)
            context.audit(
                "ci_retry_paused",
                "the CI retry circuit breaker is open",
                job_name=name,
                pause_seconds=round(pause, 3),
                **details,
            )
            return
        try:
            new_job = self._gitlab.retry_job(item.project, job.id)
        except PermanentGitLabError as error:
            if error.status not in _NOT_RETRYABLE:
                raise
            self.breaker.release(admission.ticket)
            self.delays.forget(delay_key)
            raise _NoRetry(f"GitLab refused the retry: {error}", **details) from None
        self.delays.forget(delay_key)
        # JSONB: assign a new dict, so the ORM sees the change.
        item.ci_retry_counts = {**item.ci_retry_counts, name: retries_done + 1}
        context.set_dimension(NEEDS_CI_RETRY, DimensionStatus.FALSE, variant=name)
        context.audit(
            "ci_job_retried",
            decision.reason,
            job_name=name,
            new_job_id=new_job.id,
            retry=retries_done + 1,
            **details,
        )

    def _current_failed_job(self, item: MRWorkItem, name: str) -> JobInfo:
        """The job to decide about; `_NoRetry` when there is none worth deciding about."""
        if not name:
            raise _NoRetry("needs_ci_retry without a job name")
        merge_request, jobs = self._head_pipeline_jobs(item)
        pipeline_id = item.head_pipeline_id
        named = [job for job in jobs if job.name == name]
        if not named:
            raise _NoRetry(f"pipeline {pipeline_id} has no job {name!r}", pipeline_id=pipeline_id)
        job = max(named, key=lambda candidate: candidate.id)
        facts: dict[str, Any] = {"job_id": job.id, "pipeline_id": pipeline_id}
        known_sha = item.head_pipeline_sha
        if job.sha != merge_request.sha or (known_sha is not None and job.sha != known_sha):
            raise _NoRetry(
                f"job {job.id} ran on {job.sha}, not on the MR's head {merge_request.sha} "
                f"(item's head pipeline sha {known_sha})",
                **facts,
            )
        if job.status != "failed":
            raise _NoRetry(f"job {job.id} is {job.status}, not failed", **facts)
        if job.allow_failure:
            raise _NoRetry(f"job {job.id} is allowed to fail: its failure blocks nothing", **facts)
        return job

    def _head_pipeline_jobs(self, item: MRWorkItem) -> tuple[MergeRequestInfo, list[JobInfo]]:
        """The open MR and the latest jobs of its head pipeline, which must be the item's."""
        if item.mr_iid is None or item.head_pipeline_id is None:
            raise _NoRetry("the item has no MR or no head pipeline yet")
        pipeline_id = item.head_pipeline_id
        try:
            merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
            if merge_request.state != "opened":
                raise _NoRetry(f"the MR is {merge_request.state}")
            if merge_request.head_pipeline_id != pipeline_id:
                raise _NoRetry(
                    f"pipeline {pipeline_id} is no longer the MR's head pipeline "
                    f"(GitLab says {merge_request.head_pipeline_id})",
                    pipeline_id=pipeline_id,
                )
            return merge_request, self._gitlab.pipeline_jobs(item.project, pipeline_id)
        except PermanentGitLabError as error:
            if error.status != 404:
                raise
            raise _NoRetry(f"GitLab no longer has it: {error}", pipeline_id=pipeline_id) from None

    def _log_tail(self, item: MRWorkItem, job: JobInfo) -> str:
        try:
            return self._gitlab.job_trace_tail(item.project, job.id, self._config.log_tail_bytes)
        except PermanentGitLabError as error:
            if error.status != 404:
                raise
            return ""  # no log: log patterns find nothing


class _NoRetry(Exception):  # noqa: N818 - an outcome, not an error
    """This run ends without a retry: the dimension is settled `"false"` with `reason`."""

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details
