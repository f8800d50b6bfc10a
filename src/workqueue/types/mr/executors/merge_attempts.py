"""What `reconcile_mr` tried for the MR's current head, and when it may try again. Pure.

Stored on the item as `merge_attempts` (JSONB, migration 0019), always about one
head: a new head of the service's (new content, or a rebase it adopted) starts
afresh, so nothing learnt about an older commit holds the new one back.

* **Refusals.** GitLab refused the merge (or the train add) `refusals` times; the
  next try waits `refusal_delay`: 30 s doubling up to `merge_retry_max_seconds`
  (30, 60, 120, … 1800). Until `retry_at` no merge call is made, whatever wakes
  the item (events only make it look).
* **Rebase.** `rebase_requested`: the service asked GitLab to rebase this head;
  a head GitLab still shows after the rebase ran means it could not.
  `rebase_refused`: the new head the rebase left, when it does not carry exactly
  the submitted content (`own_content`): a `conflict`, never merged.
* **Merge train.** `in_train` while a car the service added is on the train;
  `train_drops` counts cars GitLab dropped. A dropped car is added once more,
  after a green pipeline other than the one shown when it was dropped
  (`dropped_pipeline`); a second drop ends the adding (`merge_refused`).
* **Merged results.** `merged_result`: a head pipeline (id, sha) whose merge
  commit was read and found to merge this head; commits never change, so it is
  read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

# Cars the service puts on a train for one head: the first, and one after a drop.
MAX_TRAIN_ADDS = 2


def refusal_delay(refusals: int, base: timedelta, cap: timedelta) -> timedelta:
    """How long after its `refusals`-th refusal (1, 2, …) the merge is tried again."""
    if refusals < 1:
        return timedelta(0)
    # The exponent is bounded so that a long history cannot overflow the multiplication.
    doubled: timedelta = base * (1 << min(refusals - 1, 32))
    return min(cap, doubled)


@dataclass(slots=True)
class MergeAttempts:
    head: str | None = None
    refusals: int = 0
    refusal: str | None = None  # GitLab's reason for the last refusal
    refused_at: datetime | None = None
    retry_at: datetime | None = None
    rebase_requested: bool = False
    # The head GitLab's rebase left that does not carry exactly the submitted content.
    rebase_refused: str | None = None
    in_train: bool = False
    train_drops: int = 0
    # (id, status) of the head pipeline when the car was found dropped.
    dropped_pipeline: tuple[int | None, str | None] | None = None
    merged_result: tuple[int, str] | None = None

    @classmethod
    def load(cls, stored: Mapping[str, Any] | None, head: str | None) -> MergeAttempts:
        """The attempts stored for `head`; fresh ones when they were for another head."""
        if not stored or stored.get("head") != head:
            return cls(head=head)
        dropped = stored.get("dropped_pipeline")
        merged = stored.get("merged_result")
        return cls(
            head=head,
            refusals=int(stored.get("refusals") or 0),
            refusal=stored.get("refusal"),
            refused_at=_time(stored.get("refused_at")),
            retry_at=_time(stored.get("retry_at")),
            rebase_requested=bool(stored.get("rebase_requested")),
            rebase_refused=stored.get("rebase_refused"),
            in_train=bool(stored.get("in_train")),
            train_drops=int(stored.get("train_drops") or 0),
            dropped_pipeline=(dropped[0], dropped[1]) if dropped else None,
            merged_result=(int(merged[0]), str(merged[1])) if merged else None,
        )

    def stored(self) -> dict[str, Any]:
        """The column's value (JSON: times as ISO 8601)."""
        value = asdict(self)
        for name in ("refused_at", "retry_at"):
            moment = value[name]
            value[name] = moment.isoformat() if moment is not None else None
        for name in ("dropped_pipeline", "merged_result"):
            pair = value[name]
            value[name] = list(pair) if pair is not None else None
        return value

    def refused(self, reason: str, now: datetime, base: timedelta, cap: timedelta) -> timedelta:
        """Record one more refusal; returns how long until the next try."""
        self.refusals += 1
        self.refusal = reason
        self.refused_at = now
        delay = refusal_delay(self.refusals, base, cap)
        self.retry_at = now + delay
        return delay

    def wait_left(self, now: datetime) -> timedelta | None:
        """How long the backoff still holds merge calls back; None when it does not."""
        if self.retry_at is None or now >= self.retry_at:
            return None
        return self.retry_at - now

    def dropped(self, pipeline_id: int | None, pipeline_status: str | None) -> None:
        """GitLab dropped the car the service added."""
        self.in_train = False
        self.train_drops += 1
        self.dropped_pipeline = (pipeline_id, pipeline_status)

    def may_add_to_train(self, pipeline_id: int | None, pipeline_status: str | None) -> bool:
        """Whether a car may be added now, given the head pipeline GitLab shows."""
        if self.train_drops >= MAX_TRAIN_ADDS:
            return False
        if self.train_drops == 0:
            return True
        # A green pipeline other than the one shown when the car was dropped.
        return pipeline_status == "success" and self.dropped_pipeline != (pipeline_id, "success")


def _time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
