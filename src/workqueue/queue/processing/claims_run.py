"""The bookkeeping of one worker's claims while it steps them: how each ended, when
each is due again, and failures still to be recorded after a discarded step."""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.item_step import StepState


@dataclass(frozen=True)
class OwedFailure:
    """An action's failure that a discarded step had recorded: it must be recorded again
    before the claim steps again, or the item would be called at once, whatever
    `Retry-After` or backoff its failure asked for."""

    claim: lease_repository.Claim
    state: StepState
    error: Exception


class DatabaseUnavailableError(Exception):
    """The database could not be reached during a step, or the step lost a lock race
    (a deadlock): nothing of it was committed, and it is not the actions' fault.

    `owed` lists the failures the step had recorded before it was discarded.
    """

    def __init__(self, owed: Sequence[OwedFailure] = ()) -> None:
        super().__init__(f"{len(owed)} failures to record again")
        self.owed = list(owed)


class ClaimOutcome(enum.StrEnum):
    """How processing of one claim ended."""

    IDLE = "idle"  # nothing left to do; actionable=false, lease released
    FAILED = "failed"  # an action failed; backoff or phase=failed recorded, lease released
    RELEASED = "released"  # stopped early (shutdown or deadline); still actionable
    LOST = "lost"  # the lease was taken over; nothing of this step was written
    GONE = "gone"  # the item no longer exists


@dataclass(frozen=True)
class ClaimResult:
    outcome: ClaimOutcome
    # Seconds until something this claim scheduled (a backoff, a deferral)
    # becomes due, so the manager can set its timer without a query.
    wake_in_seconds: float | None = None


class Ending(enum.Enum):
    CONTINUE = enum.auto()
    IDLE = enum.auto()
    FAILED = enum.auto()
    LOST = enum.auto()
    GONE = enum.auto()
    RELEASED = enum.auto()  # the failure could not be recorded; the lease runs out


@dataclass
class ClaimsRun:
    """The claims one worker processes until each ends, and how each ended."""

    claims: Sequence[lease_repository.Claim]
    deadline_seconds: float  # per claim, from its first step (DDR-44)
    on_end: Callable[[lease_repository.Claim, ClaimResult], None] | None = None
    pending: list[lease_repository.Claim] = field(init=False)
    batch_limit: int = field(init=False)
    results: dict[uuid.UUID, ClaimResult] = field(default_factory=dict)
    wake_at: dict[uuid.UUID, float] = field(default_factory=dict)  # monotonic, per item
    first_step_at: dict[uuid.UUID, float] = field(default_factory=dict)  # monotonic
    owed: dict[uuid.UUID, OwedFailure] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pending = list(self.claims)
        self.batch_limit = len(self.pending)

    def out_of_time(self, claim: lease_repository.Claim) -> bool:
        started = self.first_step_at.get(claim.item_id)
        return started is not None and time.monotonic() - started >= self.deadline_seconds

    def owe(self, failures: Sequence[OwedFailure]) -> None:
        for failure in failures:
            if failure.claim in self.pending:
                self.owed[failure.claim.item_id] = failure

    def end(self, claim: lease_repository.Claim, outcome: ClaimOutcome) -> None:
        self.pending.remove(claim)
        self.owed.pop(claim.item_id, None)
        due = self.wake_at.get(claim.item_id)
        remaining = None if due is None else max(due - time.monotonic(), 0.0)
        result = self.results[claim.item_id] = ClaimResult(outcome, remaining)
        if self.on_end is not None:
            self.on_end(claim, result)

    def record(self, steps: dict[uuid.UUID, Step]) -> None:
        """Take in one step's results.

        Claims the step did not reach go first next time and those that
        stepped and continue go last, so one item with many slow steps
        cannot keep the others of its batch waiting.
        """
        reached = []
        for claim in list(self.pending):
            step = steps.get(claim.item_id)
            if step is None:
                continue
            self.first_step_at.setdefault(claim.item_id, step.started)
            if step.state.wake_in_seconds is not None:
                # Relative to the step's start; re-based to the claim's end.
                due = step.started + step.state.wake_in_seconds
                self.wake_at[claim.item_id] = min(self.wake_at.get(claim.item_id, due), due)
            if step.ending is not Ending.CONTINUE:
                self.end(claim, ClaimOutcome[step.ending.name])
            else:
                reached.append(claim)
        self.pending = [claim for claim in self.pending if claim not in reached] + reached


@dataclass
class Step:
    """One finished step of one claim, as the claim's loop needs it."""

    ending: Ending
    state: StepState
    started: float  # monotonic
