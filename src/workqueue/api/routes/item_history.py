"""`GET /api/work-items/{id}/history`: an item's audit entries from the database, oldest first."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from workqueue.api.deps import (
    MAX_QUERY_TEXT_LENGTH,
    NO_CONTROL_CHARACTERS,
    CallerDep,
    ItemIdPath,
    RuntimeDep,
    require_on_project,
)
from workqueue.api.schemas import error_responses
from workqueue.queue import read_repository
from workqueue.queue.audit import repository as audit_repository
from workqueue.queue.models import AuditRecord
from workqueue.queue.read_repository import InvalidCursorError

router = APIRouter(prefix="/api/work-items", tags=["work items"])

Limit = Annotated[int, Query(ge=1, le=audit_repository.MAX_HISTORY_PAGE, description="page size")]
Cursor = Annotated[
    str | None,
    Query(
        description="next_cursor of the previous page",
        pattern=NO_CONTROL_CHARACTERS,
        max_length=MAX_QUERY_TEXT_LENGTH,
    ),
]


class AuditEntryBody(BaseModel):
    """One thing that happened to the item: who did what, and what changed."""

    entry_id: uuid.UUID
    timestamp: datetime
    event_type: str = Field(description="phase_change, dimension_change, item_submitted, …")
    actor: str = Field(description="the caller's identity, or `system`")
    work_item_id: uuid.UUID | None
    item_type: str | None
    reason: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    details: dict[str, Any]


class HistoryPage(BaseModel):
    items: list[AuditEntryBody]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: done")


@router.get(
    "/{item_id}/history",
    response_model=HistoryPage,
    responses=error_responses(401, 403, 404),
)
def item_history(
    item_id: ItemIdPath,
    runtime: RuntimeDep,
    caller: CallerDep,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> HistoryPage:
    """The item's audit entries kept in the database (`audit.retention_days`), oldest first."""
    with runtime.sessions() as session:
        item = read_repository.get_item(session, item_id)
        if item is None:
            raise HTTPException(status_code=404, detail=f"no work item {item_id}")
        require_on_project(runtime, caller, "read", item.item_type, item.project_path)
        try:
            page = audit_repository.history_page(session, item.id, limit=limit, cursor=cursor)
        except InvalidCursorError as error:
            raise HTTPException(
                status_code=422,
                detail=[{"loc": ["query", "cursor"], "msg": str(error), "type": "value_error"}],
            ) from None
        return HistoryPage(items=[_body(row) for row in page.entries], next_cursor=page.next_cursor)


def _body(row: AuditRecord) -> AuditEntryBody:
    return AuditEntryBody(
        entry_id=row.entry_id,
        timestamp=row.occurred_at,
        event_type=row.event_type,
        actor=row.actor,
        work_item_id=row.work_item_id,
        item_type=row.item_type,
        reason=row.reason,
        before=row.before,
        after=row.after,
        details=row.details,
    )
