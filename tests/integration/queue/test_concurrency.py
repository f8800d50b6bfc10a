"""Guarantees that only show under contention: several managers, connections, leases."""

from __future__ import annotations

import threading
import time
from collections import Counter

import sqlalchemy as sa
from harness import dimension_rows, fast_config, item_row, running_manager, settled, wait_until
from sample_type import Behaviour, build_registry, create_item, create_items, executions
from sqlalchemy import event

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue import enqueue
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop

STEPS = ["s1", "s2", "s3"]


def test_two_managers_run_every_action_exactly_once(database_url, sessions, conninfo):
    """500 items x 3 actions shared by two managers with their own engines."""
    with sessions() as session:
        ids = create_items(session, 500, STEPS)
        session.commit()
    engines = [build_engine(database_url, pool_size=12) for _ in range(2)]
    # One Behaviour shared by both managers detects overlapping executions.
    behaviours = [Behaviour(worker_name=f"manager-{n}") for n in range(2)]
    shared_running: set = set()
    shared_overlaps: list = []
    lock = threading.Lock()
    for behaviour in behaviours:
        behaviour.running, behaviour.overlaps, behaviour.lock = (
            shared_running,
            shared_overlaps,
            lock,
        )
    config = fast_config(workers=6)
    try:
        with (
            running_manager(build_sessions(engines[0]), build_registry(behaviours[0]), config),
            running_manager(build_sessions(engines[1]), build_registry(behaviours[1]), config),
        ):
            wait_until(lambda: settled(sessions), timeout=120, what="all items to settle")
    finally:
        for engine in engines:
            engine.dispose()

    with sessions() as session:
        done = executions(session)
        statuses = session.execute(
            sa.text("SELECT status, count(*) FROM work_item_statuses GROUP BY status")
        ).all()
    per_action = Counter((item_id, variant) for item_id, variant, _ in done)
    assert len(per_action) == 500 * len(STEPS)
    assert set(per_action.values()) == {1}
    assert {item_id for item_id, _ in per_action} == set(ids)
    assert shared_overlaps == []
    assert dict(statuses) == {"false": 1500}
    # Both managers took part.
    assert {worker for _, _, worker in done} == {"manager-0", "manager-1"}
    # Within one item the steps ran in decision order.
    order: dict = {}
    for item_id, variant, _ in done:
        order.setdefault(item_id, []).append(variant)
    assert all(variants == STEPS for variants in order.values())


def test_a_worker_that_lost_its_lease_writes_nothing(sessions):
    """Fencing: the old holder's outcome is refused after another worker reclaimed the item."""
    block = threading.Event()
    behaviour = Behaviour(block=block)
    registry = build_registry(behaviour)
    config = fast_config()
    loop = ItemLoop(sessions=sessions, registry=registry, config=config, audit=AuditLog())
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        session.commit()
        (first,) = lease_repository.claim_due_items(
            session, item_types=["sample"], limit=1, lease_seconds=30
        )
        session.commit()

    outcome: list = []
    worker = threading.Thread(
        target=lambda: outcome.append(
            loop.run(first, should_stop=lambda: False, lease_lost=lambda: False)
        )
    )
    worker.start()
    assert behaviour.started.wait(10)
    # The lease expires (a stalled worker) and another worker claims the item.
    with sessions() as session:
        session.execute(sa.text("UPDATE work_items SET leased_until = now() - interval '1 second'"))
        session.commit()
        (second,) = lease_repository.claim_due_items(
            session, item_types=["sample"], limit=1, lease_seconds=30
        )
        session.commit()
    assert second.lease_token != first.lease_token
    block.set()
    worker.join(10)

    assert [result.outcome for result in outcome] == [ClaimOutcome.LOST]
    with sessions() as session:
        assert executions(session) == []
    assert dimension_rows(sessions, item_id)["a"].status == "true"
    row = item_row(sessions, item_id)
    assert row.lease_token == second.lease_token
    assert (row.actionable, row.attempts) == (True, 0)


def test_event_inserted_during_the_idle_decision_is_not_orphaned(sessions, engine):
    """DDR-34: an enqueuer holding the item lock while the loop decides to go idle."""
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour)) as manager:
        with sessions() as session:
            item_id = create_item(session, [])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="idle")

        inserter = build_sessions(engine)()
        try:
            # The enqueuer's transaction takes the item lock first ...
            enqueue.lock_item(inserter, item_id)
            with sessions() as session:
                session.execute(
                    sa.text("UPDATE work_items SET actionable = true WHERE id = :id"),
                    {"id": item_id},
                )
                session.commit()
            manager.notify(item_id)
            # ... the loop finds nothing to do and blocks on that lock to go idle ...
            wait_until(lambda: _lock_waiters(sessions) == 1, what="loop waiting for the lock")
            # ... the event lands and commits while it waits.
            enqueue.insert_pending_event(
                inserter,
                item_id=item_id,
                item_type="sample",
                event_type="poke",
                body={"steps": ["late"]},
            )
            inserter.commit()
        finally:
            inserter.close()
        wait_until(lambda: behaviour.calls[(item_id, "late")] == 1, what="late event handled")
        wait_until(lambda: settled(sessions), what="settle")
    assert dimension_rows(sessions, item_id)["late"].status == "false"


def test_events_racing_with_idle_decisions_never_strand(sessions, conninfo):
    """Many items going idle while events keep arriving from other connections."""
    behaviour = Behaviour()
    with running_manager(
        sessions, build_registry(behaviour), fast_config(workers=8), conninfo=conninfo
    ):
        with sessions() as session:
            ids = [create_item(session, []) for _ in range(40)]
            session.commit()

        def send(offset: int) -> None:
            for round_number in range(10):
                for index, item_id in enumerate(ids):
                    if index % 3 == offset:
                        with sessions() as session:
                            enqueue.insert_pending_event(
                                session,
                                item_id=item_id,
                                item_type="sample",
                                event_type="poke",
                                body={"steps": [f"r{round_number}"]},
                            )
                            session.commit()

        senders = [threading.Thread(target=send, args=(offset,)) for offset in range(3)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        wait_until(lambda: settled(sessions), timeout=60, what="settle")
    for item_id in ids:
        assert {f"r{n}" for n in range(10)} <= {
            variant
            for variant, row in dimension_rows(sessions, item_id).items()
            if row.status == "false"
        }


def test_notify_wakes_another_manager_without_a_sweep(sessions, conninfo, engine):
    behaviour = Behaviour()
    config = fast_config(safety_sweep_seconds=300)
    with running_manager(sessions, build_registry(behaviour), config, conninfo=conninfo) as mgr:
        wait_until(lambda: mgr.held_count == 0, what="startup")
        time.sleep(0.3)  # startup sweep done; the next one is 300 s away
        # Another replica (a separate engine, no in-process notify) enqueues.
        other = build_sessions(engine)
        with other() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        wait_until(lambda: behaviour.calls[(item_id, "a")] == 1, timeout=5, what="NOTIFY")


def test_idle_engine_sends_no_sql(sessions, engine, conninfo):
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    behaviour = Behaviour()
    config = fast_config(heartbeat_seconds=0.1, lease_seconds=1, safety_sweep_seconds=300)
    with running_manager(sessions, build_registry(behaviour), config, conninfo=conninfo) as mgr:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        mgr.notify(item_id)
        wait_until(lambda: settled(sessions), what="settle")
        time.sleep(0.3)
        statements.clear()
        time.sleep(1.5)
        assert statements == []


def _lock_waiters(sessions) -> int:
    with sessions() as session:
        return session.execute(
            sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        ).scalar_one()
