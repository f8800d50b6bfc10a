"""What `reconcile_mr`, `check_empty_diff` and `ensure_mr` share: storing GitLab's view
of the MR on the item, and ending the item when the MR is merged, closed or empty.

An item ends because of its MR only here, and only on what GitLab itself says
(a hook body is never proof, DDR-46).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue import DimensionStatus, ExecutionContext, PermanentError, Phase
from workqueue.signals.config import ChecksConfig
from workqueue.types.mr.executors.merge_blockers import MergeBlocker
from workqueue.types.mr.executors.post_merge import start_waiting
from workqueue.types.mr.models import CompletionReason, MRDimension, MRWorkItem

EMPTY_DIFF_NOTE = (
    "Closing: the target branch already contains these changes, so this merge "
    "request would be empty. (workqueue-service)"
)


def finish_empty(
    gitlab: GitLabClient,
    context: ExecutionContext,
    item: MRWorkItem,
    open_mr_iids: Sequence[int],
) -> None:
    """DDR-43: nothing left to merge; leave no empty MR and no bot branch behind.

    Closes the given open MRs (the service's own) with a note saying why,
    deletes the bot branch when its head is the service's last push (already
    gone is fine; someone else's commits are kept) and completes the item
    with reason `empty_diff`.
    """
    for iid in open_mr_iids:
        gitlab.add_note(item.project, iid, EMPTY_DIFF_NOTE)
        gitlab.close_merge_request(item.project, iid)
    head = gitlab.branch(item.project, item.source_branch)
    if head is not None and head.sha == item.mr_sha:
        gitlab.delete_branch(item.project, item.source_branch)
    elif head is not None:
        context.audit(
            "mr_branch_kept",
            reason="the bot branch holds commits the service did not push; not deleting it",
            head_sha=head.sha,
            branch=item.source_branch,
        )
    show_blocker(context, item, None)  # nothing left to merge
    item.completion_reason = CompletionReason.EMPTY_DIFF
    context.set_dimension(MRDimension.NEEDS_MR, DimensionStatus.FALSE)
    context.set_phase(Phase.COMPLETED, "the target branch already has this content")


def branch_differs(gitlab: GitLabClient, item: MRWorkItem) -> bool:
    """Whether the bot branch's tree differs from the target's.

    `straight=True` compares the two trees: after the target received the
    same content (an upstream sync landing first) they are identical, while
    the merge-base diff GitLab shows as the MR's changes would still list
    the MR's own commit. A target that moved on with other changes as well
    still differs; such an MR merges as a no-op and completes as merged.
    """
    assert item.target_branch is not None  # noqa: S101 - callers checked it
    try:
        compare = gitlab.compare(
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


def reflect_terminal(
    gitlab: GitLabClient,
    context: ExecutionContext,
    item: MRWorkItem,
    merge_request: MergeRequestInfo,
    checks: ChecksConfig,
) -> bool:
    """Merged or closed on GitLab: end the item accordingly (merged, with checks after
    the merge: wait for them). True when it did."""
    if merge_request.state == "merged":
        record_observed(context, item, merge_request)
        finish_merged(context, item, "the MR was merged on GitLab", merge_request, checks)
        return True
    if merge_request.state != "closed":
        return False
    record_observed(context, item, merge_request)
    show_blocker(context, item, None)  # nothing left to merge
    context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
    closed_by_us = merge_request.closed_by_id == gitlab.current_user().id
    if closed_by_us and item.target_branch is not None and _branch_is_empty(gitlab, item):
        # Our own close for an empty diff whose step failed after closing.
        context.audit("empty_diff", mr_iid=item.mr_iid, target_branch=item.target_branch)
        finish_empty(gitlab, context, item, [])
        return True
    context.set_phase(Phase.CANCELLED, "the MR was closed on GitLab")
    return True


def _branch_is_empty(gitlab: GitLabClient, item: MRWorkItem) -> bool:
    """The bot branch exists and adds nothing to the target."""
    if gitlab.branch(item.project, item.source_branch) is None:
        return False
    return not branch_differs(gitlab, item)


def finish_merged(
    context: ExecutionContext,
    item: MRWorkItem,
    reason: str,
    merged: MergeRequestInfo,
    checks: ChecksConfig,
) -> None:
    """The MR is merged: complete the item, or start waiting for the checks after it."""
    # A fast-forward merge makes no merge commit: the MR head is what landed.
    item.merge_commit_sha = merged.merge_commit_sha or merged.sha or item.mr_sha
    if not checks.after_merge or item.merge_commit_sha is None:
        complete_merged(context, item, reason)
        return
    show_blocker(context, item, None)
    context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
    start_waiting(context, item)
    context.audit(
        "post_merge_checks",
        reason=f"{reason}; waiting for the checks of the merge commit",
        merge_commit_sha=item.merge_commit_sha,
        checks=[check.name for check in checks.after_merge],
    )


def complete_merged(context: ExecutionContext, item: MRWorkItem, reason: str) -> None:
    show_blocker(context, item, None)
    item.completion_reason = CompletionReason.MERGED
    context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)
    context.set_phase(Phase.COMPLETED, reason)


def record_observed(
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


def show_blocker(context: ExecutionContext, item: MRWorkItem, blocker: MergeBlocker | None) -> None:
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
