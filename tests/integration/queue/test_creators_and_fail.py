"""Two generic engine hooks the trunk type needed, tested on the sample type:

* a creator (`add_creator`) lets an incoming event create items: ingest runs it,
  wakes what it made, answers "accepted", and a redelivery creates nothing;
* `ExecutionContext.fail` ends an item failed with its error while keeping the
  step's other writes (raising `PermanentError` rolls them back);
* a `failure_hook` runs once, in the transaction in which the engine fails an
  item (max_attempts or a `PermanentError`); if it raises, nothing is recorded
  and the step is tried again once the lease runs out.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, wait_until
from sample_type import SAMPLE_TYPE, Behaviour, SampleItem, build_registry, create_item

from workqueue.db.transactions import run_in_transaction
from workqueue.queue.contract import Action, ExecutionContext
from workqueue.queue.dimensions import Dimensions
from workqueue.queue.intake.pending_events import ingest_event
from workqueue.queue.models import DimensionStatus
from workqueue.queue.registry import TypeRegistry


def create_from_event(session, body) -> list[uuid.UUID]:
    """Test creator: one item per new `name` (idempotent: a known name makes nothing)."""
    name = body.get("name")
    if not isinstance(name, str):
        return []
    known = session.execute(
        sa.text("SELECT id FROM work_items WHERE idempotency_key = :key"), {"key": name}
    ).first()
    if known is not None:
        return []
    item_id = create_item(session, ["finish"])
    session.execute(
        sa.text("UPDATE work_items SET idempotency_key = :key WHERE id = :id"),
        {"key": name, "id": item_id},
    )
    return [item_id]


def ingest(sessions, registry, body, key):
    return run_in_transaction(
        sessions,
        lambda session: ingest_event(
            session, registry, source="webhook", delivery_key=key, event_type="made", body=body
        ),
    )


def test_a_creator_makes_items_from_an_event_once(sessions):
    registry = build_registry(Behaviour())
    registry.get(SAMPLE_TYPE).add_creator("made", create_from_event)
    assert registry.routes_event("made")
    assert not registry.routes_event("unmade")
    first = ingest(sessions, registry, {"name": "one"}, "key-1")
    assert first.status == "accepted"
    (item_id,) = first.item_ids
    assert ingest(sessions, registry, {"name": "one"}, "key-1").status == "duplicate"
    # A new delivery of the same thing: the creator is idempotent, nothing new.
    again = ingest(sessions, registry, {"name": "one"}, "key-2")
    assert (again.status, again.item_ids) == ("ignored", [])
    assert ingest(sessions, registry, {"bogus": 1}, "key-3").status == "ignored"
    assert item_row(sessions, item_id).actionable


def failing_registry() -> TypeRegistry:
    registry = TypeRegistry()

    def decide(item, dimensions: Dimensions) -> Action | None:
        return Action("release") if dimensions.needs("needs_release") else None

    def release(context: ExecutionContext) -> None:
        context.session.execute(
            sa.text("UPDATE work_items SET generation = generation + 1 WHERE id = :id"),
            {"id": context.item.id},
        )
        context.set_dimension("needs_release", DimensionStatus.FALSE)
        context.fail("the build failed: pipeline 7")

    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor(
        "release", release
    )
    return registry


def test_fail_keeps_the_steps_writes_and_the_error(sessions, conninfo):
    with sessions() as session:
        item_id = create_item(session, [])
        session.commit()
    with running_manager(
        sessions, failing_registry(), fast_config(), handled_types=[SAMPLE_TYPE], conninfo=conninfo
    ):
        wait_until(lambda: item_row(sessions, item_id).phase == "failed", what="failed")
        wait_until(lambda: not item_row(sessions, item_id).actionable, what="idle")
    row = item_row(sessions, item_id)
    assert (row.error, row.attempts, row.generation) == ("the build failed: pipeline 7", 0, 2)


def test_the_failure_hook_runs_once_in_the_transaction_that_fails_the_item(sessions, conninfo):
    behaviour = Behaviour(failures={"flaky": 99}, permanent={"refused"})
    registry = build_registry(behaviour)
    calls: list[tuple[uuid.UUID, str, str]] = []
    raised: list[uuid.UUID] = []

    def on_failure(session, item, error: str) -> None:
        if item.id == flaky and not raised:
            raised.append(item.id)
            raise RuntimeError("the hook failed once")
        calls.append((item.id, error, str(item.phase)))
        session.execute(
            sa.text("UPDATE work_items SET generation = generation + 1 WHERE id = :id"),
            {"id": item.id},
        )

    registry.get(SAMPLE_TYPE).set_failure_hook(on_failure)
    with sessions() as session:
        flaky = create_item(session, ["flaky"])
        refused = create_item(session, ["refused"])
        session.commit()
    config = fast_config(max_attempts=3)
    with running_manager(
        sessions, registry, config, handled_types=[SAMPLE_TYPE], conninfo=conninfo
    ):
        wait_until(
            lambda: all(item_row(sessions, i).phase == "failed" for i in (flaky, refused)),
            what="both failed",
        )
    flaky_row, refused_row = item_row(sessions, flaky), item_row(sessions, refused)
    # Called only for the failure that ends the item, before its row is written
    # (the item is still active then), and its write committed with the failure.
    assert sorted(calls) == sorted(
        [
            (flaky, "RuntimeError: transient trouble in step flaky", "active"),
            (refused, "refused: step refused can never work", "active"),
        ]
    )
    assert (flaky_row.attempts, flaky_row.generation) == (3, 2)
    assert (refused_row.attempts, refused_row.generation) == (1, 2)
    # The raising hook recorded nothing: the third attempt ran again after the lease.
    assert raised == [flaky]
    assert behaviour.calls[(flaky, "flaky")] == 4
