"""A step's batch read: items straight from the driver, made persistent as the ORM would
load them, with their waiting events read in the same statement."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sample_type import SampleItem, create_item
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue import enqueue
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus, WorkItem
from workqueue.queue.processing import step_repository
from workqueue.types.mr.models import MRWorkItem


def _mr_item(sessions: sessionmaker[Session], n: int) -> uuid.UUID:
    with sessions() as session:
        item = MRWorkItem(
            caller_identity="tests",
            project="group/project",
            source_branch=f"workqueue/b{n}",
            title="t ü",
            commit_message="m",
            labels=["bot", "ü"],
            file_actions=[{"action": "update", "file_path": "a", "content": "1\n"}],
            content_hash="h",
            mr_iid=n,
            head_pipeline_id=2**40 + n,
            ci_retry_counts={"unit": 2},
            merge_blocker={"code": "not_approved", "message": "m", "since": "x"},
            actionable=True,
        )
        session.add(item)
        session.commit()
        return item.id


def _attributes(item: WorkItem) -> dict[str, Any]:
    return {key: value for key, value in vars(item).items() if not key.startswith("_")}


def _compare_with_orm(
    sessions: sessionmaker[Session], model: type[WorkItem], ids: list[uuid.UUID]
) -> None:
    with sessions() as driver_session, sessions() as orm_session:
        loaded = step_repository.load_batch(driver_session, model, ids)
        expected = step_repository._load_batch_orm(orm_session, model, ids)
        assert loaded.keys() == expected.keys() == set(ids)
        for item_id in ids:
            item, orm_item = loaded[item_id].item, expected[item_id].item
            assert type(item) is type(orm_item) is model
            assert _attributes(item) == _attributes(orm_item)
            assert {key: type(value) for key, value in _attributes(item).items()} == {
                key: type(value) for key, value in _attributes(orm_item).items()
            }
            state = sa.inspect(item)
            assert state.persistent
            assert state.session is driver_session
            assert state.key == sa.inspect(orm_item).key
            assert not state.modified
            assert driver_session.get(model, item_id) is item  # in the identity map
            assert loaded[item_id].dimensions == expected[item_id].dimensions
            assert loaded[item_id].now.tzinfo is not None
        assert not driver_session.dirty


def test_joined_table_items_load_as_the_orm_loads_them(sessions):
    ids = [_mr_item(sessions, n) for n in range(3)]
    with sessions() as session:
        later = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        for update in (
            DimensionUpdate("needs_mr", DimensionStatus.FALSE),
            DimensionUpdate("needs_ci_retry", DimensionStatus.TRUE, "unit ü", later),
        ):
            enqueue.upsert_dimension(session, ids[0], update)
        session.commit()
    _compare_with_orm(sessions, MRWorkItem, ids)
    with sessions() as session:
        dimensions = step_repository.load_batch(session, MRWorkItem, ids[:1])[ids[0]].dimensions
    assert {(row.dimension, row.variant, row.pending_until) for row in dimensions} == {
        ("needs_mr", "", None),
        ("needs_ci_retry", "unit ü", later),
    }


def test_single_table_items_load_as_the_orm_loads_them_and_only_of_their_type(sessions):
    with sessions() as session:
        ids = [create_item(session, ["a", "b"], notify=False) for _ in range(2)]
        other = create_item(session, ["a"], item_type="other", notify=False)
        session.commit()
    _compare_with_orm(sessions, SampleItem, ids)
    with sessions() as session:
        assert step_repository.load_batch(session, SampleItem, [other]) == {}


def test_an_item_read_by_the_driver_writes_expires_and_refreshes_like_a_loaded_one(sessions):
    item_id = _mr_item(sessions, 1)
    with sessions() as session:
        item = step_repository.load_batch(session, MRWorkItem, [item_id])[item_id].item
        item.head_pipeline_status = "success"
        item.labels = [*item.labels, "new"]
        assert session.dirty
        session.commit()
    with sessions() as session:
        stored = session.get(MRWorkItem, item_id)
        assert stored is not None
        assert (stored.head_pipeline_status, stored.labels) == ("success", ["bot", "ü", "new"])
        stored.title = "changed elsewhere"
        session.commit()
    with sessions() as session:
        item = step_repository.load_batch(session, MRWorkItem, [item_id])[item_id].item
        session.expire(item)
        assert item.title == "changed elsewhere"  # reloaded by its identity


def test_a_session_holding_objects_reads_through_the_orm_and_refreshes_them(sessions):
    item_id = _mr_item(sessions, 1)
    with sessions() as session:
        first = step_repository.load_batch(session, MRWorkItem, [item_id])[item_id].item
        with sessions() as other:
            other.execute(
                sa.text("UPDATE mr_details SET title = 'new' WHERE id = :id"), {"id": item_id}
            )
            other.commit()
        again = step_repository.load_batch(session, MRWorkItem, [item_id])[item_id].item
        assert again is first
        assert first.title == "new"  # populate_existing, as before


def test_waiting_events_come_with_the_batch_oldest_first(sessions):
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        bare = create_item(session, ["a"], notify=False)
        session.commit()
    bodies = [
        {"n": 1, "text": 'ü "quoted" \\ back', "nested": {"list": [1, 2.5, None, True]}},
        {"n": 2, "big": 2**62, "empty": {}},
        {"n": 3},
    ]
    for body in bodies:
        with sessions() as session:
            enqueue.insert_pending_event(
                session, item_id=item_id, item_type="sample", event_type="poke", body=body
            )
            session.commit()
    with sessions() as session:
        stored = session.execute(
            sa.text(
                "SELECT id, event_type, body, received_at FROM pending_events "
                "WHERE work_item_id = :id ORDER BY id"
            ),
            {"id": item_id},
        ).all()
    for load in (step_repository.load_batch, step_repository._load_batch_orm):
        with sessions() as session:
            snapshots = load(session, SampleItem, [item_id, bare])
        assert snapshots[bare].events == []
        assert not snapshots[bare].has_events
        assert snapshots[item_id].has_events
        assert [
            (event.id, event.event_type, event.body, event.received_at)
            for event in snapshots[item_id].events
        ] == [tuple(row) for row in stored]
        assert [event.body for event in snapshots[item_id].events] == bodies


def test_dimension_rows_and_consumed_events_are_written_by_one_statement(sessions):
    with sessions() as session:
        item_id = create_item(session, ["a", "b"], notify=False)
        session.commit()
    for n in range(3):
        with sessions() as session:
            enqueue.insert_pending_event(
                session, item_id=item_id, item_type="sample", event_type="poke", body={"n": n}
            )
            session.commit()

    def event_ids() -> list[int]:
        with sessions() as session:
            return list(
                session.execute(
                    sa.text("SELECT id FROM pending_events WHERE work_item_id = :id ORDER BY id"),
                    {"id": item_id},
                ).scalars()
            )

    def statuses() -> dict[str, str]:
        with sessions() as session:
            rows = session.execute(
                sa.text("SELECT variant, status FROM work_item_statuses WHERE work_item_id = :id"),
                {"id": item_id},
            ).all()
        return dict(rows)

    first, second, third = event_ids()
    later = datetime(2030, 1, 1, tzinfo=UTC)
    cases = [
        # (dimension updates, consumed events, statuses after, events left after)
        ([], [], {"a": "true", "b": "true"}, [first, second, third]),
        ([], [first], {"a": "true", "b": "true"}, [second, third]),
        (
            [
                DimensionUpdate("needs_step", DimensionStatus.TRUE, "a"),
                DimensionUpdate("needs_step", DimensionStatus.FALSE, "a"),
            ],
            [],
            {"a": "false", "b": "true"},
            [second, third],
        ),
        (
            [
                DimensionUpdate("needs_step", DimensionStatus.FALSE, "b", later),
                DimensionUpdate("needs_step", DimensionStatus.TRUE, "c"),
            ],
            [second, third],
            {"a": "false", "b": "false", "c": "true"},
            [],
        ),
    ]
    for updates, consumed, expected_statuses, expected_events in cases:
        with sessions() as session:
            step_repository.write_step_rows(
                session, [(item_id, update) for update in updates], consumed
            )
            session.commit()
        assert statuses() == expected_statuses
        assert event_ids() == expected_events
