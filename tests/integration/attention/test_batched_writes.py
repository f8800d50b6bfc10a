"""The reconciler writes a page's memberships in a few statements, with the row path's results.

A service meeting an old database adds thousands of members in its first pass;
row by row that cost about ten round trips per member (60 members/s at 1.1M
items). These tests pin what the batch must keep: every change and its audit
entry, prunes and re-adds next to adds, rows deleted meanwhile, the items'
locks, and the row path as the fallback when one row breaks the batch.
"""

from __future__ import annotations

import json
import threading
import uuid

import psycopg
import sqlalchemy as sa
from attention_support import FakeClock, create_mr, drain, members, reconciler, set_phase
from sqlalchemy import event

from workqueue.attention import repository, writer
from workqueue.attention.config import QueueRule
from workqueue.queue import enqueue

RULES = [
    QueueRule(name="sticky", match={"phase": ["failed"]}),
    QueueRule(name="pruned", match={"phase": ["failed"]}, prune=True),
]
RULES_NAMES = [rule.name for rule in RULES]


def _queue_ids(sessions) -> list[int]:
    with sessions() as session:
        return [queue.id for queue in repository.served_queues(session) if queue.enabled]


def test_a_page_of_new_members_costs_a_few_statements_not_a_few_per_item(sessions, caplog):
    caplog.set_level("INFO", logger="workqueue.audit")
    with sessions() as session:
        items = {create_mr(session, "p", phase="failed") for _ in range(120)}
        session.commit()
    clock = FakeClock()
    attention = reconciler(sessions, RULES, clock=clock)
    attention.apply_rules()
    statements: list[str] = []
    engine = sessions.kw["bind"]

    def count(_connection, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        attention.item_changed(next(iter(items)), "p")
        drain(attention, clock)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert members(sessions, "sticky") == members(sessions, "pruned") == items
    # Row by row this was about seven statements per item (840 and more).
    assert len(statements) < 60, len(statements)
    added = [
        json.loads(record.getMessage().partition(" ")[2])
        for record in caplog.records
        if "attention_added" in record.getMessage()
    ]
    assert sorted((entry["work_item_id"], entry["after"]["queue"]) for entry in added) == sorted(
        (str(item), queue) for item in items for queue in RULES_NAMES
    )


def test_one_batch_adds_prunes_and_re_adds_and_skips_rows_deleted_meanwhile(sessions):
    with sessions() as session:
        to_add = create_mr(session, "p", phase="failed")
        to_prune = create_mr(session, "p", phase="failed")
        to_delete = create_mr(session, "p", phase="failed")
        session.commit()
    queue_ids = _queue_ids_after_sync(sessions)
    with sessions() as session:
        queues = repository.served_queues(session)
        pruned_queue = next(queue for queue in queues if queue.name == "pruned")
        repository.add_member(session, pruned_queue.id, to_prune, repository.RULE_ACTOR)
        set_phase(session, to_prune, "active")
        session.commit()
    deleted_by_then: list[uuid.UUID] = []

    def delete_once(item_id: uuid.UUID) -> None:
        # Between the page's read and the row's write, another transaction deletes it.
        if item_id == to_delete and not deleted_by_then:
            with sessions() as other:
                other.execute(sa.text("DELETE FROM work_items WHERE id = :id"), {"id": item_id})
                other.commit()
            deleted_by_then.append(item_id)

    with sessions() as session:
        outcome = writer.reconcile_items(
            session,
            reconciler(sessions, RULES).readers,
            queue_ids,
            [to_add, to_prune, to_delete],
            check_row=delete_once,
        )
        session.commit()
    assert deleted_by_then == [to_delete]
    assert outcome.failed == []
    assert members(sessions, "sticky") == {to_add}
    assert members(sessions, "pruned") == {to_add}
    kinds = sorted((entry.event_type, entry.work_item_id) for entry in outcome.audit)
    assert kinds == sorted(
        [
            ("attention_added", to_add),
            ("attention_added", to_add),
            ("attention_removed", to_prune),
        ]
    )
    assert outcome.written == 3


def _queue_ids_after_sync(sessions) -> list[int]:
    attention = reconciler(sessions, RULES)
    attention.apply_rules()
    return _queue_ids(sessions)


def test_the_batch_waits_for_an_items_lock_like_the_row_path(sessions, conninfo):
    with sessions() as session:
        items = [create_mr(session, "p", phase="failed") for _ in range(5)]
        session.commit()
    queue_ids = _queue_ids_after_sync(sessions)
    held = sorted(items, key=enqueue.advisory_lock_key)[2]
    with psycopg.connect(conninfo) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (enqueue.advisory_lock_key(held),))
        finished = threading.Event()

        def run() -> None:
            with sessions() as session:
                writer.reconcile_items(
                    session, reconciler(sessions, RULES).readers, queue_ids, items
                )
                session.commit()
            finished.set()

        worker = threading.Thread(target=run)
        worker.start()
        assert not finished.wait(1.0)  # an engine step holds one item: the page waits
        assert members(sessions, "sticky") == set()
        holder.execute("ROLLBACK")
        worker.join(10)
    assert finished.is_set()
    assert members(sessions, "sticky") == set(items)


def test_a_row_that_breaks_the_batch_fails_alone(sessions):
    with sessions() as session:
        items = [create_mr(session, "p", phase="failed") for _ in range(6)]
        session.commit()
    queue_ids = _queue_ids_after_sync(sessions)
    bad = items[3]
    calls: list[uuid.UUID] = []

    def break_one(item_id: uuid.UUID) -> None:
        calls.append(item_id)
        if item_id == bad:
            raise RuntimeError("detail reader broke")

    with sessions() as session:
        outcome = writer.reconcile_items(
            session, reconciler(sessions, RULES).readers, queue_ids, items, check_row=break_one
        )
        session.commit()
    assert outcome.failed == [bad]
    assert members(sessions, "sticky") == set(items) - {bad}
    assert {entry.work_item_id for entry in outcome.audit} == set(items) - {bad}
    # The batch stopped at the bad row; then every row was tried on its own.
    assert calls.count(bad) == 2


def test_a_scope_page_is_one_range_read_of_the_project_index(sessions):
    with sessions() as session:
        session.execute(
            sa.text(
                "INSERT INTO work_items (id, item_type, phase, caller_identity, project_path) "
                "SELECT gen_random_uuid(), 'mr', 'completed', 'tests', 'group-' || (n % 40) "
                "FROM generate_series(1, 20000) AS n"
            )
        )
        session.execute(sa.text("ANALYZE work_items"))
        ids = sorted(
            session.scalars(
                sa.text("SELECT id FROM work_items WHERE project_path = 'group-7'")
            ).all()
        )
        statement = repository.scope_page_statement(
            "group-7", after=ids[10], upper=ids[-1], limit=101
        )
        compiled = statement.compile(
            dialect=session.get_bind().dialect, compile_kwargs={"literal_binds": True}
        )
        plan = "\n".join(session.scalars(sa.text(f"EXPLAIN {compiled}")).all())
        session.rollback()
    # The page reads the project's index from `after` and stops after the limit: no
    # intersection with the whole id range, no sort.
    assert "ix_work_items_project_path_id" in plan, plan
    assert "Sort" not in plan, plan
    assert "Bitmap" not in plan, plan
