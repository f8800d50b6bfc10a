"""`reconcile_mr`: converge an open MR on GitLab's view (DDR-46).

`reconcile_mr` runs whenever `needs_reconcile` is raised (by `ensure_mr`, by
events, by its own deferral). ONE `GET merge_request` serves every cheap check.
It is the only place an item ends because of its MR: a Merge Request Hook
saying "merged" or "closed" only raises `needs_reconcile`, so a forged or
replayed hook changes nothing GitLab does not confirm.

* merged on GitLab → `completed` (`completion_reason = merged`), or, with
  `checks.after_merge`, `needs_post_merge` and the merge commit recorded:
  `await_checks` (executors/post_merge.py) ends the item from then on;
* closed → `cancelled`, unless the service's own user closed it and the
  bot branch no longer differs from the target (an empty-diff close of ours
  whose step did not commit): then `completed` with `empty_diff`;
* otherwise its `detailed_merge_status` and head pipeline are stored on the
  item (so users see why it is not merged), and, with `auto_merge`, the MR is
  merged when it still targets the item's target branch from the project
  itself, is not a draft, is `mergeable`, its head is the commit the service
  pushed, and the head pipeline succeeded on exactly that commit — or is a
  merged-results pipeline whose merge commit (read from GitLab, never taken
  from a hook) has that commit among its parents.
  The merge names that sha (`PUT …/merge?sha=`, or the merge-train add), so a
  push racing the merge makes GitLab refuse instead of merging untested code.

Before looking for reasons not to merge: a car the service put on a merge
train is looked up (`merge_call`), and after a rebase it asked for the new head
is taken as the service's only when it is its own rebased commit (`mr_rebase`).
What the service tried for the head is kept in `merge_attempts`.

The first reason not to merge is stored as `merge_blocker` (a `BlockerCode`, a
sentence, and `since`, kept while the code stays the same), null when nothing
blocks or the MR is merged or closed. What happens next:

| situation                                               | needs_reconcile        |
|---------------------------------------------------------|------------------------|
| merged / closed                                         | false (item terminal)  |
| auto_merge off, MR retargeted to another branch or from | false: the event that  |
|   another project, draft, a blocking status             |   changes it (approval,|
|   (not_approved, conflict, ci_must_pass, ...), pipeline |   pipeline, push, edit)|
|   not (yet) successful, head not our commit (a foreign  |   raises it again      |
|   head recorded goes before any status), a rebase       |                        |
|   GitLab could not do, a car dropped twice, a           |                        |
|   `checks.before_merge` check not green on the head     |   (or a signal for the |
|   (checks_pending / checks_failed, read last)           |   head)                |
| transient status (checking, unchecked, preparing,       | deferred by            |
|   ci_still_running, approvals_syncing), state locked,   |   `recheck_delay`      |
|   a rebase running, on the merge train                  |                        |
| need_rebase on the service's own head, `rebase: auto`   | rebase asked for,      |
|                                                         |   deferred             |
| merge (or train add) refused: 405/406/422 (400 on a     | deferred by the        |
|   train), or 409 with the head unchanged on a re-read   |   backoff: 30 s, 60 s, |
|                                                         |   ... up to the max.   |
| refused with 409 and the head moved on the re-read      | as the new head says   |
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import MergeRequestInfo, ProjectInfo
from workqueue.queue import DimensionStatus, ExecutionContext
from workqueue.signals.repository import checks_on
from workqueue.signals.signal import shown_checks
from workqueue.signals.verdicts import before_merge_gate
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.executors.merge_attempts import MergeAttempts
from workqueue.types.mr.executors.merge_blockers import BlockerCode, MergeBlocker, merge_blocker
from workqueue.types.mr.executors.merge_call import Merging, Verdict, refused_blocker
from workqueue.types.mr.executors.merged_results import merged_result_tests_head
from workqueue.types.mr.executors.outcomes import record_observed, reflect_terminal, show_blocker
from workqueue.types.mr.executors.rebase import FAST_FORWARD_METHODS, Rebases
from workqueue.types.mr.models import MRDimension, MRWorkItem

DEFAULT_RECHECK_DELAY = timedelta(seconds=30)
# The first wait after a refused merge; it doubles up to `merge_retry_max_seconds`.
DEFAULT_MERGE_RETRY_BASE = timedelta(seconds=30)


class ReconcileMR:
    """The `reconcile_mr` executor, bound to one GitLab client.

    `clock` (tests) replaces the step's time in the merge backoff's decisions, so a
    test can let hours of refusals pass without waiting for them.
    """

    def __init__(
        self,
        gitlab: GitLabClient,
        *,
        config: MRTypeConfig | None = None,
        recheck_delay: timedelta = DEFAULT_RECHECK_DELAY,
        merge_retry_base: timedelta = DEFAULT_MERGE_RETRY_BASE,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        config = config or MRTypeConfig()
        self._gitlab = gitlab
        self._recheck_delay = recheck_delay
        self._clock = clock
        cap = timedelta(seconds=config.merge_retry_max_seconds)
        self._merging = Merging(
            gitlab, retry_base=min(merge_retry_base, cap), retry_cap=cap, checks=config.checks
        )
        self._checks = config.checks
        self._rebases = Rebases(gitlab, auto=config.rebase == "auto")

    def reconcile_mr(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if item.mr_iid is None:
            # No MR yet (ensure_mr has not opened one): nothing to look at.
            show_blocker(context, item, None)
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
            return
        project = self._gitlab.project(item.project)
        merge_request = self._gitlab.merge_request(
            item.project,
            item.mr_iid,
            include_rebase_in_progress=True,
            include_diverged_commits_count=project.merge_method in FAST_FORWARD_METHODS,
        )
        if reflect_terminal(self._gitlab, context, item, merge_request, self._checks):
            return
        attempts = MergeAttempts.load(item.merge_attempts, item.mr_sha)
        if self._rebases.adopt(context, item, merge_request, attempts):
            attempts = MergeAttempts(head=item.mr_sha)
        verdict = self._converge(context, item, merge_request, attempts, project)
        stored = attempts.stored()
        if stored != item.merge_attempts:
            item.merge_attempts = stored
        if verdict is not None:
            blocker, delay = verdict
            show_blocker(context, item, blocker)
            self._not_now(context, blocker, delay)

    def _converge(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        merge_request: MergeRequestInfo,
        attempts: MergeAttempts,
        project: ProjectInfo,
    ) -> Verdict | None:
        """What stands in the way now (None: merged). Makes at most one write."""
        changed = record_observed(context, item, merge_request)
        if "head_pipeline_status" in changed and merge_request.head_pipeline_status == "failed":
            # The CI herder also hears of failed jobs from pipeline/job hooks;
            # this catches the ones whose hooks never arrived.
            self._flag_failed_jobs(context, item, merge_request.head_pipeline_id)
        train = project.merge_trains_enabled
        on_train = train and self._merging.train_state(context, item, merge_request, attempts)
        if on_train:
            return on_train, None
        tested = merged_result_tests_head(self._gitlab, item, merge_request, attempts)
        blocker = merge_blocker(item, merge_request, pipeline_tests_head=tested)
        rebase = self._rebases.blocker(
            context, item, merge_request, attempts, blocker, merge_method=project.merge_method
        )
        blocker = rebase or blocker or self._checks_blocker(context, item)
        if blocker is not None:
            return blocker, None
        now = self._clock() if self._clock is not None else context.now
        if (wait := attempts.wait_left(now)) is not None:
            return refused_blocker(attempts), wait
        if train and (gate := self._merging.train_gate(merge_request, attempts)):
            return gate, None
        return self._merging.merge(context, item, attempts, now, train=train)

    def _checks_blocker(self, context: ExecutionContext, item: MRWorkItem) -> MergeBlocker | None:
        """`checks.before_merge` on the MR head: shown as `check_<name>` dimensions; a
        signal about the head raises `needs_reconcile` again."""
        names = self._checks.before_merge
        if not names or item.mr_sha is None:
            return None
        states = checks_on(context.session, item.project, item.mr_sha, set(names))
        shown = shown_checks(states, [(name, []) for name in names])
        if shown != item.checks:
            item.checks = shown
        for state in states:
            green = DimensionStatus.FALSE if state.status == "success" else DimensionStatus.TRUE
            context.set_dimension(f"check_{state.name}", green, variant=state.variant)
        gate = before_merge_gate(names, states)
        if gate is None:
            return None
        code = BlockerCode.CHECKS_FAILED if gate.failed else BlockerCode.CHECKS_PENDING
        return MergeBlocker(code, gate.message)

    def _flag_failed_jobs(
        self, context: ExecutionContext, item: MRWorkItem, pipeline_id: int | None
    ) -> None:
        if pipeline_id is None:
            return
        for job in self._gitlab.pipeline_jobs(item.project, pipeline_id):
            if job.status == "failed" and not job.allow_failure:
                context.set_dimension(
                    MRDimension.NEEDS_CI_RETRY, DimensionStatus.TRUE, variant=job.name
                )

    def _not_now(
        self, context: ExecutionContext, blocker: MergeBlocker, delay: timedelta | None
    ) -> None:
        if blocker.transient or delay is not None:
            context.defer(MRDimension.NEEDS_RECONCILE, delay or self._recheck_delay)
        else:
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
        context.audit("merge_not_now", reason=blocker.message, recheck=blocker.transient)
