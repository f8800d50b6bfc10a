"""emit() and the engine's phase announcements, on a real database (no delivery here)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from outbox_harness import make_outbox, outbox_rows, subscriber
from sample_type import Behaviour, build_registry, create_item
from sqlalchemy import event

from workqueue.queue import enqueue
from workqueue.queue.models import WorkItem
from workqueue.queue.outbox import emit as outbox

URL = "https://hooks.example.com/x"


def _item(session, item_id) -> WorkItem:
    return session.get(WorkItem, item_id)


def _set_project(sessions, item_id, project) -> None:
    with sessions() as session:
        session.execute(
            sa.text("UPDATE work_items SET project_path = :p WHERE id = :id"),
            {"p": project, "id": item_id},
        )
        session.commit()


def _recording(engine) -> list[str]:
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    return statements


def test_emit_without_outbox_or_interested_subscriber_sends_no_sql(sessions, engine):
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        session.commit()
        item = _item(session, item_id)
        statements = _recording(engine)
        outbox.emit(session, "work_item.completed", item=item, data={"x": 1})
        assert statements == []  # no outbox attached to this factory
        make_outbox(subscriber("chat", URL, ["attention.added"])).attach(sessions)
    with sessions() as session:
        item = _item(session, item_id)
        statements.clear()
        outbox.emit(session, "work_item.completed", item=item, data={})
        assert statements == []  # attached, but nobody takes this event
        session.commit()
    assert outbox_rows(sessions) == []


def test_unknown_event_type_is_a_programming_error(sessions):
    with sessions() as session, pytest.raises(ValueError, match="unknown outbound event"):
        outbox.emit(session, "work_item.exploded", item=None, data={})


def test_rows_fan_out_to_matching_subscribers_only(sessions):
    make_outbox(
        subscriber("everything", URL, ["work_item.completed", "work_item.failed"]),
        subscriber("mr-only", URL, ["work_item.completed"], item_types=["mr"]),
        subscriber("group", URL, ["work_item.completed"], projects=["group/**"]),
        subscriber("one-level", URL, ["work_item.completed"], projects=["group/*"]),
        subscriber("failures", URL, ["work_item.failed"]),
    ).attach(sessions)
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        session.commit()
    _set_project(sessions, item_id, "group/sub/repo")
    with sessions() as session:
        outbox.emit(session, "work_item.completed", item=_item(session, item_id), data={"n": 1})
        session.commit()

    rows = outbox_rows(sessions)
    assert sorted(row.subscriber for row in rows) == ["everything", "group"]
    assert len({row.event_id for row in rows}) == 1  # one event, one webhook-id
    assert rows[0].data == {
        "work_item_id": str(item_id),
        "item_type": "sample",
        "phase": "active",
        "project": "group/sub/repo",
        "n": 1,
    }
    assert {row.status for row in rows} == {"pending"}


def test_a_rolled_back_change_announces_nothing(sessions):
    make_outbox(subscriber("chat", URL, ["work_item.cancelled"])).attach(sessions)
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        session.commit()
    with sessions() as session:
        enqueue.cancel_item(session, item_id)
        assert len(outbox_rows_in(session)) == 1  # written in this transaction...
        session.rollback()
    assert outbox_rows(sessions) == []  # ...and gone with it
    with sessions() as session:
        enqueue.cancel_item(session, item_id)
        session.commit()
    (row,) = outbox_rows(sessions)
    assert (row.event_type, row.work_item_id) == ("work_item.cancelled", item_id)
    assert row.data["phase"] == "cancelled"
    with sessions() as session:
        enqueue.cancel_item(session, item_id)  # already cancelled: no second event
        session.commit()
    assert len(outbox_rows(sessions)) == 1


def outbox_rows_in(session) -> list:
    return list(session.execute(sa.text("SELECT id FROM outbox_deliveries")).all())


def test_engine_announces_completion_and_failure_of_any_type(sessions):
    make_outbox(subscriber("chat", URL, ["work_item.completed", "work_item.failed"])).attach(
        sessions
    )
    behaviour = Behaviour(permanent={"doomed"})
    with running_manager(sessions, build_registry(behaviour), fast_config()) as manager:
        with sessions() as session:
            done = create_item(session, ["a", "finish"])
            failed = create_item(session, ["doomed"])
            session.commit()
        manager.notify(done)
        manager.notify(failed)
        wait_until(lambda: settled(sessions), what="both items to settle")

    rows = {row.work_item_id: row for row in outbox_rows(sessions)}
    assert set(rows) == {done, failed}
    assert rows[done].event_type == "work_item.completed"
    assert rows[done].data["phase"] == "completed"
    assert rows[failed].event_type == "work_item.failed"
    assert rows[failed].data["phase"] == "failed"
    assert "can never work" in rows[failed].data["error"]


def test_events_that_change_the_phase_announce_it(sessions):
    make_outbox(subscriber("chat", URL, ["work_item.cancelled"])).attach(sessions)
    with running_manager(sessions, build_registry(Behaviour()), fast_config()) as manager:
        with sessions() as session:
            item_id = create_item(session, [], notify=False)
            session.commit()
        with sessions() as session:
            enqueue.insert_pending_event(
                session,
                item_id=item_id,
                item_type="sample",
                event_type="poke",
                body={"phase": "cancelled", "reason": "closed"},
            )
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: len(outbox_rows(sessions)) == 1, what="the cancellation event")
    (row,) = outbox_rows(sessions)
    assert (row.event_type, row.work_item_id, row.data["phase"]) == (
        "work_item.cancelled",
        item_id,
        "cancelled",
    )


def test_emit_without_an_item_filters_on_the_data(sessions):
    make_outbox(
        subscriber("trunk-only", URL, ["validation.repository.started"], item_types=["trunk"])
    ).attach(sessions)
    item_id = uuid.uuid4()
    with sessions() as session:
        outbox.emit(
            session,
            "validation.repository.started",
            item=None,
            data={"work_item_id": item_id, "item_type": "mr", "phase": "active", "project": "a"},
        )
        outbox.emit(
            session,
            "validation.repository.started",
            item=None,
            data={"work_item_id": item_id, "item_type": "trunk", "phase": "active", "project": "a"},
        )
        session.commit()
    (row,) = outbox_rows(sessions)
    assert row.data["item_type"] == "trunk"
    assert row.work_item_id == item_id
