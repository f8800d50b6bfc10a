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
3. the rules (`ci_retry_rules.py`) decides, reading the job log tail (at most
   `ci_retry.log_tail_bytes`) only when a rule needs log patterns;
4. a retry with a delay is first deferred through the dimension's
   `pending_until`; the run after the deferral retries (see `ci_retry_delays.RetryDelays`);
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

from datetime import timedelta
from typing import Any, cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import JobInfo, MergeRequestInfo
from workqueue.queue import DimensionStatus, ExecutionContext
from workqueue.types.mr.config import CIRetryConfig
from workqueue.types.mr.executors.ci_retry_breaker import RetryCircuitBreaker
from workqueue.types.mr.executors.ci_retry_delays import RetryDelays
from workqueue.types.mr.executors.ci_retry_rules import FailedJob, decide, needs_log_tail
from workqueue.types.mr.executors.drift_check import corrections
from workqueue.types.mr.executors.merge_attempts import MergeAttempts
from workqueue.types.mr.executors.merged_results import merged_result_tests_head
from workqueue.types.mr.models import MRDimension, MRWorkItem

NEEDS_CI_RETRY = MRDimension.NEEDS_CI_RETRY
# GitLab's answers to a retry POST that mean "this job cannot be retried".
_NOT_RETRYABLE = frozenset({403, 404})
# A refused retry waits at least this long, so a breaker about to close does not spin.
_MIN_PAUSE_SECONDS = 1.0


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
        job = self._current_failed_job(context, item, name)
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

    def _current_failed_job(
        self, context: ExecutionContext, item: MRWorkItem, name: str
    ) -> JobInfo:
        """The job to decide about; `_NoRetry` when there is none worth deciding about."""
        if not name:
            raise _NoRetry("needs_ci_retry without a job name")
        merge_request, jobs = self._head_pipeline_jobs(context, item)
        pipeline_id = item.head_pipeline_id
        named = [job for job in jobs if job.name == name]
        if not named:
            raise _NoRetry(f"pipeline {pipeline_id} has no job {name!r}", pipeline_id=pipeline_id)
        job = max(named, key=lambda candidate: candidate.id)
        facts: dict[str, Any] = {"job_id": job.id, "pipeline_id": pipeline_id}
        known_sha = item.head_pipeline_sha
        ran_on_head = job.sha == merge_request.sha or self._on_merged_result(
            item, merge_request, job
        )
        if not ran_on_head or (known_sha is not None and job.sha != known_sha):
            recorded = f" (the item's head pipeline ran on {known_sha})" if known_sha else ""
            raise _NoRetry(
                f"job {job.id} ran on {job.sha or 'an unknown commit'}, neither on the MR's "
                f"head {merge_request.sha or '(none)'} nor on a merged result of it{recorded}",
                **facts,
            )
        if job.status != "failed":
            raise _NoRetry(f"job {job.id} is {job.status}, not failed", **facts)
        if job.allow_failure:
            raise _NoRetry(f"job {job.id} is allowed to fail: its failure blocks nothing", **facts)
        return job

    def _on_merged_result(
        self, item: MRWorkItem, merge_request: MergeRequestInfo, job: JobInfo
    ) -> bool:
        """Whether the job ran on the head pipeline's commit and that pipeline is a merged
        result of the recorded head, confirmed as `reconcile_mr` confirms it before a merge
        (the confirmation is kept in `merge_attempts`, so either reads the commit once)."""
        if job.sha is None or job.sha != merge_request.head_pipeline_sha:
            return False
        attempts = MergeAttempts.load(item.merge_attempts, item.mr_sha)
        if not merged_result_tests_head(self._gitlab, item, merge_request, attempts):
            return False
        stored = attempts.stored()
        if stored != item.merge_attempts:
            item.merge_attempts = stored
        return True

    def _head_pipeline_jobs(
        self, context: ExecutionContext, item: MRWorkItem
    ) -> tuple[MergeRequestInfo, list[JobInfo]]:
        """The open MR and the latest jobs of its head pipeline, which must be the item's.

        The MR read may show what no webhook reported (a green pipeline whose hook was
        lost): `reconcile_mr` is asked to look, since the Job Hook that brought us here
        also pushed the item's drift check back (`drift_check`)."""
        if item.mr_iid is None or item.head_pipeline_id is None:
            raise _NoRetry("the item has no MR or no head pipeline yet")
        pipeline_id = item.head_pipeline_id
        try:
            merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
            if corrections(item, merge_request):
                context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
            if merge_request.state != "opened":
                raise _NoRetry(f"the MR is {merge_request.state}")
            if merge_request.head_pipeline_id != pipeline_id:
                now = merge_request.head_pipeline_id
                raise _NoRetry(
                    f"pipeline {pipeline_id} is no longer the MR's head pipeline "
                    + (f"(GitLab says {now})" if now is not None else "(GitLab names none)"),
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
