"""A failure recorded in a batched step that is then discarded still stands.

A batched step records an item's failure (and its `Retry-After`) in the step's
transaction. When the step is then thrown away for another reason (a neighbour's
lease was lost, or the batch failed as a whole), that record went with it, and the
item used to be stepped again at once: a second GitLab call right after GitLab said
to wait (found by reading the loop while chasing the GitLab storm's Retry-After
violation). Its failure is now recorded again on its own.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from harness import fast_config, item_row
from sample_type import SAMPLE_TYPE, SampleItem, create_item, decide
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue.audit.log import AuditLog
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.models import DimensionStatus
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.queue.registry import TypeRegistry

RETRY_AFTER = 2.0


class RateLimitedError(Exception):
    """What the GitLab adapter raises on a 429, as the engine sees it (duck-typed)."""

    retry_after = RETRY_AFTER
    outage = True


def _claims(sessions: sessionmaker[Session], count: int) -> list[Any]:
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


def _run(sessions: sessionmaker[Session], claims: list[Any], neighbour: Any) -> dict[str, Any]:
    """The first item is told to wait; `neighbour(context)` is the second item's action."""
    told_at: list[datetime] = []
    calls: dict[uuid.UUID, int] = {}

    def step(context: ExecutionContext) -> None:
        calls[context.item.id] = calls.get(context.item.id, 0) + 1
        if context.item.id == claims[0].item_id:
            told_at.append(datetime.now(UTC))
            raise RateLimitedError("429 Too Many Requests")
        neighbour(context)
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    # backoff_initial below the Retry-After: only the Retry-After can set the delay.
    config = fast_config(step_batch_seconds=30, backoff_initial_seconds=0.05)
    loop = ItemLoop(sessions=sessions, registry=registry, config=config, audit=AuditLog())
    results = loop.run_batch(claims, should_stop=lambda: False, lease_lost=lambda _item_id: False)
    return {"results": results, "calls": calls, "told_at": told_at[0]}


def _assert_told_item_waits(sessions: sessionmaker[Session], claims: list[Any], run: Any) -> None:
    item_id = claims[0].item_id
    assert run["calls"][item_id] == 1  # not run again right after being told to wait
    assert run["results"][item_id].outcome is ClaimOutcome.FAILED
    row = item_row(sessions, item_id)
    assert row.attempts == 1
    assert (row.next_attempt_at - run["told_at"]).total_seconds() >= RETRY_AFTER


def test_a_neighbours_lost_lease_does_not_undo_a_retry_after(sessions, engine: Engine):
    claims = _claims(sessions, 2)

    def lose_my_lease(context: ExecutionContext) -> None:
        # Another replica took this item over while the step ran.
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE work_items SET lease_token = gen_random_uuid() WHERE id = :id"),
                {"id": context.item.id},
            )

    run = _run(sessions, claims, lose_my_lease)

    _assert_told_item_waits(sessions, claims, run)
    assert run["results"][claims[1].item_id].outcome is ClaimOutcome.LOST


def test_a_batch_failing_as_a_whole_does_not_undo_a_retry_after(sessions):
    claims = _claims(sessions, 2)

    def poison_the_batch(context: ExecutionContext) -> None:
        # Written with the whole batch's dimension rows, after every item's part, and
        # too long for its column: the batch fails as a whole.
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant="x" * 300)

    run = _run(sessions, claims, poison_the_batch)

    _assert_told_item_waits(sessions, claims, run)
    # The neighbour was stepped again on its own (where the error is its own).
    assert run["calls"][claims[1].item_id] == 2
    assert run["results"][claims[1].item_id].outcome is ClaimOutcome.FAILED
