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

`check_empty_diff` compares target..source (DDR-43) when `needs_empty_check` is
due: periodically (`empty_check_interval_seconds` through `pending_until`) and
at once after a push to the target branch. It first reads the MR, so an MR
merged or closed meanwhile is reflected instead of being taken for "empty".
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
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


class BlockerCode(enum.StrEnum):
    """What stands between an open MR and its merge (`details.merge_blocker.code`).

    Attention queues match on these: one code per kind of remedy.
    """

    DRAFT = "draft"  # mark the MR ready
    AUTO_MERGE_DISABLED = "auto_merge_disabled"  # the item leaves the merge to a person
    PIPELINE_MISSING = "pipeline_missing"  # no pipeline for the MR head yet
    PIPELINE_RUNNING = "pipeline_running"  # wait for it
    PIPELINE_FAILED = "pipeline_failed"  # failed, canceled or skipped: retry or fix
    PIPELINE_STALE_SHA = "pipeline_stale_sha"  # the head pipeline ran on an older commit
    NOT_APPROVED = "not_approved"  # approvals missing
    REQUESTED_CHANGES = "requested_changes"  # a reviewer asked for changes
    DISCUSSIONS_NOT_RESOLVED = "discussions_not_resolved"  # resolve the threads
    CONFLICT = "conflict"  # the target moved and conflicts: resubmit
    NEED_REBASE = "need_rebase"  # fast-forward project, target moved: resubmit
    FOREIGN_COMMITS = "foreign_commits"  # the MR head is not the service's commit
    GITLAB_CHECKING = "gitlab_checking"  # GitLab settles it by itself
    OTHER = "other"  # anything else; the message names GitLab's status


# detailed_merge_status values that name their own code; the CI ones are
# refined from the head pipeline, the transient ones are GitLab still working.
_STATUS_CODES = {
    "draft_status": BlockerCode.DRAFT,
    "not_approved": BlockerCode.NOT_APPROVED,
    "requested_changes": BlockerCode.REQUESTED_CHANGES,
    "discussions_not_resolved": BlockerCode.DISCUSSIONS_NOT_RESOLVED,
    "conflict": BlockerCode.CONFLICT,
    "need_rebase": BlockerCode.NEED_REBASE,
} | dict.fromkeys(TRANSIENT_MERGE_STATUSES - {"ci_still_running"}, BlockerCode.GITLAB_CHECKING)
_CI_STATUSES = frozenset({"ci_must_pass", "ci_still_running"})
_FAILED_PIPELINE_STATUSES = frozenset({"failed", "canceled", "canceling", "skipped"})


@dataclass(frozen=True, slots=True)
class MergeBlocker:
    """Why the service does not merge now, and whether that settles without an event."""

    code: BlockerCode
    message: str  # one sentence, for people; never shows a missing value as "None"
    transient: bool = False

    def stored(self, since: str) -> dict[str, str]:
        """The `merge_blocker` column's value."""
        return {"code": self.code.value, "message": self.message, "since": since}


def merge_blocker(item: MRWorkItem, merge_request: MergeRequestInfo) -> MergeBlocker | None:
    """The first reason not to merge `merge_request` now; None: merge it. Pure."""
    return next(_merge_blockers(item, merge_request), None)


def _merge_blockers(item: MRWorkItem, merge_request: MergeRequestInfo) -> Iterator[MergeBlocker]:
    status = merge_request.detailed_merge_status
    head = merge_request.sha
    ours = item.mr_sha is not None and head == item.mr_sha
    yield from _placement_blockers(item, merge_request)
    if merge_request.state == "locked":
        yield MergeBlocker(
            BlockerCode.GITLAB_CHECKING, "GitLab is merging the MR (state locked)", transient=True
        )
    if merge_request.draft:
        yield MergeBlocker(BlockerCode.DRAFT, "the MR is a draft")
    settling = status in TRANSIENT_MERGE_STATUSES
    if not ours and (item.foreign_head_sha is not None or not settling):
        # Foreign work on the branch outranks whatever GitLab says about it
        # (a pipeline for someone else's commit, an approval reset). Only a
        # status GitLab is still settling goes first: it may be GitLab
        # catching up with our own push, and is looked at again shortly.
        yield _foreign_head(item, head)
    if status != MERGEABLE:
        yield _status_blocker(status, merge_request, head)
    if not ours:
        yield _foreign_head(item, head)
    if merge_request.head_pipeline_sha != head:
        yield _pipeline_not_on_head(merge_request, head)
    if merge_request.head_pipeline_status != "success":
        yield _pipeline_blocker(merge_request.head_pipeline_status)


def _foreign_head(item: MRWorkItem, head: str | None) -> MergeBlocker:
    if item.foreign_head_sha is not None:
        return MergeBlocker(
            BlockerCode.FOREIGN_COMMITS,
            f"someone else pushed {item.foreign_head_sha} to the bot branch",
        )
    # GitLab has not caught up with our push yet (its update hook will
    # follow), or someone else pushed: either way, not what was tested.
    shown = head if head is not None else "(none)"
    return MergeBlocker(
        BlockerCode.FOREIGN_COMMITS, f"the MR head {shown} is not the commit the service pushed"
    )


def _placement_blockers(
    item: MRWorkItem, merge_request: MergeRequestInfo
) -> Iterator[MergeBlocker]:
    """The item's wish and where the MR lands, before anything GitLab computes."""
    if not item.auto_merge:
        yield MergeBlocker(
            BlockerCode.AUTO_MERGE_DISABLED,
            "auto_merge is off for this item: a person merges the MR",
        )
    if merge_request.target_branch != item.target_branch:
        # Someone retargeted the MR: merging would land the change elsewhere.
        yield MergeBlocker(
            BlockerCode.OTHER,
            f"the MR targets {merge_request.target_branch}, not {item.target_branch}",
        )
    if merge_request.source_project_id != merge_request.target_project_id:
        yield MergeBlocker(
            BlockerCode.OTHER,
            f"the MR is from project {merge_request.source_project_id}, not from "
            f"{merge_request.target_project_id} where the service pushed",
        )


def _status_blocker(
    status: str | None, merge_request: MergeRequestInfo, head: str | None
) -> MergeBlocker:
    transient = status in TRANSIENT_MERGE_STATUSES
    if status in _CI_STATUSES:
        if merge_request.head_pipeline_id is None or merge_request.head_pipeline_sha != head:
            blocker = _pipeline_not_on_head(merge_request, head)
        elif status == "ci_still_running":
            blocker = MergeBlocker(BlockerCode.PIPELINE_RUNNING, "the head pipeline is running")
        else:
            blocker = _pipeline_blocker(merge_request.head_pipeline_status)
        return replace(blocker, message=f"{blocker.message} ({status})", transient=transient)
    if status is None:
        return MergeBlocker(BlockerCode.OTHER, "GitLab reported no detailed_merge_status")
    code = _STATUS_CODES.get(status, BlockerCode.OTHER)
    return MergeBlocker(code, f"GitLab says detailed_merge_status is {status}", transient)


def _pipeline_not_on_head(merge_request: MergeRequestInfo, head: str | None) -> MergeBlocker:
    shown = head if head is not None else "(none)"
    if merge_request.head_pipeline_id is None:
        return MergeBlocker(
            BlockerCode.PIPELINE_MISSING, f"no pipeline has run on the MR head {shown}"
        )
    ran_on = merge_request.head_pipeline_sha or "an unknown commit"
    return MergeBlocker(
        BlockerCode.PIPELINE_STALE_SHA,
        f"no pipeline has run on the MR head {shown}: head pipeline "
        f"{merge_request.head_pipeline_id} ran on {ran_on}",
    )


def _pipeline_blocker(status: str | None) -> MergeBlocker:
    if status is None:
        return MergeBlocker(BlockerCode.PIPELINE_MISSING, "the head pipeline has no status yet")
    if status in _FAILED_PIPELINE_STATUSES:
        return MergeBlocker(BlockerCode.PIPELINE_FAILED, f"the head pipeline is {status}")
    if status == "success":
        # Only reachable through ci_must_pass with a green pipeline: GitLab
        # has not caught up; its next status says more.
        return MergeBlocker(BlockerCode.OTHER, "GitLab requires a pipeline that already passed")
    return MergeBlocker(BlockerCode.PIPELINE_RUNNING, f"the head pipeline is {status}")


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
            _show_blocker(context, item, None)
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
        _show_blocker(context, item, blocker)
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
            _show_blocker(context, item, refused)
            self._not_now(context, refused.message, transient=refused.transient)
            return
        if merged.state != "merged":
            self._record(context, item, merged)
            left = MergeBlocker(
                BlockerCode.GITLAB_CHECKING, f"the merge left the MR {merged.state}", transient=True
            )
            _show_blocker(context, item, left)
            self._not_now(context, left.message, transient=True)
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
        _show_blocker(context, item, None)  # nothing left to merge
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
        _show_blocker(context, item, None)
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


def _show_blocker(
    context: ExecutionContext, item: MRWorkItem, blocker: MergeBlocker | None
) -> None:
    """Store `blocker` as the item's `merge_blocker`; `since` stays while the code does."""
    before = item.merge_blocker
    before_code = before.get("code") if before else None
    if blocker is None:
        after = None
    else:
        since = before.get("since") if before and before_code == blocker.code else None
        after = blocker.stored(since or context.now.isoformat())
    if after == before:
        return
    item.merge_blocker = after
    after_code = after["code"] if after else None
    if after_code != before_code:
        context.audit(
            "merge_blocker_changed",
            reason=after["message"] if after else "nothing blocks the merge",
            mr_iid=item.mr_iid,
            before=before_code,
            after=after_code,
        )
