"""Executors of the `mr` type. They change state and call GitLab; they never commit.

GitLab errors arrive already classified by the adapter: a
`PermanentGitLabError` fails the item at once with GitLab's own message, a
`RetryableGitLabError` is retried by the engine's backoff (one retry policy,
DDR-14); nothing here retries on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue import repository
from workqueue.queue.context import ExecutionContext
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.errors import PermanentError
from workqueue.queue.models import DimensionStatus, Phase, WorkItem
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.models import CompletionReason, MRDimension, MRWorkItem

CANCELLED_NOTE = (
    "Closing: the work item behind this merge request was cancelled. (workqueue-service)"
)
EMPTY_DIFF_NOTE = (
    "Closing: the target branch already contains these changes, so this merge "
    "request would be empty. (workqueue-service)"
)


class MRExecutors:
    """Executors bound to one GitLab client (one per configured GitLab instance)."""

    def __init__(self, gitlab: GitLabClient, config: MRTypeConfig | None = None) -> None:
        self._gitlab = gitlab
        config = config or MRTypeConfig()
        self._empty_check_interval = timedelta(seconds=config.empty_check_interval_seconds)

    def ensure_mr(self, context: ExecutionContext) -> None:
        """Bring the bot branch and its MR to exactly the submitted content.

        The branch is rebuilt as ONE commit on top of the target branch
        (`start_branch` + `force`), so it never accumulates old attempts. An
        open MR for the branch is reused: a crash between the commit and the
        MR creation must not produce a second MR.

        While `foreign_head_sha` is set (someone else pushed to the bot branch,
        see `events.is_foreign_push`) the branch is left alone: force-pushing
        would throw their commits away. A resubmission clears it.

        Afterwards `reconcile_mr` is due at once (look at the new head) and the
        periodic empty-diff check one interval from now (this run just checked).
        """
        item = cast("MRWorkItem", context.item)
        gitlab = self._gitlab
        if item.foreign_head_sha is not None:
            context.set_dimension(MRDimension.NEEDS_MR, DimensionStatus.FALSE)
            context.audit(
                "mr_branch_foreign",
                reason="the bot branch has commits the service did not push; "
                "not force-pushing over them until the item is resubmitted",
                foreign_head_sha=item.foreign_head_sha,
                branch=item.source_branch,
            )
            return
        if item.target_branch is None:
            project = gitlab.project(item.project)
            if project.default_branch is None:
                raise PermanentError(f"project {item.project} has an empty repository")
            item.target_branch = project.default_branch
        target = item.target_branch

        commit = gitlab.commit(
            item.project,
            branch=item.source_branch,
            start_branch=target,
            message=item.commit_message,
            actions=item.file_actions,
            force=True,
        )
        if commit.sha != item.mr_sha:
            # The pipeline recorded so far ran on the previous head.
            item.head_pipeline_id = item.head_pipeline_sha = item.head_pipeline_status = None
        item.mr_sha = commit.sha

        open_mrs = gitlab.open_merge_requests(item.project, item.source_branch, target)
        if not gitlab.compare(item.project, target, item.source_branch).differs:
            finish_empty(gitlab, context, item, [mr.iid for mr in open_mrs])
            return

        if open_mrs:
            merge_request = self._sync_metadata(item, open_mrs[0])
        else:
            merge_request = gitlab.create_merge_request(
                item.project,
                source_branch=item.source_branch,
                target_branch=target,
                title=item.title,
                description=item.description or "",
                labels=list(item.labels),
                remove_source_branch=True,
            )
        item.mr_iid = merge_request.iid
        item.mr_url = merge_request.web_url
        item.detailed_merge_status = merge_request.detailed_merge_status
        context.set_dimension(MRDimension.NEEDS_MR, DimensionStatus.FALSE)
        context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
        context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._empty_check_interval)
        context.audit("mr_ensured", mr_iid=merge_request.iid, sha=commit.sha)

    def close_on_cancel(self, session: Session, item: WorkItem, options: Mapping[str, Any]) -> None:
        """Cancel hook: with `close_mr`, close the item's open MR with a note (else no-op)."""
        del session  # nothing to write beyond what the generic cancel does
        mr_item = cast("MRWorkItem", item)
        if not options.get("close_mr") or mr_item.mr_iid is None:
            return
        merge_request = self._gitlab.merge_request(mr_item.project, mr_item.mr_iid)
        if merge_request.state != "opened":
            return
        self._gitlab.add_note(mr_item.project, mr_item.mr_iid, CANCELLED_NOTE)
        self._gitlab.close_merge_request(mr_item.project, mr_item.mr_iid)

    def reopen_on_retry(self, session: Session, item: WorkItem) -> None:
        """Retry hook: ask for the branch and MR again (a cancelled item's MR may be closed)."""
        repository.upsert_dimension(
            session, item.id, DimensionUpdate(MRDimension.NEEDS_MR, DimensionStatus.TRUE)
        )

    def _sync_metadata(self, item: MRWorkItem, merge_request: MergeRequestInfo) -> MergeRequestInfo:
        wanted = {
            "title": item.title,
            "description": item.description or "",
            "labels": sorted(item.labels),
        }
        current = {
            "title": merge_request.title,
            "description": merge_request.description,
            "labels": sorted(merge_request.labels),
        }
        changed = {key: value for key, value in wanted.items() if current[key] != value}
        if not changed:
            return merge_request
        return self._gitlab.update_merge_request(item.project, merge_request.iid, **changed)


def finish_empty(
    gitlab: GitLabClient,
    context: ExecutionContext,
    item: MRWorkItem,
    open_mr_iids: Sequence[int],
) -> None:
    """DDR-43: nothing left to merge; leave no empty MR and no bot branch behind.

    Closes the given open MRs with a note saying why, deletes the bot branch
    (already gone is fine) and completes the item with reason `empty_diff`.
    """
    for iid in open_mr_iids:
        gitlab.add_note(item.project, iid, EMPTY_DIFF_NOTE)
        gitlab.close_merge_request(item.project, iid)
    gitlab.delete_branch(item.project, item.source_branch)
    item.completion_reason = CompletionReason.EMPTY_DIFF
    context.set_dimension(MRDimension.NEEDS_MR, DimensionStatus.FALSE)
    context.set_phase(Phase.COMPLETED, "the target branch already has this content")
