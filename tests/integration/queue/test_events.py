"""Pending events: drained by the item's own loop and applied by the generic layer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import sqlalchemy as sa
from harness import dimension_rows, item_row, running_manager, settled, wait_until
from sample_type import Behaviour, build_registry, create_item

from workqueue.queue import enqueue
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.models import Phase


class RecordingAudit(AuditLog):
    def __init__(self) -> None:
        super().__init__()
        self.entries: list[AuditEntry] = []

    def write(self, entry: AuditEntry, *, stored: bool = False) -> None:
        del stored  # where the entry is kept does not matter here
        self.entries.append(entry)


def _insert_event(sessions, item_id, body, dedupe_key=None) -> bool:
    with sessions() as session:
        inserted = enqueue.insert_pending_event(
            session,
            item_id=item_id,
            item_type="sample",
            event_type="poke",
            body=body,
            dedupe_key=dedupe_key,
        )
        session.commit()
    return inserted


def _idle_item(sessions, manager) -> object:
    with sessions() as session:
        item_id = create_item(session, [])
        session.commit()
    manager.notify(item_id)
    wait_until(lambda: settled(sessions), what="the new item to go idle")
    return item_id


def test_event_sets_a_dimension_and_the_decider_acts_on_it(sessions, conninfo):
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour), conninfo=conninfo) as manager:
        item_id = _idle_item(sessions, manager)
        assert _insert_event(sessions, item_id, {"steps": ["x"]})
        # No in-process notify: the NOTIFY sent by the insert wakes the manager.
        wait_until(lambda: behaviour.calls[(item_id, "x")] == 1, what="the step")
        wait_until(lambda: settled(sessions), what="settle")
    assert dimension_rows(sessions, item_id)["x"].status == "false"


def test_duplicate_delivery_is_stored_once(sessions):
    with sessions() as session:
        item_id = create_item(session, [], notify=False)
        session.commit()
    assert _insert_event(sessions, item_id, {"steps": ["x"]}, dedupe_key="delivery-1")
    assert not _insert_event(sessions, item_id, {"steps": ["x"]}, dedupe_key="delivery-1")
    with sessions() as session:
        count = session.execute(sa.text("SELECT count(*) FROM pending_events")).scalar_one()
    assert count == 1


def test_event_phase_change_and_stale_event_only_applies_dimensions(sessions):
    audit = RecordingAudit()
    behaviour = Behaviour()
    now = datetime.now(UTC)
    with running_manager(sessions, build_registry(behaviour), audit=audit) as manager:
        item_id = _idle_item(sessions, manager)
        _insert_event(sessions, item_id, {"at": now.isoformat(), "steps": []})
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="first event")
        assert item_row(sessions, item_id).last_event_at == now

        # Older than the last applied event: the phase part must not apply,
        # the dimension part must.
        older = (now - timedelta(minutes=5)).isoformat()
        _insert_event(sessions, item_id, {"at": older, "phase": "cancelled", "steps": ["y"]})
        manager.notify(item_id)
        wait_until(lambda: behaviour.calls[(item_id, "y")] == 1, what="dimension from stale")
        wait_until(lambda: settled(sessions), what="settle")
    row = item_row(sessions, item_id)
    assert row.phase == Phase.ACTIVE
    assert row.last_event_at == now
    assert any(entry.event_type == "event_stale" for entry in audit.entries)


def test_newer_event_moves_the_phase_and_terminal_items_ignore_later_events(sessions):
    audit = RecordingAudit()
    behaviour = Behaviour()
    now = datetime.now(UTC)
    with running_manager(sessions, build_registry(behaviour), audit=audit) as manager:
        item_id = _idle_item(sessions, manager)
        _insert_event(sessions, item_id, {"at": now.isoformat(), "phase": "cancelled"})
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="cancel event")
        assert item_row(sessions, item_id).phase == Phase.CANCELLED

        later = (now + timedelta(minutes=1)).isoformat()
        _insert_event(sessions, item_id, {"at": later, "phase": "active", "steps": ["z"]})
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="ignored event consumed")
    row = item_row(sessions, item_id)
    assert row.phase == Phase.CANCELLED
    assert row.last_event_at == now
    assert "z" not in dimension_rows(sessions, item_id)
    assert behaviour.calls[(item_id, "z")] == 0
    phase_changes = [e for e in audit.entries if e.event_type == "phase_change"]
    assert [(e.before, e.after) for e in phase_changes] == [
        ({"phase": "active"}, {"phase": "cancelled"})
    ]
    assert any(e.event_type == "event_ignored" for e in audit.entries)


def test_irrelevant_event_is_consumed_without_changes(sessions):
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour)) as manager:
        item_id = _idle_item(sessions, manager)
        before = item_row(sessions, item_id)
        _insert_event(sessions, item_id, {"irrelevant": True})
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="consumed")
    after = item_row(sessions, item_id)
    assert (after.phase, after.last_event_at) == (before.phase, before.last_event_at)
    assert dimension_rows(sessions, item_id) == {}


def test_events_left_by_a_stopped_service_are_recovered_by_the_startup_sweep(sessions):
    behaviour = Behaviour()
    with sessions() as session:
        item_id = create_item(session, [], notify=False)
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.execute(
            sa.text(
                "INSERT INTO pending_events (work_item_id, event_type, body) "
                "VALUES (:id, 'poke', '{\"steps\": [\"r\"]}')"
            ),
            {"id": item_id},
        )
        session.commit()
    with running_manager(sessions, build_registry(behaviour)):
        wait_until(lambda: behaviour.calls[(item_id, "r")] == 1, what="recovered event")
        wait_until(lambda: settled(sessions), what="settle")


def test_many_events_in_one_statement_keep_order_dedupe_and_wake_each_idle_item_once(
    sessions, conninfo
):
    """`insert_pending_events`: an item's events keep the order given, a key stored before
    or repeated in the batch is skipped, idle items become actionable and each woken item
    is announced once; an item whose row a running step holds is not waited for."""
    with sessions() as session:
        idle, other, running = (create_item(session, [], notify=False) for _ in range(3))
        session.execute(
            sa.text("UPDATE work_items SET actionable = false WHERE id <> :id"), {"id": running}
        )
        session.commit()
    assert _insert_event(sessions, other, {"n": 0}, dedupe_key="k-0")
    with sessions() as session:
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.execute(
            sa.text("UPDATE work_items SET actionable = true WHERE id = :id"), {"id": running}
        )
        session.commit()

    def event(item_id, n, key):
        return enqueue.NewPendingEvent(item_id, "sample", "poke", f'{{"n": {n}}}', key)

    batch = [
        event(idle, 1, "k-1"),
        event(other, 2, "k-0"),  # stored before
        event(idle, 3, "k-3"),
        event(idle, 4, "k-3"),  # repeated in the batch
        event(idle, 5, None),
        event(running, 6, "k-6"),
    ]
    with psycopg.connect(conninfo, autocommit=True) as listener, sessions() as holder:
        listener.execute(f"LISTEN {enqueue.WAKE_CHANNEL}")
        # A running step holds its item's row (its actionable is already true).
        holder.execute(
            sa.text("SELECT 1 FROM work_items WHERE id = :id FOR NO KEY UPDATE"), {"id": running}
        )
        with sessions() as session:
            session.execute(sa.text("SET LOCAL lock_timeout = '2s'"))  # a wait fails the test
            ordered = sorted(batch, key=lambda e: enqueue.advisory_lock_key(e.item_id))
            stored = enqueue.insert_pending_events(session, ordered)
            session.commit()
        holder.rollback()
        announced = sorted(n.payload for n in listener.notifies(timeout=1, stop_after=10))

    assert stored == {idle, running}
    assert announced == sorted(f"sample:{item_id}" for item_id in (idle, running))
    with sessions() as session:
        rows = session.execute(
            sa.text("SELECT work_item_id, body FROM pending_events ORDER BY id")
        ).all()
        actionable = set(
            session.execute(sa.text("SELECT id FROM work_items WHERE actionable")).scalars()
        )
    assert [body["n"] for item_id, body in rows if item_id == idle] == [1, 3, 5]
    assert [body["n"] for item_id, body in rows if item_id == other] == [0]
    assert [body["n"] for item_id, body in rows if item_id == running] == [6]
    assert actionable == {idle, running}


def test_many_events_with_large_bodies_are_stored_in_parts_in_order(sessions, monkeypatch):
    """Bodies are sent at most `PENDING_EVENT_BODIES_PER_STATEMENT` characters per
    statement (a batch of large hooks that each concern many items once became one
    message over PostgreSQL's 1 GB limit, which closes the connection, and the intake
    retried that batch forever): every event is stored, each item's in order."""
    monkeypatch.setattr(enqueue, "PENDING_EVENT_BODIES_PER_STATEMENT", 250)
    with sessions() as session:
        items = sorted(
            (create_item(session, [], notify=False) for _ in range(3)),
            key=enqueue.advisory_lock_key,
        )
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.commit()
    pad = "x" * 90
    batch = [
        enqueue.NewPendingEvent(item_id, "sample", "poke", f'{{"n": {n}, "pad": "{pad}"}}', None)
        for item_id in items
        for n in range(5)
    ]
    statements = []
    real_execute = psycopg.Connection.execute
    own: list[object] = []

    def counted(connection, query, *args, **kwargs):
        if connection in own:  # other threads (the database pool's) share the class
            statements.append(query)
        return real_execute(connection, query, *args, **kwargs)

    with sessions() as session:
        own.append(session.connection().connection.driver_connection)
        monkeypatch.setattr(psycopg.Connection, "execute", counted)
        stored = enqueue.insert_pending_events(session, batch)
        monkeypatch.undo()
        session.commit()

    assert stored == set(items)
    assert len(statements) == 1 + 15 // 2 + 1  # the locks, then two bodies per part (one left)
    with sessions() as session:
        rows = session.execute(
            sa.text("SELECT work_item_id, body FROM pending_events ORDER BY id")
        ).all()
    for item_id in items:
        assert [body["n"] for owner, body in rows if owner == item_id] == list(range(5))


def test_events_setting_a_dimension_to_what_it_holds_leave_no_dimension_change(sessions):
    """Two pipeline-like events in one step both ask for step "x": the second changes
    nothing and is not audited as a change (it was: one entry per event)."""
    audit = RecordingAudit()
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour), audit=audit) as manager:
        item_id = _idle_item(sessions, manager)
        assert _insert_event(sessions, item_id, {"steps": ["x"]})
        assert _insert_event(sessions, item_id, {"steps": ["x"]})
        manager.notify(item_id)
        wait_until(lambda: behaviour.calls[(item_id, "x")] == 1, what="the step")
        wait_until(lambda: settled(sessions), what="settle")
    changes = [
        (entry.before, entry.after["status"])
        for entry in audit.entries
        if entry.event_type == "dimension_change"
        and entry.work_item_id == item_id
        and (entry.after["dimension"], entry.after["variant"]) == ("needs_step", "x")
    ]
    applied = [
        e for e in audit.entries if e.event_type == "event_applied" and e.work_item_id == item_id
    ]
    assert len(applied) == 2
    assert changes == [(None, "true"), ({"status": "true", "pending_until": None}, "false")]
    assert behaviour.calls[(item_id, "x")] == 1
