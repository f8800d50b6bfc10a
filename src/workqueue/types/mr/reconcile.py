"""`reconcile_mr` and `check_empty_diff`: converge an open MR on GitLab's view (DDR-43/46).

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
item. What happens next depends on why the MR is not mergeable:

| situation                                               | needs_reconcile        |
|---------------------------------------------------------|------------------------|
| merged / closed                                         | false (item terminal)  |
| auto_merge off, MR retargeted to another branch or from | false: the event that  |
|   another project, draft, a blocking status             |   changes it (approval,|
|   (not_approved, conflict, ci_must_pass, ...), pipeline |   pipeline, push, edit)|
|   not (yet) successful, head not our commit             |   raises it again      |
| transient status (checking, unchecked, preparing,       | deferred by            |
|   ci_still_running, approvals_syncing) or state locked  |   `recheck_delay`      |
| merge refused with 405/406/422 (GitLab contradicts the  | deferred by            |
|   status just read: the MR is changing)                 |   `recheck_delay`      |
| merge refused with 409 (head moved since the GET)       | false: the update hook |
|                                                         |   of the new head      |

`check_empty_diff` compares target..source (DDR-43) when `needs_empty_check` is
due: periodically (`empty_check_interval_seconds` through `pending_until`) and
at once after a push to the target branch. It first reads the MR, so an MR
merged or closed meanwhile is reflected instead of being taken for "empty".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue.context import ExecutionContext
from workqueue.queue.errors import PermanentError
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.executors import finish_empty
from workqueue.types.mr.models import CompletionReason, MRDimension, MRWorkItem

DEFAULT_RECHECK_DELAY = timedelta(seconds=30)

# detailed_merge_status values that settle by themselves within seconds or
# minutes without necessarily sending us an event.
TRANSIENT_MERGE_STATUSES = frozenset(
    {"checking", "unchecked", "preparing", "ci_still_running", "approvals_syncing"}
)
MERGEABLE = "mergeable"
# Merge refusals that mean "not now" (see GitLabClient.merge); 406 is pre-16 GitLab's 422.
_NOT_NOW = frozenset({405, 406, 409, 422})
_HEAD_MOVED = 409


@dataclass(frozen=True, slots=True)
class MergeBlocker:
    """Why the service does not merge now, and whether that settles without an event."""

    why: str
    transient: bool = False


def merge_blocker(item: MRWorkItem, merge_request: MergeRequestInfo) -> MergeBlocker | None:
    """The first reason not to merge `merge_request` now; None: merge it. Pure."""
    return next(_merge_blockers(item, merge_request), None)


def _merge_blockers(item: MRWorkItem, merge_request: MergeRequestInfo) -> Iterator[MergeBlocker]:
    status = merge_request.detailed_merge_status
    head = merge_request.sha
    if not item.auto_merge:
        yield MergeBlocker("auto_merge is off for this item")
    if merge_request.target_branch != item.target_branch:
        # Someone retargeted the MR: merging would land the change elsewhere.
        yield MergeBlocker(
            f"the MR targets {merge_request.target_branch}, not {item.target_branch}"
        )
    if merge_request.source_project_id != merge_request.target_project_id:
        yield MergeBlocker(
            f"the MR is from project {merge_request.source_project_id}, not from "
            f"{merge_request.target_project_id} where the service pushed"
        )
    if merge_request.state == "locked":
        yield MergeBlocker("GitLab is merging the MR (state locked)", transient=True)
    if merge_request.draft:
        yield MergeBlocker("the MR is a draft")
    if status != MERGEABLE:
        yield MergeBlocker(
            f"detailed_merge_status is {status}", transient=status in TRANSIENT_MERGE_STATUSES
        )
    if item.mr_sha is None or head != item.mr_sha:
        # GitLab has not caught up with our push yet (its update hook will
        # follow), or someone else pushed: either way, not what was tested.
        yield MergeBlocker(f"the MR head {head} is not the commit the service pushed")
    if merge_request.head_pipeline_sha != head:
        yield MergeBlocker(
            f"no pipeline has run on the MR head {head} (head pipeline "
            f"{merge_request.head_pipeline_id} ran on {merge_request.head_pipeline_sha})"
        )
    if merge_request.head_pipeline_status != "success":
        yield MergeBlocker(f"the head pipeline is {merge_request.head_pipeline_status}")


class MRReconciler:
    """The `reconcile_mr` and `check_empty_diff` executors, bound to one GitLab client."""

    def __init__(
        self,
        gitlab: GitLabClient,
        config: MRTypeConfig,
        *,
        recheck_delay: timedelta = DEFAULT_RECHECK_DELAY,
    ) -> None:
        self._gitlab = gitlab
        self._empty_check_interval = timedelta(seconds=config.empty_check_interval_seconds)
        self._recheck_delay = recheck_delay

    # -- reconcile_mr ----------------------------------------------------------------------

    def reconcile_mr(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if item.mr_iid is None:
            # No MR yet (ensure_mr has not opened one): nothing to look at.
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
            return
        merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
        if self._reflect_terminal(context, item, merge_request):
            return
        changed = self._record(context, item, merge_request)
        if "head_pipeline_status" in changed and merge_request.head_pipeline_status == "failed":
            # The CI herder also hears of failed jobs from pipeline/job hooks;
            # this catches the ones whose hooks never arrived.
            self._flag_failed_jobs(context, item, merge_request.head_pipeline_id)

        blocker = merge_blocker(item, merge_request)
        if blocker is not None:
            self._not_now(context, blocker.why, transient=blocker.transient)
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
            self._not_now(
                context,
                f"GitLab refused the merge ({error.status}: {error.message})",
                transient=error.status != _HEAD_MOVED,
            )
            return
        if merged.state != "merged":
            self._record(context, item, merged)
            self._not_now(context, f"the merge left the MR {merged.state}", transient=True)
            return
        context.audit("mr_merged", mr_iid=item.mr_iid, sha=sha, merge_sha=merged.merge_commit_sha)
        self._complete_merged(context, item, "the service merged the MR")

    def _not_now(self, context: ExecutionContext, why: str, *, transient: bool) -> None:
        if transient:
            context.defer(MRDimension.NEEDS_RECONCILE, self._recheck_delay)
        else:
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
        context.audit("merge_not_now", reason=why, recheck=transient)

    # -- check_empty_diff ------------------------------------------------------------------

    def check_empty_diff(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if item.target_branch is None:
            # ensure_mr has not resolved the target yet (it checks on its own).
            context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._empty_check_interval)
            return
        if item.mr_iid is not None:
            merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
            if self._reflect_terminal(context, item, merge_request):
                context.set_dimension(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.FALSE)
                return
            self._record(context, item, merge_request)
        if self._differs(item):
            context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._empty_check_interval)
            return
        context.audit("empty_diff", mr_iid=item.mr_iid, target_branch=item.target_branch)
        finish_empty(self._gitlab, context, item, [] if item.mr_iid is None else [item.mr_iid])
        context.set_dimension(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.FALSE)

    def _differs(self, item: MRWorkItem) -> bool:
        """Whether the bot branch's tree differs from the target's.

        `straight=True` compares the two trees: after the target received the
        same content (an upstream sync landing first) they are identical, while
        the merge-base diff GitLab shows as the MR's changes would still list
        the MR's own commit. A target that moved on with other changes as well
        still differs; such an MR merges as a no-op and completes as merged.
        """
        assert item.target_branch is not None  # noqa: S101 - callers checked it
        try:
            compare = self._gitlab.compare(
                item.project, item.target_branch, item.source_branch, straight=True
            )
        except PermanentGitLabError as error:
            if error.status == 404:
                raise PermanentError(
                    f"cannot compare {item.target_branch}..{item.source_branch}: {error} "
                    "(was the bot branch or the target branch deleted?)"
                ) from None
            raise
        return compare.differs

    # -- shared ------------------------------------------------------------------------------

    def _reflect_terminal(
        self, context: ExecutionContext, item: MRWorkItem, merge_request: MergeRequestInfo
    ) -> bool:
        """Merged or closed on GitLab: end the item accordingly. True when it did."""
        if merge_request.state == "merged":
            self._record(context, item, merge_request)
            self._complete_merged(context, item, "the MR was merged on GitLab")
            return True
        if merge_request.state != "closed":
            return False
        self._record(context, item, merge_request)
        context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
        closed_by_us = merge_request.closed_by_id == self._gitlab.current_user().id
        if closed_by_us and item.target_branch is not None and self._branch_is_empty(item):
            # Our own close for an empty diff whose step failed after closing.
            context.audit("empty_diff", mr_iid=item.mr_iid, target_branch=item.target_branch)
            finish_empty(self._gitlab, context, item, [])
            return True
        context.set_phase(Phase.CANCELLED, "the MR was closed on GitLab")
        return True

    def _branch_is_empty(self, item: MRWorkItem) -> bool:
        """The bot branch exists and adds nothing to the target."""
        if self._gitlab.branch(item.project, item.source_branch) is None:
            return False
        return not self._differs(item)

    def _complete_merged(self, context: ExecutionContext, item: MRWorkItem, reason: str) -> None:
        item.completion_reason = CompletionReason.MERGED
        context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
        context.set_phase(Phase.COMPLETED, reason)

    @staticmethod
    def _record(
        context: ExecutionContext, item: MRWorkItem, merge_request: MergeRequestInfo
    ) -> Mapping[str, object]:
        """Store what users need to see why the MR is (not) merged; audit what changed."""
        observed = {
            "detailed_merge_status": merge_request.detailed_merge_status,
            "head_pipeline_id": merge_request.head_pipeline_id,
            "head_pipeline_sha": merge_request.head_pipeline_sha,
            "head_pipeline_status": merge_request.head_pipeline_status,
        }
        before = {name: getattr(item, name) for name in observed}
        changed = {name: value for name, value in observed.items() if before[name] != value}
        if not changed:
            return changed
        for name, value in changed.items():
            setattr(item, name, value)
        context.audit(
            "mr_observed",
            mr_iid=item.mr_iid,
            before={name: before[name] for name in changed},
            after=changed,
        )
        return changed
