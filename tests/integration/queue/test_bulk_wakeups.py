"""Wake-ups at scale: many due deferrals or stranded events after downtime.

Every wake-up takes the item's advisory lock (DDR-34). Taking one per item in
a single transaction exhausts the shared lock table (max_locks_per_transaction
times max_connections plus some slack: 30,000 locks fit in the test cluster,
40,000 do not): "out of shared memory", and the sweep fails forever.
Wake-ups run in bounded batches, one transaction each.
"""

from __future__ import annotations

import sqlalchemy as sa

from workqueue.queue.processing import manager as processing

COUNT = 40_000


def _create_idle_items(session, *, deferred: bool, events: bool) -> None:
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, caller_identity, actionable) "
            "SELECT gen_random_uuid(), 'sample', 'tests', false FROM generate_series(1, :n)"
        ),
        {"n": COUNT},
    )
    if deferred:
        session.execute(
            sa.text(
                "INSERT INTO work_item_statuses "
                "  (work_item_id, dimension, variant, status, pending_until) "
                "SELECT id, 'needs_step', 'a', 'false', now() - interval '1 minute' "
                "FROM work_items"
            )
        )
    if events:
        session.execute(
            sa.text(
                "INSERT INTO pending_events (work_item_id, event_type, body) "
                "SELECT id, 'poke', '{}'::jsonb FROM work_items"
            )
        )
    # Statistics as a long-running database has them (a fresh table has none,
    # and the planner would take the 40,000 rows for one).
    session.execute(sa.text("ANALYZE work_items, work_item_statuses, pending_events"))


def test_sweep_wakes_40k_due_deferrals_and_events_in_bounded_batches(sessions):
    with sessions() as session:
        _create_idle_items(session, deferred=True, events=True)
        session.commit()

    woken = processing.run_wake_ups(sessions, ["sample"], events=True, deferrals=True)

    assert woken == 2 * COUNT  # each item once for its events, once for its deferral
    with sessions() as session:
        counts = session.execute(
            sa.text(
                "SELECT count(*) FILTER (WHERE actionable) AS actionable, "
                "  (SELECT count(*) FROM work_item_statuses WHERE pending_until IS NOT NULL) "
                "    AS deferred "
                "FROM work_items"
            )
        ).one()
    assert (counts.actionable, counts.deferred) == (COUNT, 0)


def test_wake_up_batches_stay_below_the_lock_table(sessions):
    with sessions() as session:
        _create_idle_items(session, deferred=True, events=False)
        session.commit()
    batches: list[int] = []

    woken = processing.run_wake_ups(
        sessions, ["sample"], events=False, deferrals=True, on_batch=batches.append
    )

    assert woken == COUNT
    assert max(batches) <= processing.WAKE_BATCH_SIZE
    assert sum(batches) == COUNT
