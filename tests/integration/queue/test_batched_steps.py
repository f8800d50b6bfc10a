"""Batched steps: several claims of one type share a transaction, each keeps its own fate.

Every executor here records the transaction it ran in (`txid_current()`) in
`sample_executions.worker`, so a test can tell which items shared a commit.
Only committed executions are visible.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, wait_until
from sample_type import (
    SAMPLE_TYPE,
    SampleItem,
    create_item,
    create_items,
    decide,
    handle_poke,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue import enqueue
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.queue.registry import TypeRegistry

Hook = Callable[[ExecutionContext, int], None]


def _registry(before_finishing: dict[int, Hook], order: dict[uuid.UUID, int]) -> TypeRegistry:
    """Items are numbered by their position in `order`; hooks run for those numbers."""

    def step(context: ExecutionContext) -> None:
        number = order[context.item.id]
        hook = before_finishing.get(number)
        if hook is not None:
            hook(context, number)
        context.session.execute(
            sa.text(
                "INSERT INTO sample_executions (work_item_id, variant, worker) "
                "VALUES (:id, :variant, txid_current()::text)"
            ),
            {"id": context.item.id, "variant": context.action.variant},
        )
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    return registry


def _claim(sessions: sessionmaker[Session], count: int) -> tuple[list[Any], dict[uuid.UUID, int]]:
    with sessions() as session:
        ids = [create_item(session, ["a"], notify=False) for _ in range(count)]
        session.commit()
    with sessions() as session:
        claims = lease_repository.claim_due_items(
            session, item_types=[SAMPLE_TYPE], limit=count, lease_seconds=60, only_ids=ids
        )
        session.commit()
    by_id = {claim.item_id: claim for claim in claims}
    ordered = [by_id[item_id] for item_id in ids]
    return ordered, {item_id: number for number, item_id in enumerate(ids, start=1)}


def _transactions(sessions: sessionmaker[Session]) -> dict[uuid.UUID, list[str]]:
    with sessions() as session:
        rows = session.execute(
            sa.text("SELECT work_item_id, worker FROM sample_executions ORDER BY id")
        ).all()
    found: dict[uuid.UUID, list[str]] = {}
    for item_id, transaction in rows:
        found.setdefault(item_id, []).append(transaction)
    return found


def _loop(sessions: sessionmaker[Session], registry: TypeRegistry, **config: Any) -> ItemLoop:
    # A generous time budget unless a test is about the budget: a busy CI
    # machine must not split a batch the test expects to commit at once.
    config.setdefault("step_batch_seconds", 10)
    return ItemLoop(
        sessions=sessions, registry=registry, config=fast_config(**config), audit=AuditLog()
    )


def _run(loop: ItemLoop, claims: list[Any]) -> dict[uuid.UUID, ClaimOutcome]:
    results = loop.run_batch(claims, should_stop=lambda: False, lease_lost=lambda _item_id: False)
    return {item_id: result.outcome for item_id, result in results.items()}


def test_a_batch_shares_one_commit_and_ends_every_item_idle(sessions):
    claims, order = _claim(sessions, 10)
    outcomes = _run(_loop(sessions, _registry({}, order)), claims)

    assert set(outcomes.values()) == {ClaimOutcome.IDLE}
    transactions = _transactions(sessions)
    assert set(transactions) == set(order)
    assert len({txid for txids in transactions.values() for txid in txids}) == 1
    for claim in claims:
        row = item_row(sessions, claim.item_id)
        assert (row.actionable, row.lease_token, row.attempts) == (False, None, 0)


def _fail_after_writing(context: ExecutionContext, _number: int) -> None:
    context.session.execute(
        sa.text(
            "INSERT INTO sample_executions (work_item_id, variant, worker) "
            "VALUES (:id, 'written-then-failed', 'x')"
        ),
        {"id": context.item.id},
    )
    raise RuntimeError("GitLab said no")


def _fail_without_the_session(context: ExecutionContext, _number: int) -> None:
    context.set_dimension("needs_step", DimensionStatus.FALSE, variant="a")
    context.item.error = "changed in memory only"
    raise RuntimeError("pure trouble")


@pytest.mark.parametrize("failing", [_fail_after_writing, _fail_without_the_session])
def test_one_items_failure_rolls_back_only_its_own_part(sessions, failing):
    claims, order = _claim(sessions, 6)
    outcomes = _run(_loop(sessions, _registry({3: failing}, order)), claims)

    failed = claims[2].item_id
    assert outcomes[failed] is ClaimOutcome.FAILED
    assert {outcomes[claim.item_id] for claim in claims if claim.item_id != failed} == {
        ClaimOutcome.IDLE
    }
    transactions = _transactions(sessions)
    # Nothing the failed item wrote survived; the other five committed together.
    assert failed not in transactions
    assert len(transactions) == 5
    assert len({txid for txids in transactions.values() for txid in txids}) == 1
    row = item_row(sessions, failed)
    assert row.attempts == 1
    assert "trouble" in row.error or "GitLab said no" in row.error
    assert row.actionable  # backing off, to be tried again
    with sessions() as session:
        status = session.execute(
            sa.text("SELECT status FROM work_item_statuses WHERE work_item_id = :id"),
            {"id": failed},
        ).scalar_one()
    assert status == "true"  # its dimension change was discarded with it


def test_a_slow_action_ends_the_transaction_and_the_rest_commit_after_it(sessions):
    claims, order = _claim(sessions, 5)

    def slow(_context: ExecutionContext, _number: int) -> None:
        time.sleep(0.2)

    loop = _loop(sessions, _registry({2: slow}, order), step_batch_seconds=0.05)
    outcomes = _run(loop, claims)

    assert set(outcomes.values()) == {ClaimOutcome.IDLE}
    transactions = _transactions(sessions)
    slow_one = transactions[claims[1].item_id][0]
    after_it = {transactions[claim.item_id][0] for claim in claims[2:]}
    assert slow_one not in after_it  # nothing after it waited for its commit


def test_a_lease_lost_mid_batch_discards_the_step_and_the_others_finish(sessions, engine: Engine):
    claims, order = _claim(sessions, 5)
    victim = claims[2].item_id
    stolen: list[uuid.UUID] = []

    def steal_the_third(_context: ExecutionContext, _number: int) -> None:
        if stolen:
            return
        # Another replica took the third item over while this step runs.
        with engine.begin() as connection:
            token = connection.execute(
                sa.text(
                    "UPDATE work_items SET lease_token = gen_random_uuid() "
                    "WHERE id = :id RETURNING lease_token"
                ),
                {"id": victim},
            ).scalar_one()
        stolen.append(token)

    outcomes = _run(_loop(sessions, _registry({1: steal_the_third}, order)), claims)

    assert outcomes[victim] is ClaimOutcome.LOST
    assert {outcomes[claim.item_id] for claim in claims if claim.item_id != victim} == {
        ClaimOutcome.IDLE
    }
    transactions = _transactions(sessions)
    # The discarded step committed nothing: one execution per other item, none for the victim.
    assert victim not in transactions
    assert {item_id: len(txids) for item_id, txids in transactions.items()} == {
        claim.item_id: 1 for claim in claims if claim.item_id != victim
    }
    row = item_row(sessions, victim)
    assert row.lease_token == stolen[0]  # the new holder's lease is untouched
    assert row.actionable


def test_an_event_arriving_during_a_batch_is_not_stranded(sessions, engine: Engine):
    claims, order = _claim(sessions, 3)
    target = claims[2].item_id

    def poke_the_third(_context: ExecutionContext, _number: int) -> None:
        with Session(engine) as other:
            enqueue.insert_pending_event(
                other,
                item_id=target,
                item_type=SAMPLE_TYPE,
                event_type="poke",
                body={"steps": ["b"]},
            )
            other.commit()

    registry = _registry({1: poke_the_third}, order)
    registry.get(SAMPLE_TYPE).add_event_handler("poke", handle_poke)
    outcomes = _run(_loop(sessions, registry), claims)

    assert set(outcomes.values()) == {ClaimOutcome.IDLE}
    with sessions() as session:
        waiting = session.execute(
            sa.text("SELECT count(*) FROM pending_events WHERE work_item_id = :id"),
            {"id": target},
        ).scalar_one()
        variants = session.execute(
            sa.text("SELECT variant FROM sample_executions WHERE work_item_id = :id ORDER BY id"),
            {"id": target},
        ).all()
    # The event was drained and the step it asked for ran, before going idle.
    assert waiting == 0
    assert [row.variant for row in variants] == ["a", "b"]


def test_a_manager_steps_a_backlog_in_shared_transactions(sessions):
    with sessions() as session:
        ids = create_items(session, 300, ["a"])
        session.commit()
    order = {item_id: number for number, item_id in enumerate(ids, start=1)}
    with running_manager(sessions, _registry({}, order), fast_config(workers=2)):
        wait_until(lambda: len(_transactions(sessions)) == 300, timeout=60, what="300 steps")
    transactions = _transactions(sessions)
    assert all(len(txids) == 1 for txids in transactions.values())  # each exactly once
    distinct = len({txids[0] for txids in transactions.values()})
    assert distinct < 300 / 2  # batched: on average more than two items per commit


def test_a_short_queue_gives_every_claim_its_own_worker(sessions):
    """Two items, four workers: they run side by side, not one after the other in a batch."""
    with sessions() as session:
        ids = [create_item(session, ["a"]) for _ in range(2)]
        session.commit()
    order = {item_id: number for number, item_id in enumerate(ids, start=1)}

    def slow(_context: ExecutionContext, _number: int) -> None:
        time.sleep(0.3)

    registry = _registry({1: slow, 2: slow}, order)
    with running_manager(sessions, registry, fast_config(workers=4)):
        wait_until(lambda: len(_transactions(sessions)) == 2, timeout=30, what="both steps")
    assert len({txids[0] for txids in _transactions(sessions).values()}) == 2
