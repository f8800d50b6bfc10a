"""A small item type used only by the engine tests (and their child processes).

An item has `needs_step` dimension rows, one per variant; the decider asks for
the first variant that still needs a step; the `step` executor logs the
execution in `sample_executions` (inside the step's transaction, so only
committed executions are visible) and sets the variant to "false".
`Behaviour` makes the executor slow, fail, fail permanently, defer or block.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from workqueue.queue import enqueue
from workqueue.queue.contract import Action, EventContext, EventResult, ExecutionContext
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.errors import PermanentError
from workqueue.queue.models import DimensionStatus, Phase, WorkItem
from workqueue.queue.registry import TypeRegistry

SAMPLE_TYPE = "sample"


class SampleItem(WorkItem):
    """No detail table: single-table inheritance keeps the schema untouched."""

    __mapper_args__ = {"polymorphic_identity": SAMPLE_TYPE}


class OtherItem(WorkItem):
    """A second type, for handled_types filtering."""

    __mapper_args__ = {"polymorphic_identity": "other"}


@dataclass
class Behaviour:
    sleep_seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)  # variant -> failures left
    permanent: set[str] = field(default_factory=set)
    retry_after: float | None = None  # failures carry it, like a server's Retry-After
    defer_once: dict[str, float] = field(default_factory=dict)  # variant -> seconds
    block: threading.Event | None = None  # wait on it before finishing
    started: threading.Event = field(default_factory=threading.Event)
    worker_name: str = "main"
    running: set[uuid.UUID] = field(default_factory=set)
    overlaps: list[uuid.UUID] = field(default_factory=list)
    calls: dict[tuple[uuid.UUID, str], int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)


def decide(item: Any, dimensions: Dimensions) -> Action | None:
    variants = dimensions.variants_needing("needs_step")
    return Action("step", variants[0]) if variants else None


def make_step_executor(behaviour: Behaviour) -> Any:
    def step(context: ExecutionContext) -> None:
        item_id, variant = context.item.id, context.action.variant
        with behaviour.lock:
            if item_id in behaviour.running:
                behaviour.overlaps.append(item_id)
            behaviour.running.add(item_id)
            behaviour.calls[(item_id, variant)] += 1
        behaviour.started.set()
        try:
            if behaviour.block is not None:
                behaviour.block.wait(60)
            if behaviour.sleep_seconds:
                time.sleep(behaviour.sleep_seconds)
            if variant in behaviour.permanent:
                raise PermanentError(f"refused: step {variant} can never work")
            with behaviour.lock:
                left = behaviour.failures.get(variant, 0)
                if left:
                    behaviour.failures[variant] = left - 1
            if left:
                trouble = RuntimeError(f"transient trouble in step {variant}")
                trouble.retry_after = behaviour.retry_after  # type: ignore[attr-defined]
                raise trouble
            if variant in behaviour.defer_once:
                delay = behaviour.defer_once.pop(variant)
                context.defer("needs_step", timedelta(seconds=delay), variant=variant)
                return
            context.session.execute(
                sa.text(
                    "INSERT INTO sample_executions (work_item_id, variant, worker) "
                    "VALUES (:id, :variant, :worker)"
                ),
                {"id": item_id, "variant": variant, "worker": behaviour.worker_name},
            )
            context.set_dimension("needs_step", DimensionStatus.FALSE, variant=variant)
            if variant == "finish":
                context.set_phase(Phase.COMPLETED, "all steps done")
        finally:
            with behaviour.lock:
                behaviour.running.discard(item_id)

    return step


def handle_poke(context: EventContext) -> EventResult | None:
    body = context.body
    if body.get("irrelevant"):
        return None
    at = datetime.fromisoformat(body["at"]) if "at" in body else None
    return EventResult(
        phase=Phase(body["phase"]) if "phase" in body else None,
        event_ts=at,
        dimensions=tuple(
            DimensionUpdate("needs_step", DimensionStatus.TRUE, variant=variant)
            for variant in body.get("steps", [])
        ),
        reason=body.get("reason"),
    )


def build_registry(behaviour: Behaviour) -> TypeRegistry:
    registry = TypeRegistry()
    sample = registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide)
    sample.add_executor("step", make_step_executor(behaviour))
    sample.add_event_handler("poke", handle_poke)
    registry.register("other", model=OtherItem, decider=decide).add_executor(
        "step", make_step_executor(behaviour)
    )
    return registry


def create_item(
    session: Session,
    steps: list[str],
    *,
    item_type: str = SAMPLE_TYPE,
    notify: bool = True,
) -> uuid.UUID:
    """Insert an actionable item needing `steps` (in that order of variant names)."""
    item_id = uuid.uuid4()
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, caller_identity, actionable) "
            "VALUES (:id, :item_type, 'tests', true)"
        ),
        {"id": item_id, "item_type": item_type},
    )
    for variant in steps:
        enqueue.upsert_dimension(
            session, item_id, DimensionUpdate("needs_step", DimensionStatus.TRUE, variant)
        )
    if notify:
        enqueue.notify_wake(session, item_type, item_id)
    return item_id


def create_items(session: Session, count: int, steps: list[str]) -> list[uuid.UUID]:
    """Bulk variant of `create_item` (no NOTIFY): for large runs found by the sweep."""
    ids = [uuid.uuid4() for _ in range(count)]
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, caller_identity, actionable) "
            "SELECT unnest(CAST(:ids AS uuid[])), 'sample', 'tests', true"
        ),
        {"ids": ids},
    )
    session.execute(
        sa.text(
            "INSERT INTO work_item_statuses (work_item_id, dimension, variant, status) "
            "SELECT id, 'needs_step', variant, 'true' "
            "FROM unnest(CAST(:ids AS uuid[])) AS id, unnest(CAST(:steps AS text[])) AS variant"
        ),
        {"ids": ids, "steps": steps},
    )
    return ids


def create_support_tables(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "CREATE TABLE sample_executions ("
                " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " work_item_id uuid NOT NULL, variant text NOT NULL, worker text NOT NULL,"
                " executed_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        )


def executions(session: Session) -> list[tuple[uuid.UUID, str, str]]:
    rows = session.execute(
        sa.text("SELECT work_item_id, variant, worker FROM sample_executions ORDER BY id")
    ).all()
    return [(row[0], row[1], row[2]) for row in rows]
