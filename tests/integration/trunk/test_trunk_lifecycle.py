"""Endings and speculation: failed, canceled and overdue builds free their slot; retry
validates again; max_concurrent 2 keeps the newest two and last green never moves
backwards; two managers with hooks shuffled and duplicated converge."""

from __future__ import annotations

import random
import threading
import uuid

import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from trunk_harness import (
    PROJECT,
    building,
    finish_pipeline,
    head,
    heads,
    in_flight,
    land,
    push_hook,
    queue_row,
    state_is,
    trunk_registry,
)

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import enqueue
from workqueue.queue.intake.pending_events import ingest_event


def hook(sessions, registry, payload, key=None) -> str:
    """Deliver a hook the way the webhook route does (ingest_event in one transaction)."""
    return run_in_transaction(
        sessions,
        lambda session: ingest_event(
            session,
            registry,
            source="webhook",
            delivery_key=key or str(uuid.uuid4()),
            event_type=payload["object_kind"],
            body=payload,
        ),
    ).status


def landed(sessions, registry, simulator) -> str:
    """A head lands and its Push Hook is resolved at once (the hook is only a hint:
    the service reads the head from GitLab then)."""
    sha = land(simulator)
    hook(sessions, registry, push_hook(simulator, sha))
    return sha


def manager(sessions, registry, conninfo):
    return running_manager(
        sessions, registry, fast_config(), handled_types=["trunk"], conninfo=conninfo
    )


def _retry(session, registry, item_id) -> None:
    item = session.get(registry.get("trunk").model, item_id)
    registry.get("trunk").retry_hook(session, item)
    enqueue.mark_actionable(session, item_id, "trunk", reactivate=True)


def test_failed_and_canceled_builds_free_the_slot_and_retry_validates_again(
    sessions, conninfo, simulator
):
    registry = trunk_registry(simulator.url)
    with manager(sessions, registry, conninfo):
        a = land(simulator)
        hook(sessions, registry, push_hook(simulator, a))
        wait_until(lambda: building(sessions, a), what="A building")
        pipeline = head(sessions, a).pipeline_id
        finish_pipeline(simulator, pipeline, "failed")
        hook(sessions, registry, simulator.pipeline_hook(pipeline))
        wait_until(lambda: state_is(sessions, a, "failed"), what="A failed")
        failed = head(sessions, a)
        assert failed.phase == "failed"
        assert f"pipeline {pipeline} failed" in failed.error
        assert in_flight(sessions) == 0
        assert queue_row(sessions).last_green_sha is None

        # retry: still the newest head, so it is validated again (a new pipeline)
        run_in_transaction(sessions, lambda session: _retry(session, registry, failed.id))
        wait_until(
            lambda: building(sessions, a) and head(sessions, a).pipeline_id != pipeline,
            what="A rebuilt",
        )
        assert in_flight(sessions) == 1
        second = head(sessions, a).pipeline_id
        finish_pipeline(simulator, second, "canceled")
        hook(sessions, registry, simulator.pipeline_hook(second))
        wait_until(lambda: state_is(sessions, a, "cancelled"), what="A cancelled")
        assert head(sessions, a).phase == "cancelled"
        assert in_flight(sessions) == 0

        # retry when a newer head exists: superseded, no new pipeline
        b = land(simulator)
        hook(sessions, registry, push_hook(simulator, b))
        wait_until(lambda: building(sessions, b), what="B building")
        run_in_transaction(sessions, lambda session: _retry(session, registry, failed.id))
        wait_until(lambda: state_is(sessions, a, "superseded"), what="A superseded on retry")
        assert len(simulator.pipeline_ids(PROJECT, source="api")) == 3
        assert in_flight(sessions) == 1


def test_a_build_past_its_deadline_fails_and_frees_the_slot(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url, build_deadline_seconds=1.0)
    with manager(sessions, registry, conninfo):
        a = land(simulator)
        hook(sessions, registry, push_hook(simulator, a))
        wait_until(lambda: state_is(sessions, a, "failed"), what="A past its deadline")
        assert "build_deadline_seconds" in head(sessions, a).error
        assert in_flight(sessions) == 0
        b = land(simulator)
        hook(sessions, registry, push_hook(simulator, b))
        wait_until(lambda: building(sessions, b), what="B admitted into the freed slot")


def test_cancelling_a_building_head_frees_its_slot_once(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url)
    with manager(sessions, registry, conninfo):
        a = land(simulator)
        hook(sessions, registry, push_hook(simulator, a))
        wait_until(lambda: building(sessions, a), what="A building")
        item_id = head(sessions, a).id

        def cancel(session) -> None:
            item = session.get(registry.get("trunk").model, item_id)
            registry.get("trunk").cancel_hook(session, item, {})
            enqueue.cancel_item(session, item_id)

        run_in_transaction(sessions, cancel)
        assert (head(sessions, a).state, in_flight(sessions)) == ("cancelled", 0)
        pipeline = head(sessions, a).pipeline_id
        finish_pipeline(simulator, pipeline)
        hook(sessions, registry, simulator.pipeline_hook(pipeline))
        wait_until(lambda: settled(sessions), what="settled")
        assert (head(sessions, a).state, in_flight(sessions)) == ("cancelled", 0)
        assert queue_row(sessions).last_green_sha is None


def test_max_concurrent_two_keeps_the_newest_two_and_adopts_the_highest_green(
    sessions, conninfo, simulator
):
    registry = trunk_registry(simulator.url, queue={"max_concurrent": 2})
    with manager(sessions, registry, conninfo):
        a = land(simulator)
        hook(sessions, registry, push_hook(simulator, a))
        wait_until(lambda: building(sessions, a), what="A building")
        b = land(simulator)
        hook(sessions, registry, push_hook(simulator, b))
        wait_until(lambda: building(sessions, b), what="B building alongside A")
        assert in_flight(sessions) == 2
        assert head(sessions, b).build_strategy == "full"  # pinned at admission: no green yet
        c, d, e = (landed(sessions, registry, simulator) for _ in range(3))
        # Only the newest two wait; C is superseded though no slot was free.
        wait_until(lambda: state_is(sessions, c, "superseded"), what="C superseded")
        assert state_is(sessions, d, "accepted")
        assert state_is(sessions, e, "accepted")

        # B (newer) turns green before A: last green adopts B, A's later green is moot.
        finish_pipeline(simulator, head(sessions, b).pipeline_id)
        hook(sessions, registry, simulator.pipeline_hook(head(sessions, b).pipeline_id))
        wait_until(lambda: state_is(sessions, b, "succeeded"), what="B green")
        assert queue_row(sessions).last_green_sha == b
        wait_until(lambda: building(sessions, e) or building(sessions, d), what="a slot reused")
        finish_pipeline(simulator, head(sessions, a).pipeline_id)
        hook(sessions, registry, simulator.pipeline_hook(head(sessions, a).pipeline_id))
        wait_until(lambda: state_is(sessions, a, "succeeded"), what="A green")
        assert queue_row(sessions).last_green_sha == b  # never backwards
        wait_until(lambda: building(sessions, d) and building(sessions, e), what="D and E")
        # Each pinned the last green of its admission (B, the only green then or since).
        assert head(sessions, d).base_sha == b
        assert head(sessions, e).base_sha == b
        assert in_flight(sessions) == 2


def test_two_managers_with_shuffled_duplicated_hooks_converge(sessions, conninfo, simulator):
    """Heads land in rounds; after each, every Push Hook so far is delivered twice in a
    shuffled order. A hook is only a hint, so each round ingests its newest head,
    whatever `after` the (mostly stale) hooks carry."""
    registry = trunk_registry(simulator.url, queue={"max_concurrent": 2})
    rng = random.Random(7)  # noqa: S311 - a reproducible shuffle, not a secret
    stop = threading.Event()
    finished: set[int] = set()
    greens_seen: list[int] = []

    def play_ci() -> None:
        """Finish each new pipeline green or red, sending its hook twice."""
        while not stop.is_set():
            for pipeline in simulator.pipeline_ids(PROJECT, source="api"):
                if pipeline in finished:
                    continue
                finished.add(pipeline)
                finish_pipeline(simulator, pipeline, rng.choice(["success", "success", "failed"]))
                payload = simulator.pipeline_hook(pipeline)
                for _ in range(2):
                    hook(sessions, registry, payload)
            row = queue_row(sessions)
            if row is not None and row.last_green_sequence is not None:
                greens_seen.append(int(row.last_green_sequence))
            stop.wait(0.05)

    round_heads: list[str] = []
    with manager(sessions, registry, conninfo), manager(sessions, registry, conninfo):
        thread = threading.Thread(target=play_ci, daemon=True)
        thread.start()
        try:
            deliveries: list[dict] = []
            for _ in range(8):
                shas = [land(simulator) for _ in range(rng.randint(1, 2))]
                round_heads.append(shas[-1])
                deliveries += [push_hook(simulator, sha) for sha in shas] * 2
                rng.shuffle(deliveries)
                for payload in deliveries:
                    hook(sessions, registry, payload)
            wait_until(
                lambda: (
                    len(heads(sessions)) == len(round_heads)
                    and all(h.phase != "active" for h in heads(sessions).values())
                ),
                timeout=60,
                what="every head ended",
            )
            wait_until(lambda: settled(sessions), what="settled")
        finally:
            stop.set()
            thread.join(10)

    final = heads(sessions)
    assert set(final) == set(round_heads)
    assert {h.state for h in final.values()} <= {"succeeded", "superseded", "failed"}
    with sessions() as session:
        processing = session.execute(
            sa.text("SELECT count(*) FROM trunk_details WHERE state = 'processing'")
        ).scalar_one()
    assert in_flight(sessions) == processing == 0
    assert greens_seen == sorted(greens_seen)  # last green never moved backwards
    greens = [h for h in final.values() if h.state == "succeeded"]
    if greens:
        assert queue_row(sessions).last_green_sha == max(greens, key=lambda h: h.sequence).sha
    # exactly one pipeline per admitted head
    admitted = sorted(h.pipeline_id for h in final.values() if h.pipeline_id is not None)
    assert admitted == simulator.pipeline_ids(PROJECT, source="api")
