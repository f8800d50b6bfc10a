"""SQL for reading items (API, CLI): one item, its dimensions, keyset-paged lists."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.orm import Session, selectin_polymorphic

from workqueue.queue.models import WorkItem, WorkItemStatus

MAX_PAGE_SIZE = 500


class InvalidCursorError(ValueError):
    """The cursor was not produced by this service (or was altered)."""


@dataclass(frozen=True)
class Page:
    items: list[WorkItem]
    next_cursor: str | None


def get_item(session: Session, item_id: uuid.UUID) -> WorkItem | None:
    return session.get(WorkItem, item_id)


def dimensions_of(
    session: Session, item_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, list[WorkItemStatus]]:
    found: dict[uuid.UUID, list[WorkItemStatus]] = {item_id: [] for item_id in item_ids}
    if not item_ids:
        return found
    rows = session.scalars(
        sa.select(WorkItemStatus)
        .where(WorkItemStatus.work_item_id.in_(list(item_ids)))
        .order_by(WorkItemStatus.dimension, WorkItemStatus.variant)
    )
    for row in rows:
        found[row.work_item_id].append(row)
    return found


def list_items(
    session: Session,
    *,
    model: type[WorkItem] = WorkItem,
    item_types: Collection[str] | None,
    filters: Sequence[sa.ColumnElement[bool]] = (),
    limit: int,
    cursor: str | None,
) -> Page:
    """Newest first; `item_types` None means every type; the cursor continues a previous page."""
    statement = list_statement(
        model, item_types=item_types, filters=filters, limit=limit + 1, cursor=cursor
    )
    rows = list(session.scalars(statement))
    next_cursor = encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return Page(rows[:limit], next_cursor)


def list_statement(
    model: type[WorkItem],
    *,
    item_types: Collection[str] | None,
    filters: Sequence[sa.ColumnElement[bool]],
    limit: int,
    cursor: str | None,
) -> sa.Select[Any]:
    """The page query: ordered and keyset-paged on `(work_items.created_at, work_items.id)`.

    Both keys are `work_items` columns even for a detail model (whose `id` is
    the detail table's), so the order walks `ix_work_items_created_at_id`
    (or `ix_work_items_item_type_phase_created_at_id` under those filters)
    and stops after `limit` rows instead of sorting the table. The base model
    loads every listed type's detail columns with one query per type
    (`selectin_polymorphic`), not one per row.
    """
    items = WorkItem.__table__.c
    statement = sa.select(model).where(*filters)
    if model is WorkItem:
        subclasses = [
            mapper.class_
            for mapper in WorkItem.__mapper__.self_and_descendants
            if mapper.class_ is not WorkItem
        ]
        if subclasses:
            statement = statement.options(selectin_polymorphic(WorkItem, subclasses))
    if item_types is not None:
        statement = statement.where(items.item_type.in_(list(item_types)))
    if cursor is not None:
        created_at, item_id = decode_cursor(cursor)
        statement = statement.where(
            sa.tuple_(items.created_at, items.id)
            < sa.tuple_(sa.literal(created_at), sa.literal(item_id))
        )
    return statement.order_by(items.created_at.desc(), items.id.desc()).limit(limit)


def encode_cursor(item: WorkItem) -> str:
    payload = json.dumps({"created_at": item.created_at.isoformat(), "id": str(item.id)})
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) a cursor continues after; InvalidCursorError for anything else.

    Cursors come back from callers: every part is checked for its type before
    use (`uuid.UUID(5)` is an AttributeError, not a ValueError).
    """
    invalid = InvalidCursorError("cursor is not valid; pass next_cursor from a previous page")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload: Any = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, RecursionError) as error:  # UnicodeDecodeError too
        raise invalid from error
    created_at = payload.get("created_at") if isinstance(payload, dict) else None
    item_id = payload.get("id") if isinstance(payload, dict) else None
    if not isinstance(created_at, str) or not isinstance(item_id, str):
        raise invalid
    try:
        return datetime.fromisoformat(created_at), uuid.UUID(item_id)
    except ValueError as error:
        raise invalid from error


class VisibilityGrant(Protocol):
    """One authorization grant as lists need it (see `auth.authorization.Grant`)."""

    @property
    def item_types(self) -> frozenset[str] | None: ...

    @property
    def project_regexes(self) -> tuple[str, ...] | None: ...


def visible_to(grants: Sequence[VisibilityGrant]) -> sa.ColumnElement[bool]:
    """The SQL condition an item must meet to be shown under these grants (OR over them).

    Project scopes are anchored regular expressions matched with PostgreSQL's
    case-sensitive `~`, so paging stays a database query: a page is never
    filtered after the fact in Python (which would make pages short and leak
    through their cursors).
    """
    conditions: list[sa.ColumnElement[bool]] = []
    for grant in grants:
        parts: list[sa.ColumnElement[bool]] = []
        if grant.item_types is not None:
            parts.append(WorkItem.item_type.in_(sorted(grant.item_types)))
        if grant.project_regexes is not None:
            matches = (WorkItem.project_path.regexp_match(regex) for regex in grant.project_regexes)
            parts.append(sa.or_(sa.false(), *matches))
        conditions.append(sa.and_(sa.true(), *parts))
    return sa.or_(sa.false(), *conditions)
