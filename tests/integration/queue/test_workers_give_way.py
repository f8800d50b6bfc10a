"""Workers give way to a request path that reports falling behind, and never stop."""

from __future__ import annotations

import time

from harness import running_manager, settled, wait_until
from sample_type import Behaviour, build_registry, create_item

from workqueue.observability.service_metrics import ServiceMetrics
from workqueue.queue.processing.give_way import MAX_WAIT_PER_BATCH_SECONDS


def _step_one(sessions, request_lag, observer=None) -> tuple[float, Behaviour]:
    behaviour = Behaviour()
    with running_manager(
        sessions, build_registry(behaviour), request_lag=request_lag, observer=observer
    ) as manager:
        with sessions() as session:
            item_id = create_item(session, ["x"], notify=False)
            session.commit()
        started = time.monotonic()
        manager.notify(item_id)
        wait_until(lambda: behaviour.calls[(item_id, "x")] == 1, what="the step")
        elapsed = time.monotonic() - started
        wait_until(lambda: settled(sessions), what="settle")
    return elapsed, behaviour


def test_a_late_request_path_delays_each_batch_by_at_most_the_bound(sessions, engine):
    metrics = ServiceMetrics(engine)
    elapsed, _ = _step_one(sessions, lambda: 10.0, metrics)  # the loop never catches up
    assert MAX_WAIT_PER_BATCH_SECONDS * 0.9 <= elapsed < MAX_WAIT_PER_BATCH_SECONDS + 5
    # Operators see it: the seconds waited, and the batch that went overdue.
    sample = metrics.registry.get_sample_value
    assert sample("workqueue_give_way_seconds_total") >= MAX_WAIT_PER_BATCH_SECONDS * 0.9
    assert sample("workqueue_give_way_batches_total", {"start": "overdue"}) == 1


def test_a_request_path_that_keeps_up_is_asked_once_per_batch(sessions):
    asked = []

    def keeping_up() -> float:
        asked.append(time.monotonic())
        return 0.0

    _step_one(sessions, keeping_up)
    assert len(asked) >= 1  # asked before the batch, and (pure rules) no wait followed
