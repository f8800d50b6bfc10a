"""An outage (the other side rate-limiting or unreachable) never fails an item (DDR-14)."""

from __future__ import annotations

import pytest
from harness import fast_config, item_row, running_manager, wait_until
from sample_type import SAMPLE_TYPE, SampleItem, create_item, decide

from workqueue.gitlab.errors import RetryableGitLabError
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.errors import is_outage
from workqueue.queue.models import DimensionStatus
from workqueue.queue.registry import TypeRegistry


def _registry(failures: list[Exception]) -> TypeRegistry:
    def step(context: ExecutionContext) -> None:
        if failures:
            raise failures.pop(0)
        context.set_dimension("needs_step", DimensionStatus.FALSE, variant=context.action.variant)

    registry = TypeRegistry()
    registry.register(SAMPLE_TYPE, model=SampleItem, decider=decide).add_executor("step", step)
    return registry


def test_outage_failures_back_off_beyond_max_attempts_and_the_item_finishes(sessions):
    # max_attempts is 3 in the fast config; GitLab stays unavailable for 6 tries.
    failures: list[Exception] = [
        RetryableGitLabError("503 Service Unavailable", status=503) for _ in range(6)
    ]
    with sessions() as session:
        item_id = create_item(session, ["a"])
        session.commit()
    with running_manager(sessions, _registry(failures), fast_config(max_attempts=3)):
        wait_until(lambda: not failures, timeout=30, what="six outage failures")
        wait_until(lambda: not item_row(sessions, item_id).actionable, timeout=30, what="idle")
    row = item_row(sessions, item_id)
    assert row.phase == "active"  # never failed
    assert (row.attempts, row.error) == (0, None)  # the success reset them


def test_other_failures_still_end_the_item_at_max_attempts(sessions):
    failures: list[Exception] = [
        RetryableGitLabError("500 Internal Server Error", status=500) for _ in range(6)
    ]
    with sessions() as session:
        item_id = create_item(session, ["a"])
        session.commit()
    with running_manager(sessions, _registry(failures), fast_config(max_attempts=3)):
        wait_until(lambda: item_row(sessions, item_id).phase == "failed", timeout=30, what="failed")
    row = item_row(sessions, item_id)
    assert row.attempts == 3
    assert len(failures) == 3  # three tries, then it stopped


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (RetryableGitLabError("429", status=429), True),
        (RetryableGitLabError("502", status=502), True),
        (RetryableGitLabError("503", status=503), True),
        (RetryableGitLabError("504", status=504), True),
        (RetryableGitLabError("408", status=408), True),
        (RetryableGitLabError("connection refused", status=None), True),
        (RetryableGitLabError("500", status=500), False),
        (RuntimeError("boom"), False),
        (type("Sneaky", (Exception,), {"outage": "yes"})(), False),  # only a real True counts
    ],
)
def test_what_counts_as_an_outage(error, outage):
    assert is_outage(error) is outage
