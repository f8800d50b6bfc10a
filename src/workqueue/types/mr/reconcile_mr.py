"""`reconcile_mr`: converge an open MR on GitLab's view (DDR-46).

`reconcile_mr` runs whenever `needs_reconcile` is raised (by `ensure_mr`, by
events, by its own deferral). ONE `GET merge_request` serves every cheap check.
It is the only place an item ends because of its MR: a Merge Request Hook
saying "merged" or "closed" only raises `needs_reconcile`, so a forged or
replayed hook changes nothing GitLab does not confirm.

* merged on GitLab → `completed` (`completion_reason = merged`);
* closed → `cancelled`, unless the service's own user closed it and the
  bot branch no longer differs from the target (an empty-diff close of ours
  whose step did not commit): then `completed` with `empty_diff`;
* otherwise its `detailed_merge_status` and head pipeline are stored on the
  item (so users see why it is not merged), and, with `auto_merge`, the MR is
  merged when it still targets the item's target branch from the project
  itself, is not a draft, is `mergeable`, its head is the commit the service
  pushed, and the head pipeline succeeded on exactly that commit.
  The merge names that sha (`PUT …/merge?sha=`), so a push racing the merge
  makes GitLab refuse instead of merging untested code.

GitLab refusing the merge (405/406/409/422) is "not now", never a failure of the
item. The first reason not to merge is stored as `merge_blocker` (a
`BlockerCode`, a sentence, and `since`, kept while the code stays the same),
null when nothing blocks or the MR is merged or closed. What happens next
depends on why the MR is not mergeable:

| situation                                               | needs_reconcile        |
|---------------------------------------------------------|------------------------|
| merged / closed                                         | false (item terminal)  |
| auto_merge off, MR retargeted to another branch or from | false: the event that  |
|   another project, draft, a blocking status             |   changes it (approval,|
|   (not_approved, conflict, ci_must_pass, ...), pipeline |   pipeline, push, edit)|
|   not (yet) successful, head not our commit (a foreign  |   raises it again      |
|   head recorded goes before any status)                 |                        |
| transient status (checking, unchecked, preparing,       | deferred by            |
|   ci_still_running, approvals_syncing) or state locked  |   `recheck_delay`      |
| merge refused with 405/406/422 (GitLab contradicts the  | deferred by            |
|   status just read: the MR is changing)                 |   `recheck_delay`      |
| merge refused with 409 (head moved since the GET)       | false: the update hook |
|                                                         |   of the new head      |

The reasons not to merge are `merge_blockers.merge_blocker`; ending the item on a
merged or closed MR is shared with `check_empty_diff` (`mr_outcomes`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus
from workqueue.types.mr.merge_blockers import BlockerCode, MergeBlocker, merge_blocker
from workqueue.types.mr.models import MRDimension, MRWorkItem
from workqueue.types.mr.mr_outcomes import (
    complete_merged,
    record_observed,
    reflect_terminal,
    show_blocker,
)

DEFAULT_RECHECK_DELAY = timedelta(seconds=30)
# Merge refusals that mean "not now" (see GitLabClient.merge); 406 is pre-16 GitLab's 422.
_NOT_NOW = frozenset({405, 406, 409, 422})
_HEAD_MOVED = 409


class ReconcileMR:
    """The `reconcile_mr` executor, bound to one GitLab client."""

    def __init__(
        self,
        gitlab: GitLabClient,
        *,
        recheck_delay: timedelta = DEFAULT_RECHECK_DELAY,
    ) -> None:
        self._gitlab = gitlab
        self._recheck_delay = recheck_delay

    def reconcile_mr(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if item.mr_iid is None:
            # No MR yet (ensure_mr has not opened one): nothing to look at.
            show_blocker(context, item, None)
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
            return
        merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
        if reflect_terminal(self._gitlab, context, item, merge_request):
            return
        changed = record_observed(context, item, merge_request)
        if "head_pipeline_status" in changed and merge_request.head_pipeline_status == "failed":
            # The CI herder also hears of failed jobs from pipeline/job hooks;
            # this catches the ones whose hooks never arrived.
            self._flag_failed_jobs(context, item, merge_request.head_pipeline_id)

        blocker = merge_blocker(item, merge_request)
        show_blocker(context, item, blocker)
        if blocker is not None:
            self._not_now(context, blocker.message, transient=blocker.transient)
            return
        assert item.mr_sha is not None  # noqa: S101 - merge_blocker checked it
        self._merge(context, item, item.mr_sha)

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

    def _merge(self, context: ExecutionContext, item: MRWorkItem, sha: str) -> None:
        assert item.mr_iid is not None  # noqa: S101 - reconcile_mr checked it
        try:
            merged = self._gitlab.merge(item.project, item.mr_iid, sha=sha)
        except PermanentGitLabError as error:
            if error.status not in _NOT_NOW:
                raise
            context.audit(
                "merge_refused", reason=error.message, status=error.status, mr_iid=item.mr_iid
            )
            refused = MergeBlocker(
                # 409: the head moved under the read (its push event follows);
                # otherwise the MR is changing and GitLab settles it.
                BlockerCode.OTHER if error.status == _HEAD_MOVED else BlockerCode.GITLAB_CHECKING,
                f"GitLab refused the merge ({error.status}: {error.message})",
                transient=error.status != _HEAD_MOVED,
            )
            show_blocker(context, item, refused)
            self._not_now(context, refused.message, transient=refused.transient)
            return
        if merged.state != "merged":
            record_observed(context, item, merged)
            left = MergeBlocker(
                BlockerCode.GITLAB_CHECKING,
                f"the merge left the MR {merged.state or 'in a state GitLab did not name'}",
                transient=True,
            )
            show_blocker(context, item, left)
            self._not_now(context, left.message, transient=True)
            return
        context.audit("mr_merged", mr_iid=item.mr_iid, sha=sha, merge_sha=merged.merge_commit_sha)
        complete_merged(context, item, "the service merged the MR")

    def _not_now(self, context: ExecutionContext, why: str, *, transient: bool) -> None:
        if transient:
            context.defer(MRDimension.NEEDS_RECONCILE, self._recheck_delay)
        else:
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
        context.audit("merge_not_now", reason=why, recheck=transient)
