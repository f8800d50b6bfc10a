"""The `trunk` decider and the pure rules of the process stage (the seed's decision tree).

Nothing here does I/O. `decide_trunk` names the next action from the item's
state and dimensions; `plan_process` is the decision tree the `process`
executor follows once it has read the queue row; `choose_strategy` turns an
ancestry answer into a build strategy. All three are table-tested.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from workqueue.queue import Action, Dimensions
from workqueue.types.trunk.models import (
    TERMINAL_STATES,
    BuildStrategy,
    TrunkDimension,
    TrunkState,
    TrunkWorkItem,
)

PROCESS = "process"
RECORD = "record"


def decide_trunk(item: TrunkWorkItem, dimensions: Dimensions) -> Action | None:
    """accepted → process; processing without a pipeline → process (build it);
    processing with a pipeline → record when its result is due; else nothing."""
    if item.state is TrunkState.ACCEPTED or (
        item.state is TrunkState.PROCESSING and item.pipeline_id is None
    ):
        return Action(PROCESS) if dimensions.needs(TrunkDimension.NEEDS_PROCESS) else None
    if item.state is TrunkState.PROCESSING and dimensions.needs(TrunkDimension.NEEDS_RECORD):
        return Action(RECORD)
    return None


class Step(enum.StrEnum):
    """What the process stage does with one head (seed steps 2 to 7)."""

    NOTHING = "nothing"  # terminal: acknowledge
    BUILD = "build"  # processing: make sure its one pipeline exists (re-publish)
    SUPERSEDE = "supersede"  # a newer head will be validated instead; no slot used
    WAIT = "wait"  # newest, but every slot is taken: hold, burn no attempt
    ADMIT = "admit"  # take a slot, fix the strategy, announce, then build


@dataclass(frozen=True, slots=True)
class QueueView:
    """The queue row as the process stage reads it, plus the configured cap."""

    in_flight: int
    latest_sequence: int
    max_concurrent: int
    serial_until_green: bool

    @property
    def window(self) -> int:
        """How many of the newest heads are kept and may build at once (rule 3 and 4)."""
        return 1 if self.serial_until_green else self.max_concurrent


def plan_process(state: TrunkState, sequence: int, queue: QueueView) -> Step:
    """The decision tree, for a head of ingest order `sequence`.

    Coalescing runs before the gate, so an intermediate head is superseded on
    sight whether or not a slot is free. Sequences are dense per queue, so
    `latest_sequence - sequence` is exactly the number of newer heads.
    """
    if state in TERMINAL_STATES:
        return Step.NOTHING
    if state is TrunkState.PROCESSING:
        return Step.BUILD
    if queue.latest_sequence - sequence >= queue.window:
        return Step.SUPERSEDE
    if queue.in_flight >= queue.window:
        return Step.WAIT
    return Step.ADMIT


class Ancestry(enum.StrEnum):
    """What GitLab said about last green → this head."""

    ANCESTOR = "ancestor"  # merge_base(last green, sha) == last green: a fast-forward
    NOT_ANCESTOR = "not_ancestor"  # history was rewritten (force-push, rebase)
    UNKNOWN = "unknown"  # a commit is not on the project (404/unknown ref)


@dataclass(frozen=True, slots=True)
class Strategy:
    build_strategy: BuildStrategy
    base_sha: str | None
    rewrite: bool = False  # rule 4: admit one at a time until a full build is green
    warning: str | None = None


def choose_strategy(last_green_sha: str | None, ancestry: Ancestry | None) -> Strategy:
    """No last green → full; ancestor → incremental on it; rewrite or unknown → full."""
    if last_green_sha is None or ancestry is None:
        return Strategy(BuildStrategy.FULL, None)
    if ancestry is Ancestry.ANCESTOR:
        return Strategy(BuildStrategy.INCREMENTAL, last_green_sha)
    if ancestry is Ancestry.NOT_ANCESTOR:
        return Strategy(BuildStrategy.FULL, None, rewrite=True)
    return Strategy(
        BuildStrategy.FULL,
        None,
        warning=f"ancestry of last green {last_green_sha} unknown: building everything",
    )


def ancestry_from_merge_base(last_green_sha: str, merge_base_sha: str) -> Ancestry:
    return Ancestry.ANCESTOR if merge_base_sha == last_green_sha else Ancestry.NOT_ANCESTOR


# Pipeline statuses GitLab reports once a pipeline will not change any more.
PIPELINE_SUCCESS = "success"
PIPELINE_FAILED = frozenset({"failed"})
PIPELINE_CANCELED = frozenset({"canceled", "skipped"})


def outcome_of(pipeline_status: str) -> TrunkState | None:
    """The terminal state a pipeline status means, or None while it may still change."""
    if pipeline_status == PIPELINE_SUCCESS:
        return TrunkState.SUCCEEDED
    if pipeline_status in PIPELINE_FAILED:
        return TrunkState.FAILED
    if pipeline_status in PIPELINE_CANCELED:
        return TrunkState.CANCELLED
    return None
