"""Deferrals end with the item: rows of items that left `active` hold no `pending_until`.

Otherwise every finished item (a merged MR keeps `needs_empty_check`
deferred) stays in `ix_work_item_statuses_pending_until` forever, and the
timer and the deferral wake-up walk millions of rows that can never be due.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import sqlalchemy as sa
from harness import fast_config
from sample_type import create_item

from workqueue.queue import enqueue, read_repository
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.processing import lease_repository, sweeps

_HOUR = timedelta(hours=1)


def _deferred_item(session) -> uuid.UUID:
    item_id = create_item(session, ["a"], notify=False)
    for status in (DimensionStatus.TRUE, DimensionStatus.FALSE):
        enqueue.upsert_dimension(
            session,
            item_id,
            DimensionUpdate(
                f"needs_{status.value}",
                status,
                pending_until=enqueue.database_now(session) + _HOUR,
            ),
        )
    return item_id


def _pending(session, item_id: uuid.UUID) -> list[str]:
    return [
        f"{row.dimension}/{row.variant}"
        for row in read_repository.dimensions_of(session, [item_id])[item_id]
        if row.pending_until is not None
    ]


def _fail(session, item_id: uuid.UUID) -> None:
    (claim,) = lease_repository.claim_due_items(
        session, item_types=["sample"], limit=1, lease_seconds=30, only_ids=[item_id]
    )
    config = fast_config()
    outcome = lease_repository.record_failure(
        session,
        claim,
        error="boom",
        permanent=True,
        max_attempts=config.max_attempts,
        backoff_initial_seconds=config.backoff_initial_seconds,
        backoff_max_seconds=config.backoff_max_seconds,
    )
    assert outcome is not None
    assert outcome.phase == Phase.FAILED


def test_leaving_active_clears_the_items_deferrals_whatever_sets_the_phase(sessions):
    with sessions() as session:
        cancelled, completed, failed, active = (_deferred_item(session) for _ in range(4))
        session.commit()
    with sessions() as session:
        enqueue.cancel_item(session, cancelled)
        # an executor or an event result ending the item (ORM write of the phase)
        item = read_repository.get_item(session, completed)
        assert item is not None
        item.phase = Phase.COMPLETED
        session.flush()
        _fail(session, failed)
        session.commit()
    with sessions() as session:
        assert _pending(session, cancelled) == []
        assert _pending(session, completed) == []
        assert _pending(session, failed) == []
        assert _pending(session, active) == ["needs_false/", "needs_true/"]
        # statuses stay: only the deferral ends
        rows = read_repository.dimensions_of(session, [completed])[completed]
        assert {(row.dimension, row.status) for row in rows} >= {
            ("needs_true", DimensionStatus.TRUE),
            ("needs_false", DimensionStatus.FALSE),
        }


def test_a_retried_item_starts_without_its_old_deferrals_and_can_defer_again(sessions):
    """Decision: a retry (or reactivating a cancelled item) is a fresh start, acted on now.

    The deferrals the item had when it left `active` are gone; its statuses
    remain, so a deferred `true` row is needed at once. A type that wants a
    later look defers again in that first step.
    """
    with sessions() as session:
        item_id = _deferred_item(session)
        session.commit()
    with sessions() as session:
        _fail(session, item_id)
        session.commit()
    with sessions() as session:
        enqueue.mark_actionable(session, item_id, "sample", reactivate=True)
        session.commit()
    with sessions() as session:
        item = read_repository.get_item(session, item_id)
        assert item is not None
        assert item.phase == Phase.ACTIVE
        assert item.actionable
        assert _pending(session, item_id) == []
        enqueue.upsert_dimension(
            session,
            item_id,
            DimensionUpdate(
                "needs_true",
                DimensionStatus.TRUE,
                pending_until=enqueue.database_now(session) + _HOUR,
            ),
        )
        session.commit()
    with sessions() as session:
        assert _pending(session, item_id) == ["needs_true/"]


def test_the_next_deferral_is_an_index_probe_that_skips_finished_items(sessions):
    with sessions() as session:
        session.execute(
            sa.text(
                "INSERT INTO work_items (id, item_type, caller_identity) "
                "SELECT gen_random_uuid(), 'sample', 'tests' FROM generate_series(1, 20000)"
            )
        )
        # rows written while the items were active; all but 20 items then finish
        session.execute(
            sa.text(
                "INSERT INTO work_item_statuses (work_item_id, dimension, status, pending_until) "
                "SELECT id, 'needs_empty_check', 'true', now() + interval '1 day' "
                "FROM work_items"
            )
        )
        session.execute(
            sa.text(
                "UPDATE work_items SET phase = 'completed' "
                "WHERE id NOT IN (SELECT id FROM work_items ORDER BY id LIMIT 20)"
            )
        )
        session.execute(sa.text("ANALYZE work_items, work_item_statuses"))
        session.commit()
    with sessions() as session:
        deferred = session.execute(
            sa.text("SELECT count(*) FROM work_item_statuses WHERE pending_until IS NOT NULL")
        ).scalar_one()
        assert deferred == 20  # the finished items' rows are not in the index any more
        plan = "\n".join(
            session.execute(
                sa.text(f"EXPLAIN (ANALYZE, COSTS OFF) {sweeps.NEXT_DEFERRAL_SQL}"),
                {"item_types": ["sample"]},
            ).scalars()
        )
        assert "ix_work_item_statuses_pending_until" in plan, plan
        assert "Seq Scan on work_item_statuses" not in plan, plan
        seconds = sweeps.seconds_until_due(session, ["sample"])
        assert seconds is not None
        assert 86000 < seconds <= 86400
