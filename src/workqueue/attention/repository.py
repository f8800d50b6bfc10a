"""All SQL of the attention queues (nothing here commits; callers' boundaries do).

Lock order, everywhere: the queue rows first (in id order), then the items
(the engine's per-item advisory lock, in lock-key order, as ingestion takes
them). Membership writers share the queue rows (`FOR SHARE`); a rule change
takes them exclusively, so it never interleaves with a half-written page.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import InstrumentedAttribute, Session

from workqueue.attention.config import QueueRule
from workqueue.attention.models import AttentionMembership, AttentionQueue
from workqueue.queue import pg_arrays
from workqueue.queue.models import Phase, WorkItem, WorkItemStatus

RULE_ACTOR = "rule"


@dataclass(frozen=True)
class QueueRow:
    id: int
    name: str
    description: str
    match: dict[str, list[str]]
    prune: bool
    enabled: bool


@dataclass(frozen=True)
class MembershipRow:
    queue_id: int
    work_item_id: uuid.UUID
    added_at: datetime
    added_by: str
    removed_at: datetime | None
    removed_fingerprint: str | None

    @property
    def current(self) -> bool:
        return self.removed_at is None


@dataclass(frozen=True)
class ItemRow:
    id: uuid.UUID
    item_type: str
    phase: str
    project: str | None
    generation: int


_QUEUE_COLUMNS = (
    AttentionQueue.id,
    AttentionQueue.name,
    AttentionQueue.description,
    AttentionQueue.match,
    AttentionQueue.prune,
    AttentionQueue.enabled,
)


def _queue(row: Any) -> QueueRow:
    return QueueRow(row[0], row[1], row[2], dict(row[3]), row[4], row[5])


# -- queues ----------------------------------------------------------------------


def sync_queues(session: Session, rules: Sequence[QueueRule]) -> bool:
    """Make the table say what the config says; True when any rule changed.

    Existing rows are locked exclusively first, so membership writers that
    hold them (shared) finish before the rules they applied change.
    """
    existing = {
        row[1]: row
        for row in session.execute(
            sa.select(*_QUEUE_COLUMNS, AttentionQueue.retired_at)
            .order_by(AttentionQueue.id)
            .with_for_update()
        )
    }
    changed = False
    for rule in rules:
        wanted = (rule.description, rule.match, rule.prune, rule.enabled)
        row = existing.get(rule.name)
        if row is not None and (row[2], dict(row[3]), row[4], row[5]) == wanted and row[6] is None:
            continue
        changed = True
        values = {
            "description": rule.description,
            "match": rule.match,
            "prune": rule.prune,
            "enabled": rule.enabled,
        }
        statement = insert(AttentionQueue).values(name=rule.name, **values)
        session.execute(
            statement.on_conflict_do_update(
                index_elements=[AttentionQueue.name],
                set_={**values, "retired_at": None, "updated_at": sa.func.now()},
            )
        )
    retired = [
        name for name, row in existing.items() if row[6] is None and name not in _names(rules)
    ]
    if retired:
        changed = True
        session.execute(
            sa.update(AttentionQueue)
            .where(AttentionQueue.name.in_(retired))
            .values(retired_at=sa.func.now(), updated_at=sa.func.now())
        )
    return changed


def _names(rules: Sequence[QueueRule]) -> set[str]:
    return {rule.name for rule in rules}


def served_queues(session: Session) -> list[QueueRow]:
    """Queues in the config (retired ones are neither served nor kept)."""
    rows = session.execute(
        sa.select(*_QUEUE_COLUMNS)
        .where(AttentionQueue.retired_at.is_(None))
        .order_by(AttentionQueue.id)
    )
    return [_queue(row) for row in rows]


def queue_by_name(session: Session, name: str) -> QueueRow | None:
    row = session.execute(
        sa.select(*_QUEUE_COLUMNS).where(
            AttentionQueue.name == name, AttentionQueue.retired_at.is_(None)
        )
    ).first()
    return None if row is None else _queue(row)


def lock_queues_shared(session: Session, queue_ids: Collection[int]) -> list[QueueRow]:
    """Share-lock the queue rows (id order) and return them as they now stand."""
    rows = session.execute(
        sa.select(*_QUEUE_COLUMNS)
        .where(AttentionQueue.id.in_(sorted(queue_ids)), AttentionQueue.retired_at.is_(None))
        .order_by(AttentionQueue.id)
        .with_for_update(read=True)
    )
    return [_queue(row) for row in rows]


# -- scopes and pages -------------------------------------------------------------


def among(
    column: sa.ColumnElement[uuid.UUID] | InstrumentedAttribute[uuid.UUID],
    ids: Collection[uuid.UUID],
) -> sa.ColumnElement[bool]:
    """`column = ANY(ids)` with the ids as one array literal. An `IN` list of a page's
    hundred ids cost a bound parameter each, built and converted per statement."""
    literal = sa.bindparam(None, pg_arrays.uuids(ids), type_=sa.Text)
    return column == sa.any_(sa.cast(literal, ARRAY(sa.Uuid)))


def _in_scope(scope: str | None) -> sa.ColumnElement[bool]:
    if scope is None:
        return WorkItem.project_path.is_(None)
    return WorkItem.project_path == scope


def all_scopes(session: Session) -> list[str | None]:
    """Every project that has items (None: items without a project)."""
    return list(session.scalars(sa.select(WorkItem.project_path).distinct()))


def scope_upper_id(session: Session, scope: str | None) -> uuid.UUID | None:
    """The highest item id in the scope now: a cycle never reads past it."""
    found: uuid.UUID | None = session.scalar(
        # PostgreSQL has no max(uuid); the primary key index answers this.
        sa.select(WorkItem.id).where(_in_scope(scope)).order_by(WorkItem.id.desc()).limit(1)
    )
    return found


def scope_page(
    session: Session,
    scope: str | None,
    *,
    after: uuid.UUID | None,
    upper: uuid.UUID,
    limit: int,
) -> list[ItemRow]:
    rows = session.execute(scope_page_statement(scope, after=after, upper=upper, limit=limit))
    return [ItemRow(row[0], row[1], str(row[2]), row[3], row[4]) for row in rows]


def scope_page_statement(
    scope: str | None, *, after: uuid.UUID | None, upper: uuid.UUID, limit: int
) -> sa.Select[uuid.UUID, str, Phase, str | None, int]:
    """The items of `scope` after `after` up to `upper`, in id order: a range read of
    `ix_work_items_project_path_id` (migration 0015)."""
    statement = sa.select(
        WorkItem.id, WorkItem.item_type, WorkItem.phase, WorkItem.project_path, WorkItem.generation
    ).where(_in_scope(scope), WorkItem.id <= upper)
    if after is not None:
        statement = statement.where(WorkItem.id > after)
    return statement.order_by(WorkItem.id).limit(limit)


def item_rows(session: Session, item_ids: Collection[uuid.UUID]) -> list[ItemRow]:
    rows = session.execute(
        sa.select(
            WorkItem.id,
            WorkItem.item_type,
            WorkItem.phase,
            WorkItem.project_path,
            WorkItem.generation,
        ).where(among(WorkItem.id, item_ids))
    )
    return [ItemRow(row[0], row[1], str(row[2]), row[3], row[4]) for row in rows]


def dimension_statuses(
    session: Session, item_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, dict[str, list[str]]]:
    found: dict[uuid.UUID, dict[str, list[str]]] = {}
    if not item_ids:
        return found
    rows = session.execute(
        sa.select(WorkItemStatus.work_item_id, WorkItemStatus.dimension, WorkItemStatus.status)
        .where(among(WorkItemStatus.work_item_id, item_ids))
        .order_by(WorkItemStatus.work_item_id, WorkItemStatus.dimension, WorkItemStatus.variant)
    )
    for item_id, dimension, status in rows:
        found.setdefault(item_id, {}).setdefault(dimension, []).append(str(status))
    return found


# -- memberships -----------------------------------------------------------------


_MEMBERSHIP_COLUMNS = (
    AttentionMembership.queue_id,
    AttentionMembership.work_item_id,
    AttentionMembership.added_at,
    AttentionMembership.added_by,
    AttentionMembership.removed_at,
    AttentionMembership.removed_fingerprint,
)


def memberships_of_items(
    session: Session, item_ids: Collection[uuid.UUID]
) -> dict[tuple[int, uuid.UUID], MembershipRow]:
    if not item_ids:
        return {}
    rows = session.execute(
        sa.select(*_MEMBERSHIP_COLUMNS).where(among(AttentionMembership.work_item_id, item_ids))
    )
    return {(row[0], row[1]): MembershipRow(*row) for row in rows}


def add_member(session: Session, queue_id: int, item_id: uuid.UUID, added_by: str) -> bool:
    """Insert, or turn a hand-removal marker back into a membership; False if already a member."""
    statement = insert(AttentionMembership).values(
        queue_id=queue_id, work_item_id=item_id, added_by=added_by
    )
    row = session.execute(
        statement.on_conflict_do_update(
            index_elements=[AttentionMembership.queue_id, AttentionMembership.work_item_id],
            set_={
                "added_at": sa.func.now(),
                "added_by": added_by,
                "removed_at": None,
                "removed_by": None,
                "removed_fingerprint": None,
            },
            where=AttentionMembership.removed_at.is_not(None),
        ).returning(AttentionMembership.queue_id)
    ).first()
    return row is not None


def add_members(
    session: Session, pairs: Sequence[tuple[int, uuid.UUID]], added_by: str
) -> set[tuple[int, uuid.UUID]]:
    """`add_member` for many (queue id, item id) pairs in one statement; the pairs added.

    The pairs must be distinct: one statement may not insert and update one row twice.
    """
    if not pairs:
        return set()
    rows = session.execute(
        sa.text(
            "INSERT INTO attention_memberships (queue_id, work_item_id, added_by) "
            "SELECT queue_id, work_item_id, :added_by "
            "FROM unnest(CAST(:queue_ids AS bigint[]), CAST(:item_ids AS uuid[])) "
            "AS wanted(queue_id, work_item_id) "
            "ON CONFLICT (queue_id, work_item_id) DO UPDATE SET added_at = now(), "
            "added_by = EXCLUDED.added_by, removed_at = NULL, removed_by = NULL, "
            "removed_fingerprint = NULL "
            "WHERE attention_memberships.removed_at IS NOT NULL "
            "RETURNING queue_id, work_item_id"
        ),
        {
            "added_by": added_by,
            "queue_ids": [queue_id for queue_id, _ in pairs],
            "item_ids": [item_id for _, item_id in pairs],
        },
    )
    return {(row[0], row[1]) for row in rows}


def prune_members(
    session: Session, pairs: Sequence[tuple[int, uuid.UUID]]
) -> set[tuple[int, uuid.UUID]]:
    """`prune_member` for many (queue id, item id) pairs in one statement; the pairs pruned."""
    if not pairs:
        return set()
    rows = session.execute(
        sa.text(
            "DELETE FROM attention_memberships AS member "
            "USING unnest(CAST(:queue_ids AS bigint[]), CAST(:item_ids AS uuid[])) "
            "AS wanted(queue_id, work_item_id) "
            "WHERE member.queue_id = wanted.queue_id "
            "AND member.work_item_id = wanted.work_item_id AND member.removed_at IS NULL "
            "RETURNING member.queue_id, member.work_item_id"
        ),
        {
            "queue_ids": [queue_id for queue_id, _ in pairs],
            "item_ids": [item_id for _, item_id in pairs],
        },
    )
    return {(row[0], row[1]) for row in rows}


def remove_by_hand(
    session: Session, queue_id: int, item_id: uuid.UUID, removed_by: str, seen: str
) -> bool:
    """Leave the marker that keeps the rule from re-adding the item; False if not a member."""
    row = session.execute(
        sa.update(AttentionMembership)
        .where(
            AttentionMembership.queue_id == queue_id,
            AttentionMembership.work_item_id == item_id,
            AttentionMembership.removed_at.is_(None),
        )
        .values(removed_at=sa.func.now(), removed_by=removed_by, removed_fingerprint=seen)
        .returning(AttentionMembership.queue_id)
    ).first()
    return row is not None


def prune_member(session: Session, queue_id: int, item_id: uuid.UUID) -> bool:
    row = session.execute(
        sa.delete(AttentionMembership)
        .where(
            AttentionMembership.queue_id == queue_id,
            AttentionMembership.work_item_id == item_id,
            AttentionMembership.removed_at.is_(None),
        )
        .returning(AttentionMembership.queue_id)
    ).first()
    return row is not None


# -- reads for the API --------------------------------------------------------------


def current_members(queue_id: int) -> sa.ColumnElement[bool]:
    """A filter on `WorkItem`: the item is a current member of the queue."""
    return WorkItem.id.in_(
        sa.select(AttentionMembership.work_item_id).where(
            AttentionMembership.queue_id == queue_id, AttentionMembership.removed_at.is_(None)
        )
    )


def queue_sizes(session: Session, visible: sa.ColumnElement[bool]) -> dict[int, int]:
    """Current members per queue, counting only items `visible` lets through."""
    rows = session.execute(
        sa.select(AttentionMembership.queue_id, sa.func.count())
        .join(WorkItem, WorkItem.id == AttentionMembership.work_item_id)
        .where(AttentionMembership.removed_at.is_(None), visible)
        .group_by(AttentionMembership.queue_id)
    )
    return {row[0]: row[1] for row in rows}


def membership_of(session: Session, queue_id: int, item_id: uuid.UUID) -> MembershipRow | None:
    row = session.execute(
        sa.select(*_MEMBERSHIP_COLUMNS).where(
            AttentionMembership.queue_id == queue_id, AttentionMembership.work_item_id == item_id
        )
    ).first()
    return None if row is None else MembershipRow(*row)
