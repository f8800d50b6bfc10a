"""Why the service does not merge an open MR now: `merge_blocker`, pure (DDR-46).

The first reason found is stored on the item as `merge_blocker` (a
`BlockerCode`, a sentence, and `since`); attention queues match on the code.
`reconcile_mr` asks it after every read of the MR.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, replace

from workqueue.gitlab.models import MergeRequestInfo
from workqueue.types.mr.executors.legacy_merge_status import legacy_merge_status
from workqueue.types.mr.models import MRWorkItem

# detailed_merge_status values that settle by themselves within seconds or
# minutes without necessarily sending us an event.
TRANSIENT_MERGE_STATUSES = frozenset(
    {"checking", "unchecked", "preparing", "ci_still_running", "approvals_syncing"}
)
MERGEABLE = "mergeable"


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
    MERGE_REFUSED = "merge_refused"  # GitLab refused the merge (retried with backoff)
    IN_MERGE_TRAIN = "in_merge_train"  # on the merge train: GitLab merges it
    GITLAB_CHECKING = "gitlab_checking"  # GitLab settles it by itself
    CHECKS_PENDING = "checks_pending"  # an external check (checks.before_merge) is not green yet
    CHECKS_FAILED = "checks_failed"  # an external check is red on the MR head
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


def merge_blocker(
    item: MRWorkItem, merge_request: MergeRequestInfo, *, pipeline_tests_head: bool = False
) -> MergeBlocker | None:
    """The first reason not to merge `merge_request` now; None: merge it. Pure.

    `pipeline_tests_head`: the head pipeline, on another sha, was found (by reading
    its commit from GitLab) to be a merged result of the MR head, so it counts for it.
    """
    if pipeline_tests_head and merge_request.sha is not None:
        merge_request = replace(merge_request, head_pipeline_sha=merge_request.sha)
    return next(_merge_blockers(item, merge_request), None)


def _merge_blockers(item: MRWorkItem, merge_request: MergeRequestInfo) -> Iterator[MergeBlocker]:
    # GitLab before 15.6 sends no detailed status: judged from its older fields.
    status = merge_request.detailed_merge_status or legacy_merge_status(merge_request)
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
