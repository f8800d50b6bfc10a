"""Batched steps under attack: failures, flush errors, cross-batch wake-ups, slow neighbours.

Each of these once broke the batched step (found by review): one item's
failure must never cost another item a second run of its action, nor leave
the failed step's own writes behind.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import sqlalchemy as sa
from harness import fast_config, item_row
from sample_type import SAMPLE_TYPE, SampleItem, create_item, decide, handle_poke
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue import enqueue
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.queue.registry import TypeRegistry


def _claim_ids(sessions: sessionmaker[Session], ids: list[uuid.UUID]) -> list[Any]:
    with sessions() as session:
        claims = lease_repository.claim_due_items(
            session, item_types=[SAMPLE_TYPE], limit=len(ids), lease_seconds=60, only_ids=ids
        )
        session.commit()
    by_id = {claim.item_id: claim for claim in claims}
    return [by_id[item_id] for item_id in ids]


def _loop(sessions: sessionmaker[Session], executor: Any, **config: Any) -> ItemLoop:
    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", executor)
    config.setdefault("step_batch_seconds", 10)
    return ItemLoop(
        sessions=sessions, registry=registry, config=fast_config(**config), audit=AuditLog()
    )


def _log(context: ExecutionContext) -> None:
    context.session.execute(
        sa.text(
            "INSERT INTO sample_executions (work_item_id, variant, worker) "
            "VALUES (:id, :variant, 'x')"
        ),
        {"id": context.item.id, "variant": context.action.variant},
    )
    context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)


def test_failed_items_in_memory_changes_made_before_first_session_use_are_rolled_back(sessions):
    """An executor changes its item, then uses the session, then fails: nothing may survive."""
    with sessions() as session:
        ids = [create_item(session, ["a"], notify=False) for _ in range(2)]
        session.commit()
    victim = ids[1]

    def step(context: ExecutionContext) -> None:
        if context.item.id == victim:
            context.item.project_path = "written-by-a-failed-step"
            context.set_phase(Phase.COMPLETED, "about to finish")
            context.session.execute(sa.text("SELECT 1"))  # first use: the savepoint
            raise RuntimeError("GitLab said no")
        _log(context)

    results = _loop(sessions, step).run_batch(
        _claim_ids(sessions, ids), should_stop=lambda: False, lease_lost=lambda _i: False
    )

    assert results[victim].outcome is ClaimOutcome.FAILED
    assert results[ids[0]].outcome is ClaimOutcome.IDLE
    row = item_row(sessions, victim)
    assert row.attempts == 1  # the failure was recorded...
    assert row.actionable  # ...and it backs off
    # ...and the failed step's own changes were rolled back with it.
    assert (row.phase, row.project_path) == ("active", None)


def test_a_multi_step_item_does_not_starve_the_rest_of_its_batch(sessions):
    """First claim has many slow steps: the others must still get a turn before the deadline."""
    with sessions() as session:
        hog = create_item(session, [f"v{n:02}" for n in range(30)], notify=False)
        others = [create_item(session, ["a"], notify=False) for _ in range(2)]
        session.commit()

    def step(context: ExecutionContext) -> None:
        if context.item.id == hog:
            time.sleep(0.1)  # a GitLab call, longer than the step budget
        _log(context)

    loop = _loop(sessions, step, step_batch_seconds=0.05, item_deadline_seconds=1.5)
    results = loop.run_batch(
        _claim_ids(sessions, [hog, *others]),
        should_stop=lambda: False,
        lease_lost=lambda _i: False,
    )

    with sessions() as session:
        done = session.execute(
            sa.text("SELECT work_item_id, count(*) FROM sample_executions GROUP BY 1")
        ).all()
    executed = dict(done)
    # Each of the two fast items needed one 1 ms step; they were claimed (and kept
    # from every other replica) for the whole 1.5 s deadline.
    assert all(executed.get(item_id, 0) == 1 for item_id in others)
    assert all(results[item_id].outcome is ClaimOutcome.IDLE for item_id in others)


def test_two_batches_waking_each_others_items_do_not_deadlock(sessions, caplog):
    """A wakes B (event) in batch 1 [A, C]; D wakes C in batch 2 [D, B]; both finish."""
    with sessions() as session:
        a, b, c, d = (create_item(session, ["a"], notify=False) for _ in range(4))
        session.commit()
    wakes = {a: b, d: c}
    both_woke = threading.Barrier(2, timeout=10)
    first_time = {a: True, d: True}
    calls: dict[uuid.UUID, int] = {}

    def step(context: ExecutionContext) -> None:
        item_id = context.item.id
        calls[item_id] = calls.get(item_id, 0) + 1
        if item_id in wakes:
            enqueue.insert_pending_event(
                context.session,
                item_id=wakes[item_id],
                item_type=SAMPLE_TYPE,
                event_type="poke",
                body={},
            )
            if first_time.pop(item_id, False):
                both_woke.wait()
        _log(context)

    registry = TypeRegistry()
    sample = registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide)
    sample.add_executor("step", step)
    sample.add_event_handler("poke", handle_poke)
    loop = ItemLoop(
        sessions=sessions,
        registry=registry,
        config=fast_config(step_batch_seconds=10),
        audit=AuditLog(),
    )
    first, second = _claim_ids(sessions, [a, c]), _claim_ids(sessions, [d, b])
    results: dict[uuid.UUID, Any] = {}

    def run(claims: list[Any]) -> None:
        results.update(
            loop.run_batch(claims, should_stop=lambda: False, lease_lost=lambda _i: False)
        )

    threads = [threading.Thread(target=run, args=(claims,)) for claims in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any("deadlock" in record.getMessage() for record in caplog.records)
    assert calls == {a: 1, b: 1, c: 1, d: 1}  # no action ran twice


def test_flush_failure_inside_an_items_savepoint_stays_its_own(sessions):
    with sessions() as session:
        ids = [create_item(session, ["a"], notify=False) for _ in range(3)]
        session.commit()
    victim = ids[1]
    calls: dict[uuid.UUID, int] = {}

    def step(context: ExecutionContext) -> None:
        calls[context.item.id] = calls.get(context.item.id, 0) + 1
        if context.item.id == victim:
            context.session.execute(sa.text("SELECT 1"))
            context.item.caller_identity = None  # NOT NULL: the flush fails
            context.session.flush()
        _log(context)

    results = _loop(sessions, step).run_batch(
        _claim_ids(sessions, ids), should_stop=lambda: False, lease_lost=lambda _i: False
    )
    assert results[victim].outcome is ClaimOutcome.FAILED
    assert calls == dict.fromkeys(ids, 1)
