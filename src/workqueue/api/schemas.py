"""Response bodies of the HTTP API (the "Item body" of the public contract)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from workqueue.queue.models import WorkItem, WorkItemStatus


class DimensionBody(BaseModel):
    dimension: str
    variant: str
    status: str
    pending_until: datetime | None
    updated_at: datetime


class WorkItemBody(BaseModel):
    id: uuid.UUID
    item_type: str
    phase: str
    actionable: bool
    attempts: int
    error: str | None
    caller_identity: str
    caller_issuer: str | None = Field(
        None, description="where caller_identity comes from: a JWT issuer, openshift or local"
    )
    idempotency_key: str | None
    generation: int
    leased_until: datetime | None
    next_attempt_at: datetime | None
    last_event_at: datetime | None
    created_at: datetime
    updated_at: datetime
    dimensions: list[DimensionBody] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict, description="type-specific fields")


class SubmitResponse(WorkItemBody):
    outcome: str = Field(description="created | unchanged | updated | retried")


class WorkItemPage(BaseModel):
    items: list[WorkItemBody]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page")


class CancelRequest(BaseModel):
    model_config = {"extra": "forbid"}

    close_mr: bool = Field(default=False, description="also close the item's MR on GitLab")


class TokenBody(BaseModel):
    token: str


def item_body(item: WorkItem, dimensions: list[WorkItemStatus]) -> WorkItemBody:
    return WorkItemBody(
        id=item.id,
        item_type=item.item_type,
        phase=str(item.phase),
        actionable=item.actionable,
        attempts=item.attempts,
        error=item.error,
        caller_identity=item.caller_identity,
        caller_issuer=item.caller_issuer,
        idempotency_key=item.idempotency_key,
        generation=item.generation,
        leased_until=item.leased_until,
        next_attempt_at=item.next_attempt_at,
        last_event_at=item.last_event_at,
        created_at=item.created_at,
        updated_at=item.updated_at,
        dimensions=[
            DimensionBody(
                dimension=row.dimension,
                variant=row.variant,
                status=str(row.status),
                pending_until=row.pending_until,
                updated_at=row.updated_at,
            )
            for row in dimensions
        ],
        details=details_of(item),
    )


def details_of(item: WorkItem) -> dict[str, Any]:
    """The columns of the item's own detail table (joined inheritance), by name."""
    mapper = sa.inspect(type(item))
    base_columns = set(sa.inspect(WorkItem).column_attrs.keys())
    return {
        attribute.key: getattr(item, attribute.key)
        for attribute in mapper.column_attrs
        if attribute.key not in base_columns
    }
