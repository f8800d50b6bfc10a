"""The one membership writer, shared by the reconciler and the API's manual changes.

Every write happens under the queue rows' shared locks and then the item's
lock (see `repository`), after re-reading the item: what a page read a
moment ago is only a hint. Each change is audited after its commit and, in
the same transaction, announced through the outbox (`attention.added`).
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from workqueue.attention import repository
from workqueue.attention.details import DetailReaders
from workqueue.attention.matching import ItemFacts, detail_fields, fingerprint, matches
from workqueue.attention.repository import RULE_ACTOR, ItemRow, MembershipRow, QueueRow
from workqueue.queue import enqueue
from workqueue.queue.audit.log import SYSTEM_ACTOR, AuditEntry
from workqueue.queue.outbox import emit as outbox

logger = logging.getLogger(__name__)


class ChangeKind(enum.StrEnum):
    ADD = "add"  # a new member, or a marker turned back into one
    PRUNE = "prune"  # a prune rule's member stopped matching


@dataclass(frozen=True)
class Change:
    queue: QueueRow
    item: ItemFacts
    kind: ChangeKind


def load_facts(
    session: Session, readers: DetailReaders, queues: Sequence[QueueRow], rows: Sequence[ItemRow]
) -> list[ItemFacts]:
    """Items as the rules see them: columns, dimension statuses, the detail columns named."""
    ids = [row.id for row in rows]
    dimensions = repository.dimension_statuses(session, ids)
    wanted = set().union(*(detail_fields(queue.match) for queue in queues)) if queues else set()
    details: dict[uuid.UUID, dict[str, Any]] = {}
    for item_type in sorted({row.item_type for row in rows}):
        typed = [row.id for row in rows if row.item_type == item_type]
        details.update(readers.read(session, item_type, typed, wanted))
    return [
        ItemFacts(
            id=row.id,
            item_type=row.item_type,
            phase=row.phase,
            project=row.project,
            generation=row.generation,
            dimensions=dimensions.get(row.id, {}),
            details=details.get(row.id, {}),
        )
        for row in rows
    ]


def plan(
    queues: Sequence[QueueRow],
    facts: ItemFacts,
    memberships: dict[tuple[int, uuid.UUID], MembershipRow],
) -> list[Change]:
    """What the rules want changed for one item (pure)."""
    changes = []
    for queue in queues:
        if not queue.enabled:
            continue
        member = memberships.get((queue.id, facts.id))
        if matches(queue.match, facts):
            if member is None or (
                not member.current and member.removed_fingerprint != fingerprint(queue.match, facts)
            ):
                changes.append(Change(queue, facts, ChangeKind.ADD))
        # Members a person added stay: prune follows the rule's own additions.
        elif (
            queue.prune and member is not None and member.current and member.added_by == RULE_ACTOR
        ):
            changes.append(Change(queue, facts, ChangeKind.PRUNE))
    return changes


@dataclass
class RowsOutcome:
    """What writing one page did: the audit entries to write after commit, failures."""

    audit: list[AuditEntry] = field(default_factory=list)
    written: int = 0
    failed: list[uuid.UUID] = field(default_factory=list)
    stopped: bool = False


def reconcile_items(
    session: Session,
    readers: DetailReaders,
    queue_ids: Sequence[int],
    item_ids: Sequence[uuid.UUID],
    *,
    should_stop: Callable[[], bool] = lambda: False,
    check_row: Callable[[uuid.UUID], None] | None = None,
) -> RowsOutcome:
    """Re-check each item under its lock and apply what the rules want; never commits.

    A row that raises is rolled back to its savepoint and reported; the rest
    of the page goes on. `should_stop` is asked between rows (shutdown).
    """
    result = RowsOutcome()
    queues = repository.lock_queues_shared(session, queue_ids)
    ordered = sorted(item_ids, key=enqueue.advisory_lock_key)
    if len(ordered) > 1:
        savepoint = session.begin_nested()
        try:
            taken, result.stopped = _rows_to_take(ordered, should_stop, check_row)
            entries = _reconcile_many(session, readers, queues, taken)
            savepoint.commit()
        except Exception as error:
            # Some row broke the batch: each row on its own, so only that row fails.
            savepoint.rollback()
            logger.info("attention: page written row by row after: %s", error)
            result.stopped = False
        else:
            result.audit, result.written = entries, len(entries)
            return result
    for item_id in ordered:
        if should_stop():
            result.stopped = True
            break
        savepoint = session.begin_nested()
        try:
            if check_row is not None:
                check_row(item_id)
            entries = _reconcile_one(session, readers, queues, item_id)
            savepoint.commit()
        except Exception as error:
            savepoint.rollback()
            logger.warning("attention: could not reconcile item %s: %s", item_id, error)
            result.failed.append(item_id)
            continue
        result.audit += entries
        result.written += len(entries)
    return result


def _rows_to_take(
    ordered: Sequence[uuid.UUID],
    should_stop: Callable[[], bool],
    check_row: Callable[[uuid.UUID], None] | None,
) -> tuple[list[uuid.UUID], bool]:
    """The rows a batch writes: up to a stop, asked between rows as the row path does."""
    taken: list[uuid.UUID] = []
    for item_id in ordered:
        if should_stop():
            return taken, True
        if check_row is not None:
            check_row(item_id)
        taken.append(item_id)
    return taken, False


def _reconcile_many(
    session: Session,
    readers: DetailReaders,
    queues: Sequence[QueueRow],
    ordered: Sequence[uuid.UUID],
) -> list[AuditEntry]:
    """`_reconcile_one` for a page's rows at once: the same locks in the same order, one
    re-read, one statement per kind of write. A first pass over many items (a service
    meeting an old database) adds thousands of members; row by row that took about
    ten round trips each."""
    if not ordered:
        return []
    enqueue.lock_items(session, ordered)
    rows = {row.id: row for row in repository.item_rows(session, ordered)}
    present = [rows[item_id] for item_id in ordered if item_id in rows]  # some were deleted
    all_facts = load_facts(session, readers, queues, present)
    memberships = repository.memberships_of_items(session, [row.id for row in present])
    changes = [change for facts in all_facts for change in plan(queues, facts, memberships)]
    added = repository.add_members(
        session,
        [(c.queue.id, c.item.id) for c in changes if c.kind is ChangeKind.ADD],
        RULE_ACTOR,
    )
    pruned = repository.prune_members(
        session, [(c.queue.id, c.item.id) for c in changes if c.kind is ChangeKind.PRUNE]
    )
    entries = []
    for change in changes:
        key = (change.queue.id, change.item.id)
        if change.kind is ChangeKind.ADD and key in added:
            entries.append(_added(session, change.queue, change.item, RULE_ACTOR, SYSTEM_ACTOR))
        elif change.kind is ChangeKind.PRUNE and key in pruned:
            entries.append(_removed(change.queue, change.item, SYSTEM_ACTOR, "no longer matches"))
    return entries


def _reconcile_one(
    session: Session, readers: DetailReaders, queues: Sequence[QueueRow], item_id: uuid.UUID
) -> list[AuditEntry]:
    enqueue.lock_item(session, item_id)
    rows = repository.item_rows(session, [item_id])
    if not rows:
        return []  # deleted since the page was read
    facts = load_facts(session, readers, queues, rows)[0]
    memberships = repository.memberships_of_items(session, [item_id])
    entries = []
    for change in plan(queues, facts, memberships):
        if change.kind is ChangeKind.ADD:
            if repository.add_member(session, change.queue.id, item_id, RULE_ACTOR):
                entries.append(_added(session, change.queue, facts, RULE_ACTOR, SYSTEM_ACTOR))
        elif repository.prune_member(session, change.queue.id, item_id):
            entries.append(_removed(change.queue, facts, SYSTEM_ACTOR, "no longer matches"))
    return entries


# -- manual changes -------------------------------------------------------------------


def add_by_hand(
    session: Session, readers: DetailReaders, queue: QueueRow, item_id: uuid.UUID, caller: str
) -> AuditEntry | None:
    """Add the item for `caller`; None when it already was a member."""
    locked = _lock_for_hand(session, queue, item_id)
    facts = load_facts(session, readers, locked, repository.item_rows(session, [item_id]))[0]
    if not repository.add_member(session, queue.id, item_id, caller):
        return None
    return _added(session, queue, facts, caller, caller)


def remove_by_hand(
    session: Session, readers: DetailReaders, queue: QueueRow, item_id: uuid.UUID, caller: str
) -> AuditEntry | None:
    """Take the item out and leave the marker; None when it was not a member."""
    locked = _lock_for_hand(session, queue, item_id)
    facts = load_facts(session, readers, locked, repository.item_rows(session, [item_id]))[0]
    if not repository.remove_by_hand(
        session, queue.id, item_id, caller, fingerprint(queue.match, facts)
    ):
        return None
    return _removed(queue, facts, caller, "removed by hand")


def _lock_for_hand(session: Session, queue: QueueRow, item_id: uuid.UUID) -> list[QueueRow]:
    # Same order as the reconciler: queue row, then the item.
    locked = repository.lock_queues_shared(session, [queue.id])
    enqueue.lock_item(session, item_id)
    return locked or [queue]


# -- audit and outbox ---------------------------------------------------------------


def _added(
    session: Session, queue: QueueRow, facts: ItemFacts, added_by: str, actor: str
) -> AuditEntry:
    outbox.emit(
        session,
        "attention.added",
        item=None,
        data={
            "work_item_id": facts.id,
            "item_type": facts.item_type,
            "phase": facts.phase,
            "project": facts.project,
            "queue": queue.name,
            "added_by": added_by,
        },
    )
    return AuditEntry(
        event_type="attention_added",
        work_item_id=facts.id,
        item_type=facts.item_type,
        actor=actor,
        after={"queue": queue.name, "added_by": added_by},
        reason="matches the queue's rule" if added_by == RULE_ACTOR else "added by hand",
    )


def _removed(queue: QueueRow, facts: ItemFacts, actor: str, reason: str) -> AuditEntry:
    return AuditEntry(
        event_type="attention_removed",
        work_item_id=facts.id,
        item_type=facts.item_type,
        actor=actor,
        before={"queue": queue.name},
        reason=reason,
    )
