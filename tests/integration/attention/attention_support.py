"""Helpers for the attention tests: items written straight into the tables, a reconciler."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from workqueue.attention.config import AttentionConfig, QueueRule
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.queue.registry import TypeRegistry
from workqueue.types.mr.models import MRWorkItem


class FakeClock:
    def __init__(self) -> None:
        self.value = 1000.0

    def now(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += seconds


def mr_registry() -> TypeRegistry:
    registry = TypeRegistry()
    registry.register("mr", model=MRWorkItem, decider=lambda _item, _dimensions: None)
    return registry


def default_rules() -> list[QueueRule]:
    return AttentionConfig().queues


def create_mr(
    session: Session,
    project: str | None,
    *,
    phase: str = "active",
    blocker: str | None = None,
    item_id: uuid.UUID | None = None,
) -> uuid.UUID:
    item_id = item_id or uuid.uuid4()
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, phase, caller_identity, project_path) "
            "VALUES (:id, 'mr', :phase, 'tests', :project)"
        ),
        {"id": item_id, "phase": phase, "project": project},
    )
    session.execute(
        sa.text(
            "INSERT INTO mr_details (id, project, source_branch, title, commit_message, "
            "  file_actions, content_hash, merge_blocker) "
            "VALUES (:id, :project, :branch, 't', 'm', '[]', 'h', CAST(:blocker AS jsonb))"
        ),
        {
            "id": item_id,
            "project": project or "none",
            "branch": f"workqueue/{item_id}",
            "blocker": None if blocker is None else json.dumps({"code": blocker, "message": ""}),
        },
    )
    return item_id


def set_phase(session: Session, item_id: uuid.UUID, phase: str) -> None:
    session.execute(
        sa.text("UPDATE work_items SET phase = :phase WHERE id = :id"),
        {"phase": phase, "id": item_id},
    )


def set_blocker(session: Session, item_id: uuid.UUID, blocker: str | None) -> None:
    session.execute(
        sa.text("UPDATE mr_details SET merge_blocker = CAST(:blocker AS jsonb) WHERE id = :id"),
        {"id": item_id, "blocker": None if blocker is None else json.dumps({"code": blocker})},
    )


def members(sessions: sessionmaker[Session], queue: str) -> set[uuid.UUID]:
    with sessions() as session:
        return set(
            session.scalars(
                sa.text(
                    "SELECT m.work_item_id FROM attention_memberships m "
                    "JOIN attention_queues q ON q.id = m.queue_id "
                    "WHERE q.name = :name AND m.removed_at IS NULL"
                ),
                {"name": queue},
            )
        )


def reconciler(
    sessions: sessionmaker[Session], rules: list[QueueRule] | None = None, **options: Any
) -> AttentionReconciler:
    return AttentionReconciler(
        sessions=sessions,
        registry=mr_registry(),
        rules=default_rules() if rules is None else rules,
        **options,
    )


def drain(attention: AttentionReconciler, clock: FakeClock, *, limit: int = 200) -> int:
    """Run passes in simulated time until nothing is pending; returns the passes run."""
    passes = 0
    for _ in range(limit):
        if not attention.board.pending():
            return passes
        passes += attention.run_due()
        due = attention.board.next_due_at()
        if due is not None and due > clock.now():
            clock.advance(due - clock.now())
    raise AssertionError(f"still pending after {limit} rounds: {attention.board.pending()}")


def wait_until(check: Callable[[], bool], *, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
