"""A head the ENGINE fails (an unexpected error until max_attempts, or a PermanentError)
while it holds a slot gives the slot back in that same transaction, exactly once: a
later retry or cancel of the failed head releases nothing more, last green stays put,
and the next head of the queue is admitted."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, wait_until
from trunk_harness import (
    building,
    finish_pipeline,
    head,
    in_flight,
    land,
    push_hook,
    queue_row,
    state_is,
    trunk_registry,
)

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import enqueue
from workqueue.queue.errors import PermanentError
from workqueue.queue.intake.pending_events import ingest_event
from workqueue.types.trunk.decider import RECORD

MAX_ATTEMPTS = 3


def hook(sessions, registry, payload) -> None:
    run_in_transaction(
        sessions,
        lambda session: ingest_event(
            session,
            registry,
            source="webhook",
            delivery_key=str(uuid.uuid4()),
            event_type=payload["object_kind"],
            body=payload,
        ),
    )


def processing(sessions) -> int:
    with sessions() as session:
        return int(
            session.execute(
                sa.text("SELECT count(*) FROM trunk_details WHERE state = 'processing'")
            ).scalar_one()
        )


def fail_for_good(sessions, registry, simulator, sha: str) -> None:
    """Deliver the head's pipeline hook; `record` raises until the engine fails it."""
    pipeline = head(sessions, sha).pipeline_id
    finish_pipeline(simulator, pipeline, "success")  # a green the service never reads
    hook(sessions, registry, simulator.pipeline_hook(pipeline))
    wait_until(lambda: head(sessions, sha).phase == "failed", what=f"{sha[:8]} failed")


@pytest.mark.parametrize(
    "error",
    [RuntimeError("the pipeline payload could not be parsed"), PermanentError("refused")],
    ids=["max_attempts", "permanent"],
)
def test_an_engine_failure_releases_the_slot_once_and_admits_the_next_head(
    sessions, conninfo, simulator, error
):
    registry = trunk_registry(simulator.url)
    registration = registry.get("trunk")
    record = registration.executors[RECORD]
    calls: list[object] = []

    def broken_record(context) -> None:
        calls.append(context.item.id)
        raise error

    config = fast_config(max_attempts=MAX_ATTEMPTS)
    with running_manager(sessions, registry, config, handled_types=["trunk"], conninfo=conninfo):
        a = land(simulator)
        hook(sessions, registry, push_hook(simulator, a))
        wait_until(lambda: building(sessions, a), what="A building")
        b = land(simulator)
        hook(sessions, registry, push_hook(simulator, b))
        wait_until(lambda: state_is(sessions, b, "accepted"), what="B waiting")
        assert in_flight(sessions) == 1

        registration.executors[RECORD] = broken_record
        fail_for_good(sessions, registry, simulator, a)
        failed = head(sessions, a)
        assert len(calls) == (1 if isinstance(error, PermanentError) else MAX_ATTEMPTS)
        assert failed.state == "failed"
        assert str(error) in failed.error
        assert queue_row(sessions).last_green_sha is None  # its green was never read
        # The slot came back with the failure, and the waiting head took it.
        wait_until(lambda: building(sessions, b), what="B admitted into the freed slot")
        assert in_flight(sessions) == processing(sessions) == 1

        # Retrying the failed head releases nothing more: a newer head is kept.
        registration.executors[RECORD] = record

        def retry(session) -> None:
            item = session.get(registration.model, failed.id)
            registration.retry_hook(session, item)
            enqueue.mark_actionable(session, failed.id, "trunk", reactivate=True)

        run_in_transaction(sessions, retry)
        wait_until(lambda: state_is(sessions, a, "superseded"), what="A superseded on retry")
        assert in_flight(sessions) == processing(sessions) == 1

        # Cancelling a head the engine failed releases nothing more either.
        registration.executors[RECORD] = broken_record
        fail_for_good(sessions, registry, simulator, b)
        assert head(sessions, b).state == "failed"
        assert in_flight(sessions) == processing(sessions) == 0
        item_id = head(sessions, b).id

        def cancel(session) -> None:
            item = session.get(registration.model, item_id)
            registration.cancel_hook(session, item, {})
            enqueue.cancel_item(session, item_id)

        run_in_transaction(sessions, cancel)
        assert head(sessions, b).phase == "cancelled"
        assert in_flight(sessions) == processing(sessions) == 0
        assert queue_row(sessions).last_green_sha is None
