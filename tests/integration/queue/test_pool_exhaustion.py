"""A step that cannot get a pooled connection in time is not the item's fault."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa
from harness import fast_config, item_row
from sample_type import Behaviour, build_registry, create_item, executions

from workqueue.db.engine import build_sessions
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop


def test_pool_timeout_in_a_step_is_retried_without_counting_an_attempt(database_url, sessions):
    # A pool of one connection that gives up waiting for it quickly.
    tiny = sa.create_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    try:
        tiny_sessions = build_sessions(tiny)
        behaviour = Behaviour()
        loop = ItemLoop(
            sessions=tiny_sessions,
            registry=build_registry(behaviour),
            config=fast_config(item_deadline_seconds=30),
            audit=AuditLog(),
        )
        with sessions() as session:
            item_id = create_item(session, ["a"], notify=False)
            session.commit()
            (claim,) = lease_repository.claim_due_items(
                session, item_types=["sample"], limit=1, lease_seconds=30
            )
            session.commit()

        outcome: list[object] = []
        with tiny.connect() as holder:  # every connection of the pool is checked out
            worker = threading.Thread(
                target=lambda: outcome.append(
                    loop.run(claim, should_stop=lambda: False, lease_lost=lambda: False)
                )
            )
            worker.start()
            time.sleep(1.0)  # several pool timeouts
            attempts = holder.execute(
                sa.text("SELECT attempts FROM work_items WHERE id = :id"), {"id": item_id}
            ).scalar_one()
            assert attempts == 0
            assert worker.is_alive()  # still trying, not given up
        worker.join(30)
        assert [getattr(result, "outcome", result) for result in outcome] == [ClaimOutcome.IDLE]
        row = item_row(sessions, item_id)
        assert (row.attempts, row.error, row.actionable, row.lease_token) == (0, None, False, None)
        with sessions() as session:
            assert [variant for _, variant, _ in executions(session)] == ["a"]
    finally:
        tiny.dispose()
