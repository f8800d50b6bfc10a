"""Reading a type's detail columns through the model the type registered.

Types register a joined-table model (`TypeRegistry.register(model=...)`);
its own table holds the detail columns. Attention reads only the columns
some rule names, so a page never drags large columns (file contents) along.
A type without a detail table has no details: `details.*` keys never match it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.attention import repository
from workqueue.queue.models import WorkItem
from workqueue.queue.registry import TypeRegistry

DetailsReader = Callable[
    [Session, Collection[uuid.UUID], Collection[str]], dict[uuid.UUID, dict[str, Any]]
]
"""(session, item ids, wanted columns) -> item id -> {column: value}."""


class DetailReaders:
    """One reader per item type; by default built from the registry's model mapping."""

    def __init__(self, readers: Mapping[str, DetailsReader]) -> None:
        self._readers = dict(readers)

    @classmethod
    def from_registry(
        cls, registry: TypeRegistry, overrides: Mapping[str, DetailsReader] | None = None
    ) -> DetailReaders:
        readers: dict[str, DetailsReader] = {}
        for registration in registry:
            table = registration.model.__table__
            if table is not WorkItem.__table__ and isinstance(table, sa.Table):
                readers[registration.item_type] = _table_reader(table)
        readers.update(overrides or {})
        return cls(readers)

    def read(
        self,
        session: Session,
        item_type: str,
        item_ids: Collection[uuid.UUID],
        wanted: Collection[str],
    ) -> dict[uuid.UUID, dict[str, Any]]:
        reader = self._readers.get(item_type)
        if reader is None or not wanted or not item_ids:
            return {}
        return reader(session, item_ids, wanted)


def _table_reader(table: sa.Table) -> DetailsReader:
    def read(
        session: Session, item_ids: Collection[uuid.UUID], wanted: Collection[str]
    ) -> dict[uuid.UUID, dict[str, Any]]:
        columns = [table.c[name] for name in sorted(wanted) if name in table.c and name != "id"]
        if not columns:
            return {}
        rows = session.execute(
            sa.select(table.c.id, *columns).where(repository.among(table.c.id, item_ids))
        ).all()
        return {
            row[0]: {column.name: row[i + 1] for i, column in enumerate(columns)} for row in rows
        }

    return read
