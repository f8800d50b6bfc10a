"""What the dispatcher should do next, as a pure function of what it knows.

The dispatcher thread (`processing.ProcessingManager`) wakes for many
reasons: a local or remote wake-up, the timer, a finished worker, the safety
sweep. Each time it snapshots its state under its lock, asks `plan_dispatch`
what to do, applies the plan's bookkeeping, and then runs the plan's SQL
outside the lock. Keeping the decision pure lets every case be tested in a
table instead of with threads. The same goes for how many queued claims a
free worker steps together (`step_batch_size`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DispatchState:
    """The dispatcher's view at one instant (monotonic seconds)."""

    capacity: int  # claims this manager may hold (running + queued)
    held: frozenset[uuid.UUID]  # claimed by this manager: queued or running
    running: int
    requested: frozenset[uuid.UUID]  # woken, not yet tried
    backlog: bool  # the last general claim came back full: more is waiting
    refill_batch: int  # claim again once this many slots are free
    sweep_at: float
    due_at: float | None  # earliest known due work, None if none
    timer_stale: bool  # the due time must be re-read from the database


@dataclass(frozen=True, slots=True)
class DispatchPlan:
    """One dispatcher round: what to claim and look up, and the bookkeeping to apply."""

    free: int
    sweep: bool  # run the safety sweep (wake-ups for events and deferrals)
    timer_fired: bool  # due work (deferrals, backoffs) came due: wake deferrals
    claim_any: bool  # claim due items in general, not only the requested ones
    recompute_timer: bool  # re-read the due time from the database
    requested: frozenset[uuid.UUID]  # claim exactly these first
    rerun: frozenset[uuid.UUID]  # woken while held: look again once released
    requests_taken: bool  # the requested set was consumed (clear it)
    next_sweep_at: float
    next_due_at: float | None

    @property
    def has_work(self) -> bool:
        return self.claim_any or bool(self.requested) or self.recompute_timer


def plan_dispatch(state: DispatchState, now: float, *, sweep_interval: float) -> DispatchPlan:
    """Decide one dispatcher round."""
    free = state.capacity - len(state.held)
    queued = len(state.held) - state.running
    sweep = now >= state.sweep_at
    timer_fired = state.due_at is not None and now >= state.due_at
    # Refill the claim queue in batches rather than one claim per finished
    # item, or at once when the workers have nothing queued.
    refill = state.backlog and (free >= state.refill_batch or queued == 0)
    requested: frozenset[uuid.UUID] = frozenset()
    rerun: frozenset[uuid.UUID] = frozenset()
    if free > 0:
        requested = state.requested - state.held
        rerun = state.requested & state.held
    return DispatchPlan(
        free=free,
        sweep=sweep,
        timer_fired=timer_fired,
        claim_any=sweep or timer_fired or (refill and free > 0),
        recompute_timer=sweep or timer_fired or state.timer_stale,
        requested=requested,
        rerun=rerun,
        # At capacity the requests wait: a finishing worker wakes the dispatcher.
        requests_taken=free > 0,
        next_sweep_at=now + sweep_interval if sweep else state.sweep_at,
        next_due_at=None if timer_fired else state.due_at,
    )


def step_batch_size(
    *,
    queued: int,
    free_workers: int,
    limit: int,
    seconds_per_item: float,
    step_seconds: float,
) -> int:
    """How many queued claims a worker that is free now takes into one batch.

    Its fair share of the queue among the workers free to take from it
    (`queued` counts the claim it takes first; busy workers have their
    batches already), at most `limit` (`processing.step_batch_size`).
    Dividing by every worker instead let batches shrink as the queue
    drained: steps of 7 items on average where 30 were queued per worker.
    Items that recently each outlasted a step's time budget (`step_seconds`)
    go one at a time: they would end their transactions one by one anyway,
    and a batch must not hold claims that another worker, free a moment
    later, could be running.
    """
    if seconds_per_item >= step_seconds:
        return 1
    share = -(-queued // max(free_workers, 1))  # ceiling division
    return max(1, min(limit, share))
