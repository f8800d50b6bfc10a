"""The dispatcher's decision, case by case (no threads, no database)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from workqueue.queue.processing.dispatch_plan import DispatchState, plan_dispatch, step_batch_size

A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))
NOW = 1000.0
SWEEP = 300.0

# Nothing due, nothing requested, room for 8 claims, the sweep far away.
QUIET = DispatchState(
    capacity=8,
    held=frozenset(),
    running=0,
    requested=frozenset(),
    backlog=False,
    refill_batch=4,
    sweep_at=NOW + 100,
    due_at=None,
    timer_stale=False,
)


def plan(**changes: object):  # type: ignore[no-untyped-def]
    return plan_dispatch(replace(QUIET, **changes), NOW, sweep_interval=SWEEP)


def test_a_quiet_manager_has_nothing_to_do_and_issues_no_sql():
    result = plan()
    assert not result.has_work
    assert (result.sweep, result.timer_fired, result.claim_any) == (False, False, False)
    assert result.next_sweep_at == NOW + 100


@pytest.mark.parametrize(
    ("changes", "sweep", "timer_fired", "claim_any", "recompute_timer"),
    [
        # The safety sweep is due (also at startup: sweep_at = 0).
        ({"sweep_at": 0.0}, True, False, True, True),
        ({"sweep_at": NOW}, True, False, True, True),
        # The timer fired: due work is claimed and the due time re-read.
        ({"due_at": NOW - 0.1}, False, True, True, True),
        ({"due_at": NOW + 5}, False, False, False, False),
        # Something stale (a woken item could not be claimed): only re-read the due time.
        ({"timer_stale": True}, False, False, False, True),
        # A backlog with enough free slots: refill.
        ({"backlog": True}, False, False, True, False),
        # A backlog, few free slots, but workers still have queued claims: wait.
        (
            {
                "backlog": True,
                "held": frozenset({A, B, C, uuid.uuid4(), uuid.uuid4()}),
                "running": 2,
            },
            False,
            False,
            False,
            False,
        ),
        # A backlog, few free slots, and nothing queued: refill now.
        (
            {
                "backlog": True,
                "held": frozenset({A, B, C, uuid.uuid4(), uuid.uuid4()}),
                "running": 5,
            },
            False,
            False,
            True,
            False,
        ),
        # A backlog at full capacity: nothing to claim into.
        (
            {"backlog": True, "capacity": 2, "held": frozenset({A, B}), "running": 2},
            False,
            False,
            False,
            False,
        ),
    ],
)
def test_what_a_round_claims_and_looks_up(changes, sweep, timer_fired, claim_any, recompute_timer):
    result = plan(**changes)
    assert (result.sweep, result.timer_fired, result.claim_any, result.recompute_timer) == (
        sweep,
        timer_fired,
        claim_any,
        recompute_timer,
    )


def test_a_sweep_schedules_the_next_one_and_a_fired_timer_is_cleared():
    result = plan(sweep_at=0.0, due_at=NOW - 1)
    assert result.next_sweep_at == NOW + SWEEP
    assert result.next_due_at is None
    later = plan(due_at=NOW + 7)
    assert later.next_due_at == NOW + 7


def test_requested_items_are_claimed_by_id_and_held_ones_kept_for_a_rerun():
    result = plan(requested=frozenset({A, B}), held=frozenset({B}), running=1)
    assert result.requested == {A}
    assert result.rerun == {B}  # woken while this manager holds it: look again when released
    assert result.requests_taken
    assert result.has_work


def test_at_capacity_requests_wait_for_a_finishing_worker():
    """They must not be dropped: nothing else would wake them (the stranded-item bug)."""
    result = plan(capacity=1, held=frozenset({C}), running=1, requested=frozenset({A}))
    assert result.free == 0
    assert result.requested == frozenset()
    assert not result.requests_taken  # the manager keeps them in its requested set
    assert not result.has_work


FAST_ITEM = 0.001  # seconds per item, well within a 0.05 s step budget


def batch(**changes: float) -> int:
    arguments = {
        "queued": 40,
        "free_workers": 4,
        "limit": 32,
        "seconds_per_item": FAST_ITEM,
        "step_seconds": 0.05,
        **changes,
    }
    return step_batch_size(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("queued", "free_workers", "expected"),
    [
        (2, 4, 1),  # a short queue: every claim gets a worker of its own
        (40, 4, 10),  # a fair share among the free workers
        (40, 1, 32),  # the others are busy: one worker takes up to the limit
        (200, 4, 32),
        (1, 0, 1),  # counted while its own batch is being taken
    ],
)
def test_a_free_worker_takes_its_share_of_the_queue_among_the_free_workers(
    queued, free_workers, expected
):
    assert batch(queued=queued, free_workers=free_workers) == expected


def test_items_slower_than_a_steps_budget_go_one_at_a_time():
    assert batch(queued=40, free_workers=1, seconds_per_item=0.05) == 1
    assert batch(queued=40, free_workers=1, seconds_per_item=0.049) == 32
