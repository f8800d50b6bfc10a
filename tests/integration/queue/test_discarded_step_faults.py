"""Faults found by review of the batched hot path, each reproduced against PostgreSQL:

* a step discarded by a deadlock or a lost connection re-ran an item that GitLab had just
  told to wait (its recorded failure was thrown away with the step);
* a connection cut under a driver-level statement escaped the loop's retry (the session's
  rollback on the dead connection raised instead);
* a batch whose only success waited for that item's lock while holding its failed
  neighbours' rows, which deadlocked with an enqueuer taking both;
* claims committed by the dispatcher but not yet queued were stranded (heartbeated, never
  run) when the due-time query after the commit failed.
"""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest
import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, wait_until
from sample_type import SAMPLE_TYPE, Behaviour, SampleItem, build_registry, create_item, decide

from workqueue.queue import enqueue
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus
from workqueue.queue.processing import lease_repository, step_repository, sweeps
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.queue.registry import TypeRegistry

RETRY_AFTER = 2.0
CUT = "SELECT pg_terminate_backend(pg_backend_pid())"


class RateLimitedError(Exception):
    retry_after = RETRY_AFTER
    outage = True


def _claims(sessions, count: int) -> list[lease_repository.Claim]:
    with sessions() as session:
        ids = [create_item(session, ["a"], notify=False) for _ in range(count)]
        session.commit()
    with sessions() as session:
        claims = lease_repository.claim_due_items(
            session, item_types=[SAMPLE_TYPE], limit=count, lease_seconds=60, only_ids=ids
        )
        session.commit()
    by_id = {claim.item_id: claim for claim in claims}
    return [by_id[item_id] for item_id in ids]


def _loop(sessions, step) -> ItemLoop:
    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    config = fast_config(step_batch_seconds=30, backoff_initial_seconds=0.05)
    return ItemLoop(sessions=sessions, registry=registry, config=config, audit=AuditLog())


def _run(loop: ItemLoop, claims):
    return loop.run_batch(claims, should_stop=lambda: False, lease_lost=lambda _item_id: False)


@pytest.mark.parametrize(
    "poison",
    [
        "driver:DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$",
        f"driver:{CUT}",
        f"sqlalchemy:{CUT}",
    ],
    ids=["deadlock", "connection-cut-under-the-driver", "connection-cut-under-sqlalchemy"],
)
def test_a_discarded_step_records_its_failures_before_anything_runs_again(
    sessions, monkeypatch, poison
):
    claims = _claims(sessions, 2)
    told_id = claims[0].item_id
    calls: dict[uuid.UUID, list[float]] = {}
    real_finish = step_repository.finish_steps
    poisoned = []

    def finish_steps(session, ends, **options):
        if not poisoned:
            poisoned.append(True)
            via, statement = poison.split(":", 1)
            if via == "driver":
                step_repository.driver_connection(session).execute(statement)
            else:
                session.execute(sa.text(statement))
        return real_finish(session, ends, **options)

    def step(context: ExecutionContext) -> None:
        calls.setdefault(context.item.id, []).append(time.monotonic())
        if context.item.id == told_id:
            raise RateLimitedError("429 Too Many Requests")
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    monkeypatch.setattr(step_repository, "finish_steps", finish_steps)
    results = _run(_loop(sessions, step), claims)

    assert poisoned
    assert len(calls[told_id]) == 1, "called again before its Retry-After"
    assert results[told_id].outcome is ClaimOutcome.FAILED
    assert results[claims[1].item_id].outcome is ClaimOutcome.IDLE
    told = item_row(sessions, told_id)
    assert (told.attempts, told.leased_until) == (1, None)
    with sessions() as session:
        wait = session.execute(
            sa.text(
                "SELECT extract(epoch FROM next_attempt_at - now()) FROM work_items WHERE id = :id"
            ),
            {"id": told_id},
        ).scalar_one()
    assert wait > RETRY_AFTER - 1.0  # counted from the recording, not from long ago


@pytest.mark.parametrize("count", [1, 3])
def test_a_connection_cut_under_a_driver_statement_is_an_outage_not_a_crash(
    sessions, monkeypatch, count
):
    claims = _claims(sessions, count)
    real_finish = step_repository.finish_steps
    cut = []

    def finish_steps(session, ends, **options):
        if not cut:
            cut.append(True)
            step_repository.driver_connection(session).execute(CUT)
        return real_finish(session, ends, **options)

    def step(context: ExecutionContext) -> None:
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    monkeypatch.setattr(step_repository, "finish_steps", finish_steps)
    results = _run(_loop(sessions, step), claims)

    assert cut
    assert {result.outcome for result in results.values()} == {ClaimOutcome.IDLE}
    for claim in claims:
        row = item_row(sessions, claim.item_id)
        assert (row.actionable, row.leased_until) == (False, None)


def test_a_batch_with_one_success_does_not_wait_for_its_lock_while_holding_its_failures(
    sessions,
):
    """`finish_steps` may wait for an item's lock only in a lone step: a batch holds the
    rows its failures updated, and an enqueuer locking both items in the other order
    would deadlock with it (and the told item would run again at once)."""
    claims = _claims(sessions, 2)
    failed_id, succeeding_id = (claim.item_id for claim in claims)
    enqueuer_errors: list[str] = []
    calls: dict[uuid.UUID, list[float]] = {}

    def enqueuer() -> None:
        # Like storing one delivery's events for both items: their locks in this order.
        try:
            with sessions() as session:
                enqueue.mark_actionable(session, succeeding_id, SAMPLE_TYPE)
                time.sleep(0.5)
                enqueue.mark_actionable(session, failed_id, SAMPLE_TYPE)
                session.commit()
        except Exception as error:
            enqueuer_errors.append(f"{type(error).__name__}: {error}")

    def step(context: ExecutionContext) -> None:
        calls.setdefault(context.item.id, []).append(time.monotonic())
        if context.item.id == failed_id:
            raise RateLimitedError("429")
        if len(calls[context.item.id]) == 1:
            threading.Thread(target=enqueuer, daemon=True).start()
            time.sleep(0.1)  # the enqueuer holds the succeeding item's lock now
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    _run(_loop(sessions, step), claims)

    assert enqueuer_errors == []
    assert len(calls[failed_id]) == 1


def test_claims_are_not_stranded_when_the_due_time_query_fails(sessions, monkeypatch):
    real = sweeps.seconds_until_due
    failed = []

    def seconds_until_due(session, item_types, **options):
        if not failed:
            failed.append(True)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(session, item_types, **options)

    monkeypatch.setattr(sweeps, "seconds_until_due", seconds_until_due)
    config = fast_config(lease_seconds=3, heartbeat_seconds=0.5)
    with running_manager(sessions, build_registry(Behaviour()), config) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"], notify=False)
            session.commit()
        manager.notify(item_id)
        wait_until(
            lambda: not item_row(sessions, item_id).actionable,
            timeout=15,
            what="the claimed item to run and go idle",
        )
    assert failed


def test_a_replica_never_claims_its_own_running_item_a_second_time(sessions, monkeypatch):
    """Heartbeats failing past a lease's length, then a sweep: the item's lease has run
    out in the database, but this process still runs it, so its own claim must not take
    it again (the executor would run twice at once). Its own step still ends fenced on
    its token, which nobody else took."""
    real = lease_repository.extend_leases
    heartbeats_fail = threading.Event()
    heartbeats_fail.set()

    def extend_leases(session, claims, seconds):
        if heartbeats_fail.is_set():
            raise TimeoutError("QueuePool limit reached")
        return real(session, claims, seconds)

    monkeypatch.setattr(lease_repository, "extend_leases", extend_leases)
    behaviour = Behaviour(block=threading.Event())
    config = fast_config(lease_seconds=3, heartbeat_seconds=0.5)
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"], notify=False)
            session.commit()
        manager.notify(item_id)
        wait_until(behaviour.started.is_set, 10, what="the step to start")
        time.sleep(3.5)  # the lease runs out: no heartbeat could extend it
        heartbeats_fail.clear()
        manager.sweep()
        time.sleep(1.0)
        assert behaviour.overlaps == []
        behaviour.block.set()
        wait_until(lambda: manager.held_count == 0, 10, what="the claim to end")
    assert behaviour.overlaps == []


def test_a_backoff_finished_during_the_due_time_query_is_not_forgotten(sessions, monkeypatch):
    """Claims start only after the dispatcher's due-time query: a claim that failed and
    set its retry time while the query ran would otherwise see that time overwritten by
    the query's answer (taken while it was still held) and wait for the safety sweep."""
    real = sweeps.seconds_until_due

    def slow_seconds_until_due(session, item_types, **options):
        answer = real(session, item_types, **options)
        time.sleep(0.3)  # a busy database: claims would finish meanwhile
        return answer

    monkeypatch.setattr(sweeps, "seconds_until_due", slow_seconds_until_due)
    failures_left = [RateLimitedError("429") for _ in range(4)]

    def step(context: ExecutionContext) -> None:
        if failures_left:
            raise failures_left.pop()
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    monkeypatch.setattr(RateLimitedError, "retry_after", 0.05)
    config = fast_config(safety_sweep_seconds=300, max_attempts=10)
    with sessions() as session:
        item_id = create_item(session, ["a"])
        session.commit()
    with running_manager(sessions, registry, config):
        wait_until(
            lambda: not item_row(sessions, item_id).actionable,
            timeout=20,
            what="four backoffs and the success (a lost wake-up waits for the 300 s sweep)",
        )
    assert failures_left == []
