"""SQL for reading items (API, CLI): one item, its dimensions, keyset-paged lists."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Mapper, Session, selectin_polymorphic

from workqueue.queue.models import WorkItem, WorkItemStatus

MAX_PAGE_SIZE = 500


OrderKeys = tuple[sa.ColumnElement[datetime], sa.ColumnElement[uuid.UUID]]
"""Columns holding an item's `(created_at, id)` that a page is ordered and keyed on."""


class InvalidCursorError(ValueError):
    """The cursor was not produced by this service (or was altered)."""


@dataclass(frozen=True)
class Page:
    items: list[WorkItem]
    next_cursor: str | None


@dataclass(frozen=True)
class ListedRow:
    """One listed item as plain values: its `work_items` columns and its detail columns,
    each by attribute name, and its dimension rows by column name."""

    item: sa.RowMapping
    details: dict[str, Any]
    dimensions: list[dict[str, Any]]


@dataclass(frozen=True)
class RowPage:
    items: list[ListedRow]
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
    order_keys: OrderKeys | None = None,
) -> Page:
    """Newest first; `item_types` None means every type; the cursor continues a previous page."""
    statement = list_statement(
        model,
        item_types=item_types,
        filters=filters,
        limit=limit + 1,
        cursor=cursor,
        order_keys=order_keys,
    )
    rows = list(session.scalars(statement))
    next_cursor = encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return Page(rows[:limit], next_cursor)


def list_rows(
    session: Session,
    *,
    model: type[WorkItem] = WorkItem,
    item_types: Collection[str] | None,
    filters: Sequence[sa.ColumnElement[bool]] = (),
    limit: int,
    cursor: str | None,
    order_keys: OrderKeys | None = None,
) -> RowPage:
    """`list_items` for the API's lists: the same page as plain rows, in one statement.

    Building ORM objects cost about half of a page's time in the service, and
    every further round trip waits for a busy database's turn on the CPU. So
    the page query itself carries each row's detail columns (the model's
    table, or every known type's table left-joined by primary key for the
    base model) and its dimension rows (aggregated into arrays by a lateral
    subquery, which runs only for the rows the limit keeps). One statement
    is also one snapshot: an item and its dimensions always agree.
    """
    shape = _listing_shape(model)
    statement = list_statement(
        model,
        item_types=item_types,
        filters=filters,
        limit=limit + 1,
        cursor=cursor,
        columns=shape.columns,
        source=shape.source,
        order_keys=order_keys,
    )
    rows = session.execute(statement).mappings().all()  # one fetchall, not a fetch per row
    next_cursor = (
        _encode_key(rows[limit - 1]["created_at"], rows[limit - 1]["id"])
        if len(rows) > limit
        else None
    )
    return RowPage(
        [ListedRow(row, shape.details_of(row), _dimensions_of_row(row)) for row in rows[:limit]],
        next_cursor,
    )


@dataclass(frozen=True)
class _ListingShape:
    """What a model's page statement selects and joins, and how a row splits back up."""

    columns: list[sa.ColumnElement[Any]]
    source: sa.FromClause
    # Labels of each item type's detail columns, by attribute name.
    detail_labels: dict[str, dict[str, str]]

    def details_of(self, row: sa.RowMapping) -> dict[str, Any]:
        labels = self.detail_labels.get(row["item_type"], {})
        return {key: row[label] for key, label in labels.items()}


@functools.cache
def _listing_shape(model: type[WorkItem]) -> _ListingShape:
    # Built once per model: constructing the select's columns cost more than compiling it.
    items = WorkItem.__table__
    base_keys = set(_column_keys(WorkItem.__mapper__))
    model_mapper = sa.inspect(model)
    columns: list[sa.ColumnElement[Any]] = [
        model_mapper.attrs[key].columns[0].label(key) for key in _column_keys(model_mapper)
    ]
    detail_labels: dict[str, dict[str, str]] = {}
    source: sa.FromClause = model_mapper.persist_selectable
    if model is WorkItem:
        for mapper in WorkItem.__mapper__.self_and_descendants:
            table = mapper.local_table
            if table is items or not isinstance(table, sa.Table):
                continue  # the base itself, or a type without a table of its own
            identity = str(mapper.polymorphic_identity)
            keys = [key for key in _column_keys(mapper) if key not in base_keys]
            detail_labels[identity] = {key: f"{identity}.{key}" for key in keys}
            columns += [mapper.attrs[key].columns[0].label(f"{identity}.{key}") for key in keys]
            source = source.outerjoin(table, table.c.id == items.c.id)
    else:
        keys = [key for key in _column_keys(model_mapper) if key not in base_keys]
        detail_labels[str(model_mapper.polymorphic_identity)] = {key: key for key in keys}
    statuses = WorkItemStatus.__table__.alias("dimension_rows")
    in_order = (statuses.c.dimension, statuses.c.variant)
    dimensions = (
        sa.select(
            *(
                sa.func.array_agg(aggregate_order_by(statuses.c[name], *in_order)).label(name)
                for name in _DIMENSION_FIELDS
            )
        )
        .where(statuses.c.work_item_id == items.c.id)
        .lateral("dimensions")
    )
    columns += [dimensions.c[name].label(f"dimension.{name}") for name in _DIMENSION_FIELDS]
    return _ListingShape(columns, source.outerjoin(dimensions, sa.true()), detail_labels)


_DIMENSION_FIELDS = ("dimension", "variant", "status", "pending_until", "updated_at")


def _dimensions_of_row(row: sa.RowMapping) -> list[dict[str, Any]]:
    columns = [row[f"dimension.{name}"] for name in _DIMENSION_FIELDS]
    if columns[0] is None:  # no dimension rows: array_agg over nothing is NULL
        return []
    return [
        dict(zip(_DIMENSION_FIELDS, values, strict=True)) for values in zip(*columns, strict=True)
    ]


def _column_keys(mapper: Mapper[Any]) -> list[str]:
    return [attribute.key for attribute in mapper.column_attrs]


def list_statement(
    model: type[WorkItem],
    *,
    item_types: Collection[str] | None,
    filters: Sequence[sa.ColumnElement[bool]],
    limit: int,
    cursor: str | None,
    columns: Sequence[sa.ColumnElement[Any]] | None = None,
    source: sa.FromClause | None = None,
    order_keys: OrderKeys | None = None,
) -> sa.Select[Any]:
    """The page query: ordered and keyset-paged on `(work_items.created_at, work_items.id)`.

    Both keys are `work_items` columns even for a detail model (whose `id` is
    the detail table's), so the order walks `ix_work_items_created_at_id`
    (or `ix_work_items_item_type_phase_created_at_id` under those filters)
    and stops after `limit` rows instead of sorting the table. A type whose
    filter column lives in its detail table may pass `order_keys`: copies of
    the same two values there, indexed after that column, so the walk is
    one index either way and cursors stay interchangeable. The base model
    loads every listed type's detail columns with one query per type
    (`selectin_polymorphic`), not one per row.
    """
    items = WorkItem.__table__.c
    created_key, id_key = order_keys or (items.created_at, items.id)
    if columns is not None:
        assert source is not None  # noqa: S101 - given together with columns
        statement = sa.select(*columns).select_from(source).where(*filters)
    else:
        statement = sa.select(model).where(*filters)
    if model is WorkItem and columns is None:
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
            sa.tuple_(created_key, id_key) < sa.tuple_(sa.literal(created_at), sa.literal(item_id))
        )
    return statement.order_by(created_key.desc(), id_key.desc()).limit(limit)


def encode_cursor(item: WorkItem) -> str:
    return _encode_key(item.created_at, item.id)


def _encode_key(created_at: datetime, item_id: uuid.UUID) -> str:
    payload = json.dumps({"created_at": created_at.isoformat(), "id": str(item_id)})
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
