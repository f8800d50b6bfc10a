"""Leases over time: heartbeats, the per-claim deadline, and graceful shutdown."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, settled, wait_until
from sample_type import Behaviour, build_registry, create_item, executions

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.queue.processing.manager import ProcessingManager


def test_heartbeat_keeps_a_long_action_from_being_taken_over(database_url, sessions):
    """An action three times longer than the lease runs once, though a second manager waits."""
    behaviour = Behaviour(sleep_seconds=2.5)
    config = fast_config(lease_seconds=0.9, heartbeat_seconds=0.3)
    other_engine = build_engine(database_url, pool_size=6)
    try:
        with (
            running_manager(sessions, build_registry(behaviour), config) as first,
            running_manager(build_sessions(other_engine), build_registry(behaviour), config),
        ):
            with sessions() as session:
                item_id = create_item(session, ["slow"])
                session.commit()
            first.notify(item_id)
            wait_until(lambda: settled(sessions), timeout=30, what="the slow action")
    finally:
        other_engine.dispose()
    assert behaviour.calls[(item_id, "slow")] == 1
    assert behaviour.overlaps == []
    with sessions() as session:
        assert len(executions(session)) == 1


def test_deadline_releases_the_claim_between_steps(sessions):
    behaviour = Behaviour(sleep_seconds=0.1)
    loop = ItemLoop(
        sessions=sessions,
        registry=build_registry(behaviour),
        config=fast_config(item_deadline_seconds=0.25),
        audit=AuditLog(),
    )
    with sessions() as session:
        item_id = create_item(session, [f"s{n}" for n in range(10)], notify=False)
        session.commit()
        (claim,) = lease_repository.claim_due_items(
            session, item_types=["sample"], limit=1, lease_seconds=30
        )
        session.commit()
    result = loop.run(claim, should_stop=lambda: False, lease_lost=lambda: False)
    assert result.outcome is ClaimOutcome.RELEASED
    done = sum(behaviour.calls.values())
    assert 2 <= done <= 4  # stopped between steps, not mid-action
    row = item_row(sessions, item_id)
    assert (row.actionable, row.lease_token, row.leased_until) == (True, None, None)


def test_manager_requeues_an_item_that_ran_out_of_time(sessions):
    behaviour = Behaviour(sleep_seconds=0.05)
    config = fast_config(item_deadline_seconds=0.2, workers=2)
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        with sessions() as session:
            item_id = create_item(session, [f"s{n:02}" for n in range(20)])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), timeout=30, what="all steps")
    assert sum(behaviour.calls.values()) == 20
    with sessions() as session:
        assert [variant for _, variant, _ in executions(session)] == [f"s{n:02}" for n in range(20)]


def test_stop_lets_the_running_action_finish_and_releases_the_rest(sessions):
    block = threading.Event()
    behaviour = Behaviour(block=block)
    manager = ProcessingManager(
        sessions=sessions,
        registry=build_registry(behaviour),
        config=fast_config(workers=1),
        handled_types=["sample"],
    )
    # Two transactions: claims take the longest-waiting first (updated_at),
    # and items created together would tie, leaving the order to the plan.
    with sessions() as session:
        first = create_item(session, ["a", "b"])
        session.commit()
    with sessions() as session:
        queued = create_item(session, ["a"])
        session.commit()
    manager.start()
    manager.notify(first)
    manager.notify(queued)
    assert behaviour.started.wait(10)
    stopper = threading.Thread(target=manager.stop, kwargs={"timeout": 10})
    stopper.start()
    time.sleep(0.2)
    assert stopper.is_alive()  # waiting for the running action
    block.set()
    stopper.join(15)
    assert not stopper.is_alive()

    # The running action committed; nothing further ran; every lease was released.
    with sessions() as session:
        assert len(executions(session)) == 1
    for item_id in (first, queued):
        row = item_row(sessions, item_id)
        assert (row.actionable, row.lease_token) == (True, None)
    assert manager.held_count == 0


def test_heartbeat_does_not_wait_behind_a_row_lock_held_by_a_long_step(engine, sessions):
    """A step holding its item's row during a slow call must not stall the other leases."""
    block = threading.Event()
    behaviour = Behaviour(block=block)
    config = fast_config(workers=2, lease_seconds=1.5, heartbeat_seconds=0.3)
    with sessions() as session:
        locked_id = create_item(session, ["a"], notify=False)
        other_id = create_item(session, ["a"], notify=False)
        session.commit()
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        try:
            manager.notify(locked_id)
            manager.notify(other_id)
            wait_until(lambda: manager.held_count == 2, timeout=10, what="both claims")
            # Another transaction (standing in for a step in the middle of a
            # GitLab call) holds the first item's row.
            with engine.connect() as holder:
                holder.execute(
                    sa.text("SELECT 1 FROM work_items WHERE id = :id FOR NO KEY UPDATE"),
                    {"id": locked_id},
                )
                before = item_row(sessions, other_id).leased_until
                time.sleep(config.heartbeat_seconds * 3)
                after = item_row(sessions, other_id).leased_until
                assert after > before, "the other item's lease was not extended"
                time.sleep(config.lease_seconds)  # the locked row's lease lapses meanwhile
                holder.rollback()
            # The locked item was not given up as lost: once its row is free,
            # its lease is renewed and both items finish once.
            wait_until(
                lambda: item_row(sessions, locked_id).leased_until > sa_now(sessions),
                timeout=5,
                what="the locked item's lease renewed",
            )
            assert manager._lost == set()
            block.set()
            wait_until(lambda: settled(sessions), timeout=30, what="both items")
        finally:
            block.set()
    assert behaviour.calls[(locked_id, "a")] == 1
    assert behaviour.calls[(other_id, "a")] == 1


def sa_now(sessions):
    with sessions() as session:
        return session.execute(sa.text("SELECT clock_timestamp()")).scalar_one()
