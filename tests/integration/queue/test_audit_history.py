"""The database history of the audit trail: what a step commits, what the API writes, retention.

A step's entries are stored in the step's own transaction (a rolled-back step
leaves none), entries written outside a transaction by the background writer;
a broken history table never breaks processing; credentials are never stored.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from harness import running_manager, wait_until
from sample_type import SAMPLE_TYPE, SampleItem, create_item, decide

from workqueue.queue.audit.history import REDACTED, AuditHistory
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.registry import TypeRegistry

RETENTION = timedelta(days=30)


def history_of(sessions, item_id: uuid.UUID | None) -> list[dict[str, Any]]:
    with sessions() as session:
        condition = "work_item_id IS NULL" if item_id is None else "work_item_id = :id"
        rows = session.execute(
            sa.text(f"SELECT * FROM audit_entries WHERE {condition} ORDER BY occurred_at, id"),
            {"id": item_id},
        )
        return [dict(row._mapping) for row in rows]


def flaky_registry(failures: list[int]) -> TypeRegistry:
    """A `step` that audits a side effect, then fails while `failures[0]` > 0."""

    def step(context: ExecutionContext) -> None:
        context.audit("side_effect_claimed", reason="the executor says it did something")
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)
        if failures[0] > 0:
            failures[0] -= 1
            raise RuntimeError("transient trouble after auditing")
        context.set_phase(Phase.COMPLETED, "done")

    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    return registry


def test_a_rolled_back_step_leaves_no_history_and_its_failure_is_recorded(sessions):
    history = AuditHistory(sessions, retention=RETENTION)
    audit = AuditLog(history=history)
    with sessions() as session:
        item_id = create_item(session, ["finish"])
        session.commit()
    with running_manager(sessions, flaky_registry([1]), audit=audit):
        wait_until(
            lambda: any(e["event_type"] == "phase_change" for e in history_of(sessions, item_id))
        )
        assert history.flush(10)
    entries = history_of(sessions, item_id)
    events = [entry["event_type"] for entry in entries]
    # One claimed side effect: the failed attempt's was rolled back with its step.
    assert events.count("side_effect_claimed") == 1
    outcomes = [e["after"]["outcome"] for e in entries if e["event_type"] == "action_outcome"]
    assert outcomes == ["failed", "succeeded"]
    audit.close()
    assert events[-2:] == ["phase_change", "action_outcome"]
    assert entries[-2]["after"] == {"phase": "completed"}
    assert all(entry["actor"] == "system" for entry in entries)


def test_step_entries_are_stored_without_the_background_writer(sessions):
    history = AuditHistory(sessions, retention=RETENTION)
    queued: list[AuditEntry] = []
    history.enqueue = queued.extend  # type: ignore[method-assign]
    with sessions() as session:
        item_id = create_item(session, ["finish"])
        session.commit()
    with running_manager(sessions, flaky_registry([0]), audit=AuditLog(history=history)):
        wait_until(lambda: len(history_of(sessions, item_id)) >= 4)
    events = [entry["event_type"] for entry in history_of(sessions, item_id)]
    assert events == ["side_effect_claimed", "dimension_change", "phase_change", "action_outcome"]
    assert queued == []


def test_entries_written_outside_a_transaction_are_stored_by_the_writer(sessions):
    history = AuditHistory(sessions, retention=RETENTION)
    audit = AuditLog(history=history)
    item_id = uuid.uuid4()
    audit.write(AuditEntry("item_submitted", work_item_id=item_id, item_type="mr", actor="ada"))
    audit.write(AuditEntry("authorization_denied", item_type="mr", actor="mallory", reason="no"))
    assert history.flush(10)
    [submitted] = history_of(sessions, item_id)
    assert (submitted["event_type"], submitted["actor"]) == ("item_submitted", "ada")
    denied = [e for e in history_of(sessions, None) if e["actor"] == "mallory"]
    assert [e["event_type"] for e in denied] == ["authorization_denied"]
    audit.close()
    assert "audit-history" not in {thread.name for thread in threading.enumerate()}


def test_credentials_and_unstorable_values_are_cleaned(sessions):
    history = AuditHistory(sessions, retention=RETENTION)
    item_id = uuid.uuid4()
    entry = AuditEntry(
        "item_observed",
        work_item_id=item_id,
        reason="a\x00b",
        details={
            "token": "glpat-secret",
            "nested": {"Authorization": "Bearer abc", "kept": [1, "x\x00y"]},
            "private_token": "p",
            "when": datetime(2026, 1, 2, tzinfo=UTC),
            "ratio": float("nan"),
            "id": uuid.UUID(int=7),
        },
    )
    with sessions() as session:
        assert history.store_in(session, [entry])
        session.commit()
    [row] = history_of(sessions, item_id)
    assert row["reason"] == "a\ufffdb"
    assert row["details"] == {
        "token": REDACTED,
        "nested": {"Authorization": REDACTED, "kept": [1, "x\ufffdy"]},
        "private_token": REDACTED,
        "when": "2026-01-02T00:00:00+00:00",
        "ratio": "nan",
        "id": str(uuid.UUID(int=7)),
    }
    assert "glpat-secret" not in repr(row)


def test_a_broken_history_table_never_breaks_processing(sessions, engine, caplog):
    with engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE audit_entries"))
    history = AuditHistory(sessions, retention=RETENTION)
    audit = AuditLog(history=history)
    with sessions() as session:
        item_id = create_item(session, ["finish"])
        session.commit()
    with (
        caplog.at_level(logging.ERROR, logger="workqueue.audit"),
        running_manager(sessions, flaky_registry([0]), audit=audit),
    ):

        def completed() -> bool:
            with sessions() as session:
                return session.get(SampleItem, item_id).phase == Phase.COMPLETED

        wait_until(completed, what="the item completed without its history")
        audit.write(AuditEntry("item_cancelled", work_item_id=item_id))
        history.flush(10)
    audit.close()  # its writer thread would outlive the test (and fail one that counts them)
    assert any("could not store" in record.getMessage() for record in caplog.records)


def test_retention_prunes_old_entries_at_most_once_per_interval(sessions):
    history = AuditHistory(sessions, retention=RETENTION)
    item_id = uuid.uuid4()
    now = datetime.now(UTC)
    old = AuditEntry("old", work_item_id=item_id, timestamp=now - timedelta(days=31))
    recent = AuditEntry("recent", work_item_id=item_id, timestamp=now - timedelta(days=29))
    with sessions() as session:
        history.store_in(session, [old, recent])
        session.commit()
        history.prune_if_due(session)
        session.commit()
    assert [e["event_type"] for e in history_of(sessions, item_id)] == ["recent"]
    older = AuditEntry("older", work_item_id=item_id, timestamp=now - timedelta(days=40))
    with sessions() as session:
        history.store_in(session, [older])
        history.prune_if_due(session)  # pruned a moment ago: not yet again
        session.commit()
    assert [e["event_type"] for e in history_of(sessions, item_id)] == ["older", "recent"]


def test_the_safety_sweep_prunes_the_history(sessions):
    history = AuditHistory(sessions, retention=timedelta(days=1))
    item_id = uuid.uuid4()
    stale = AuditEntry(
        "stale", work_item_id=item_id, timestamp=datetime.now(UTC) - timedelta(days=2)
    )
    with sessions() as session:
        history.store_in(session, [stale])
        session.commit()
    with running_manager(sessions, flaky_registry([0]), audit=AuditLog(history=history)):
        wait_until(lambda: history_of(sessions, item_id) == [], what="the sweep's prune")
