"""The `mr` type's part in the generic cancel and retry routes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import DimensionStatus, DimensionUpdate, WorkItem, enqueue
from workqueue.types.mr.models import MRDimension, MRWorkItem

CANCELLED_NOTE = (
    "Closing: the work item behind this merge request was cancelled. (workqueue-service)"
)


class MRCancelRetryHooks:
    """Cancel and retry hooks bound to one GitLab client."""

    def __init__(self, gitlab: GitLabClient) -> None:
        self._gitlab = gitlab

    def on_cancel(self, session: Session, item: WorkItem, options: Mapping[str, Any]) -> None:
        """Cancel hook: with `close_mr`, close the item's open MR with a note.

        Either way the service will not merge it any more, so the item stops showing
        a reason not to merge (`merge_blocker`, otherwise kept from its last check).
        """
        mr_item = cast("MRWorkItem", item)
        mr_item.merge_blocker = None
        session.flush()  # before the generic cancel's own statement and refresh
        if not options.get("close_mr") or mr_item.mr_iid is None:
            return
        merge_request = self._gitlab.merge_request(mr_item.project, mr_item.mr_iid)
        if merge_request.state != "opened":
            return
        self._gitlab.add_note(mr_item.project, mr_item.mr_iid, CANCELLED_NOTE)
        self._gitlab.close_merge_request(mr_item.project, mr_item.mr_iid)

    def reopen_on_retry(self, session: Session, item: WorkItem) -> None:
        """Retry hook: ask for the branch and MR again (a cancelled item's MR may be closed);
        an item that failed on a check after its merge waits for the checks again instead,
        from now, without touching GitLab."""
        mr_item = cast("MRWorkItem", item)
        if mr_item.post_merge is not None:
            now = datetime.now(UTC).isoformat()
            # The red results so far are waited on again; the timeout starts afresh.
            waiting = {key: value for key, value in mr_item.post_merge.items() if key != "outcome"}
            mr_item.post_merge = {**waiting, "waiting_since": now, "retried_at": now}
            session.flush()
            enqueue.upsert_dimension(
                session,
                item.id,
                DimensionUpdate(MRDimension.NEEDS_POST_MERGE, DimensionStatus.TRUE),
            )
            return
        enqueue.upsert_dimension(
            session, item.id, DimensionUpdate(MRDimension.NEEDS_MR, DimensionStatus.TRUE)
        )
