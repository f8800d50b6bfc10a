"""Attention queues over HTTP: list queues, page a queue's items, add and remove by hand.

Scoping is the work-item routes': reads are filtered in SQL to what the
caller may read (sizes count only that), manual changes need `retry` on the
item's type and project. SQL lives in `attention.repository`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from workqueue.api.deps import (
    CallerDep,
    ItemIdPath,
    PathText,
    Runtime,
    RuntimeDep,
    require_on_project,
)
from workqueue.api.routes.work_items import Cursor, Limit
from workqueue.api.schemas import WorkItemBody, error_responses, listed_item_body
from workqueue.attention import repository, writer
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.attention.repository import QueueRow
from workqueue.db.transactions import run_in_transaction
from workqueue.queue import read_repository
from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.read_repository import InvalidCursorError

router = APIRouter(prefix="/api/queues", tags=["attention queues"])


class QueueBody(BaseModel):
    name: str
    description: str
    size: int  # members the caller may read


class QueuePage(BaseModel):
    items: list[QueueBody]
    next_cursor: str | None = None


class Membership(BaseModel):
    added_at: datetime
    added_by: str  # "rule" or the identity of the caller who added it


class QueueItemBody(WorkItemBody):
    membership: Membership


class QueueItemPage(BaseModel):
    items: list[QueueItemBody]
    next_cursor: str | None


class AddRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    work_item_id: uuid.UUID


def get_attention(request: Request) -> AttentionReconciler:
    attention: AttentionReconciler = request.app.state.attention
    return attention


AttentionDep = Annotated[AttentionReconciler, Depends(get_attention)]


@router.get("", response_model=QueuePage, responses=error_responses(401))
def list_queues(runtime: RuntimeDep, caller: CallerDep) -> QueuePage:
    """Every queue, its size counting only the members the caller may read."""
    visible = read_repository.visible_to(runtime.gatekeeper.visibility(caller, "read"))
    with runtime.sessions() as session:
        queues = repository.served_queues(session)
        sizes = repository.queue_sizes(session, visible)
    return QueuePage(
        items=[
            QueueBody(name=queue.name, description=queue.description, size=sizes.get(queue.id, 0))
            for queue in queues
        ]
    )


@router.get("/{name}/items", response_model=QueueItemPage, responses=error_responses(401, 403, 404))
def list_queue_items(
    name: PathText, runtime: RuntimeDep, caller: CallerDep, limit: Limit = 50, cursor: Cursor = None
) -> QueueItemPage:
    """The queue's members the caller may read, newest item first (list form)."""
    readable = runtime.gatekeeper.readable_types(caller)
    if readable is not None and not readable:
        raise HTTPException(status_code=403, detail=f"{caller.identity} may not read any items")
    visible = read_repository.visible_to(runtime.gatekeeper.visibility(caller, "read"))
    with runtime.sessions() as session:
        queue = _queue(session, name)
        try:
            page = read_repository.list_items(
                session,
                item_types=readable,
                filters=[visible, repository.current_members(queue.id)],
                limit=limit,
                cursor=cursor,
            )
        except InvalidCursorError as error:
            raise HTTPException(
                status_code=422,
                detail=[{"loc": ["query", "cursor"], "msg": str(error), "type": "value_error"}],
            ) from None
        ids = [item.id for item in page.items]
        dimensions = read_repository.dimensions_of(session, ids)
        memberships = repository.memberships_of_items(session, ids)
        items = []
        for item in page.items:
            member = memberships[(queue.id, item.id)]
            body = listed_item_body(item, dimensions[item.id])
            items.append(
                QueueItemBody(
                    **body.model_dump(),
                    membership=Membership(added_at=member.added_at, added_by=member.added_by),
                )
            )
    return QueueItemPage(items=items, next_cursor=page.next_cursor)


@router.post(
    "/{name}/items",
    status_code=201,
    responses={
        200: {"description": "The item was a member already"},
        **error_responses(401, 403, 404, 413),
    },
)
def add_queue_item(
    name: PathText,
    request: AddRequest,
    response: Response,
    runtime: RuntimeDep,
    caller: CallerDep,
    attention: AttentionDep,
) -> Membership:
    """Add an item by hand (201), or confirm it is a member (200)."""

    def work(session: Session) -> tuple[AuditEntry | None, Membership]:
        queue = _queue(session, name)
        _authorized_item(session, runtime, caller, request.work_item_id)
        entry = writer.add_by_hand(
            session, attention.readers, queue, request.work_item_id, caller.identity
        )
        member = repository.membership_of(session, queue.id, request.work_item_id)
        assert member is not None  # noqa: S101 - just written or already there
        return entry, Membership(added_at=member.added_at, added_by=member.added_by)

    entry, membership = run_in_transaction(runtime.sessions, work)
    if entry is None:
        response.status_code = 200
    else:
        runtime.audit.write(entry)
    return membership


@router.delete("/{name}/items/{item_id}", status_code=204, responses=error_responses(401, 403, 404))
def remove_queue_item(
    name: PathText,
    item_id: ItemIdPath,
    runtime: RuntimeDep,
    caller: CallerDep,
    attention: AttentionDep,
) -> Response:
    """Take an item out; its rule does not add it back until the item changes again."""

    def work(session: Session) -> AuditEntry:
        queue = _queue(session, name)
        _authorized_item(session, runtime, caller, item_id)
        entry = writer.remove_by_hand(session, attention.readers, queue, item_id, caller.identity)
        if entry is None:
            raise HTTPException(status_code=404, detail=f"item {item_id} is not in queue {name}")
        return entry

    runtime.audit.write(run_in_transaction(runtime.sessions, work))
    return Response(status_code=204)


def _queue(session: Session, name: str) -> QueueRow:
    queue = repository.queue_by_name(session, name)
    if queue is None:
        raise HTTPException(status_code=404, detail=f"no queue {name}")
    return queue


def _authorized_item(
    session: Session, runtime: Runtime, caller: CallerDep, item_id: uuid.UUID
) -> None:
    item = read_repository.get_item(session, item_id)
    if item is None:
        raise HTTPException(status_code=404, detail=f"no work item {item_id}")
    require_on_project(runtime, caller, "retry", item.item_type, item.project_path)
