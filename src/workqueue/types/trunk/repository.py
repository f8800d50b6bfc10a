"""SQL of the `trunk` type: the queue rows and the state transitions of heads.

Lock order, everywhere: the head's own detail row, then its queue row, then
other heads (woken with an event, which never waits for their steps). Ingest
locks only the queue row. Keeping one order means two writers never wait on each other
in a cycle.

Every transition of a head is a conditional UPDATE on its current state, so
when a step and a person's cancel race, exactly one of them moves it, and the
slot bound to that transition is released exactly once.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from workqueue.queue import Phase, WorkItem, enqueue
from workqueue.types.trunk.config import TrunkQueueConfig
from workqueue.types.trunk.models import (
    TRUNK_ITEM_TYPE,
    BuildStrategy,
    TrunkQueue,
    TrunkState,
    TrunkWorkItem,
)

# -- queue rows ------------------------------------------------------------------------


def ensure_queue(session: Session, queue: TrunkQueueConfig) -> None:
    """Create the queue's row on its first head (the seed's get-or-create)."""
    session.execute(
        sa.text(
            "INSERT INTO trunk_queues (name, project, branch) VALUES (:name, :project, :branch) "
            "ON CONFLICT (name) DO NOTHING"
        ),
        {"name": queue.name, "project": queue.project, "branch": queue.branch},
    )


def lock_queue(session: Session, name: str) -> TrunkQueue:
    """The queue row, locked until commit (ingest: sequence numbers stay dense)."""
    return session.scalars(
        sa.select(TrunkQueue)
        .where(TrunkQueue.name == name)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()


def read_queue(session: Session, name: str) -> TrunkQueue | None:
    """The queue row as committed now (re-read on every call, never cached)."""
    return session.scalars(
        sa.select(TrunkQueue)
        .where(TrunkQueue.name == name)
        .execution_options(populate_existing=True)
    ).one_or_none()


def queue_rows(session: Session, names: Collection[str]) -> dict[str, TrunkQueue]:
    rows = session.scalars(sa.select(TrunkQueue).where(TrunkQueue.name.in_(list(names))))
    return {row.name: row for row in rows}


def take_slot(session: Session, name: str, *, version: int, rewrite: bool) -> bool:
    """Compare-and-set: one more build in flight, if the row is still at `version`.

    False when another writer changed the admission state since it was read
    (a slot taken or freed, last green moved): the caller reads again.
    """
    row = session.execute(
        sa.text(
            "UPDATE trunk_queues SET in_flight = in_flight + 1, version = version + 1, "
            "  serial_until_green = serial_until_green OR :rewrite, updated_at = now() "
            "WHERE name = :name AND version = :version RETURNING name"
        ),
        {"name": name, "version": version, "rewrite": rewrite},
    ).first()
    return row is not None


def release_slot(
    session: Session,
    name: str,
    *,
    green: TrunkWorkItem | None = None,
) -> bool:
    """One build fewer in flight; with `green`, last green moves to it if it is newer.

    Returns whether last green moved. Never backwards: only a higher sequence
    than the one that set it replaces it (speculative rule 2). A full build
    that becomes last green ends the one-at-a-time mode of a rewrite (rule 4).
    """
    seen = session.execute(
        sa.text("SELECT last_green_sequence FROM trunk_queues WHERE name = :name FOR UPDATE"),
        {"name": name},
    ).scalar_one()
    advance = green is not None and (seen is None or int(seen) < green.sequence)
    session.execute(
        sa.text(
            "UPDATE trunk_queues SET in_flight = in_flight - 1, version = version + 1, "
            "  updated_at = now(), "
            "  last_green_sha = CASE WHEN :advance THEN :sha ELSE last_green_sha END, "
            "  last_green_sequence = CASE WHEN :advance THEN :sequence "
            "                        ELSE last_green_sequence END, "
            "  last_green_item_id = CASE WHEN :advance THEN :item_id "
            "                       ELSE last_green_item_id END, "
            "  serial_until_green = CASE WHEN :advance AND :full THEN false "
            "                       ELSE serial_until_green END "
            "WHERE name = :name"
        ),
        {
            "name": name,
            "advance": advance,
            "sha": None if green is None else green.sha,
            "sequence": None if green is None else green.sequence,
            "item_id": None if green is None else green.id,
            "full": green is not None and green.build_strategy is BuildStrategy.FULL,
        },
    )
    return advance


# -- heads -----------------------------------------------------------------------------


def find_head(session: Session, queue: str, sha: str) -> TrunkWorkItem | None:
    return session.scalars(
        sa.select(TrunkWorkItem)
        .where(TrunkWorkItem.queue == queue, TrunkWorkItem.sha == sha)
        .execution_options(populate_existing=True)
    ).one_or_none()


def lock_state(session: Session, item: TrunkWorkItem) -> TrunkState:
    """Lock the head's detail row and return its state as committed now."""
    state = session.execute(
        sa.text("SELECT state FROM trunk_details WHERE id = :id FOR UPDATE"), {"id": item.id}
    ).scalar_one()
    current = TrunkState(state)
    set_committed_value(item, "state", current)
    return current


def move_state(
    session: Session, item: TrunkWorkItem, *, from_states: Collection[TrunkState], to: TrunkState
) -> TrunkState | None:
    """Move the head to `to` if it is in one of `from_states`; returns the state it left.

    None when it was elsewhere (someone else moved it first): then nothing changed.
    """
    current = lock_state(session, item)
    if current not in from_states:
        return None
    session.execute(
        sa.text("UPDATE trunk_details SET state = :to WHERE id = :id"),
        {"id": item.id, "to": to.value},
    )
    set_committed_value(item, "state", to)
    return current


def record_admission(
    session: Session,
    item: TrunkWorkItem,
    *,
    strategy: BuildStrategy,
    base_sha: str | None,
    now: datetime,
) -> None:
    """accepted → processing with the strategy and base, fixed from now on."""
    session.execute(
        sa.text(
            "UPDATE trunk_details SET state = 'processing', build_strategy = :strategy, "
            "  base_sha = :base, admitted_at = :now WHERE id = :id"
        ),
        {"id": item.id, "strategy": strategy.value, "base": base_sha, "now": now},
    )
    set_committed_value(item, "state", TrunkState.PROCESSING)
    set_committed_value(item, "build_strategy", strategy)
    set_committed_value(item, "base_sha", base_sha)
    set_committed_value(item, "admitted_at", now)


def pipelines_recorded(session: Session, pipeline_ids: Collection[int]) -> set[int]:
    """Which of these pipelines some head already owns."""
    if not pipeline_ids:
        return set()
    rows = session.scalars(
        sa.select(TrunkWorkItem.pipeline_id).where(
            TrunkWorkItem.pipeline_id.in_(list(pipeline_ids))
        )
    )
    return {int(row) for row in rows if row is not None}


WAKE_EVENT = "trunk.look_again"
"""The event one head leaves for another: "the queue changed, decide again now"."""


def wake_waiting_heads(
    session: Session, queue: str, newest: int, *, cause: uuid.UUID
) -> list[uuid.UUID]:
    """Wake the `newest` accepted heads of the queue now that a slot is free.

    Their gate deferral is cut short; older accepted heads supersede
    themselves at their own re-check (or when ingest wakes them).
    """
    ids = list(
        session.scalars(
            sa.select(TrunkWorkItem.id)
            .where(
                TrunkWorkItem.queue == queue,
                TrunkWorkItem.state == TrunkState.ACCEPTED,
                TrunkWorkItem.phase == Phase.ACTIVE,
            )
            .order_by(TrunkWorkItem.sequence.desc())
            .limit(newest)
        )
    )
    wake_heads(session, ids, cause=cause)
    return ids


def wake_head_at(session: Session, queue: str, sequence: int, *, cause: uuid.UUID) -> None:
    """Wake the head of this sequence if it still waits (it has just been outnumbered)."""
    ids = list(
        session.scalars(
            sa.select(TrunkWorkItem.id).where(
                TrunkWorkItem.queue == queue,
                TrunkWorkItem.sequence == sequence,
                TrunkWorkItem.state == TrunkState.ACCEPTED,
                TrunkWorkItem.phase == Phase.ACTIVE,
            )
        )
    )
    wake_heads(session, ids, cause=cause)


def wake_heads(session: Session, ids: Collection[uuid.UUID], *, cause: uuid.UUID) -> None:
    """An event for each head: the engine's way to give another item work safely.

    An event never waits for a running step of that head, nor takes its row and
    advisory locks in the order opposite to the step's end (`mark_actionable`
    would, and deadlock with a head finishing its own step).
    """
    for item_id in sorted(ids, key=enqueue.advisory_lock_key):
        enqueue.insert_pending_event(
            session,
            item_id=item_id,
            item_type=TRUNK_ITEM_TYPE,
            event_type=WAKE_EVENT,
            body={"cause": str(cause)},
            dedupe_key=f"{WAKE_EVENT}:{cause}:{item_id}",
        )


def processing_count(session: Session, queue: str) -> int:
    """Heads of the queue holding a slot (the truth in_flight caches)."""
    return int(
        session.execute(
            sa.select(sa.func.count())
            .select_from(TrunkWorkItem)
            .where(TrunkWorkItem.queue == queue, TrunkWorkItem.state == TrunkState.PROCESSING)
        ).scalar_one()
    )


# -- resolvers -------------------------------------------------------------------------

_BY_PIPELINE_SQL = sa.text(
    "SELECT detail.id FROM trunk_details AS detail "
    "JOIN work_items AS item ON item.id = detail.id "
    "WHERE item.phase = 'active' AND detail.state = 'processing' AND ("
    "  detail.pipeline_id = :pipeline_id"
    "  OR (detail.pipeline_id IS NULL AND detail.id = :item_id)"
    ") ORDER BY detail.id"
)


def active_heads_for_pipeline(
    session: Session, pipeline_id: int | None, item_id: uuid.UUID | None
) -> list[uuid.UUID]:
    """Processing heads owning this pipeline, or the one it was triggered for (by its
    WORKQUEUE_TRUNK_REQUEST variable) while its pipeline is not recorded yet."""
    if pipeline_id is None and item_id is None:
        return []
    rows = session.execute(_BY_PIPELINE_SQL, {"pipeline_id": pipeline_id, "item_id": item_id})
    return [row[0] for row in rows]


def item_row(session: Session, item_id: uuid.UUID) -> WorkItem | None:
    return session.get(WorkItem, item_id)
