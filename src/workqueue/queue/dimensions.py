"""Reading `needs_*` dimensions the way the decider must (DDR-45/48).

Pure: the caller supplies the rows and the current time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from workqueue.queue.models import DimensionStatus


@dataclass(frozen=True, slots=True)
class DimensionState:
    """One stored dimension row, detached from the session."""

    dimension: str
    variant: str
    status: DimensionStatus
    pending_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class DimensionUpdate:
    """A requested upsert of one dimension row (from an executor or an event)."""

    dimension: str
    status: DimensionStatus
    variant: str = ""
    pending_until: datetime | None = None


class Dimensions(Mapping[tuple[str, str], DimensionState]):
    """The dimensions of one item as of `now`.

    * an absent row means the action is needed;
    * `"false"` means handled;
    * a row whose `pending_until` is still in the future reads as handled
      until then (a deferral), whatever its status.
    """

    def __init__(self, rows: Iterable[DimensionState], now: datetime) -> None:
        self._rows = {(row.dimension, row.variant): row for row in rows}
        self.now = now

    def needs(self, dimension: str, variant: str = "") -> bool:
        row = self._rows.get((dimension, variant))
        if row is None:
            return True
        if row.pending_until is not None and row.pending_until > self.now:
            return False
        return row.status != DimensionStatus.FALSE

    def variants_needing(self, dimension: str) -> list[str]:
        """Variants of a dimension that have a row and currently need action, sorted."""
        return sorted(
            variant
            for (name, variant) in self._rows
            if name == dimension and self.needs(name, variant)
        )

    def with_updates(self, updates: Iterable[DimensionUpdate]) -> Dimensions:
        """This view with `updates` applied (what the rows hold after they are written)."""
        rows = dict(self._rows)
        for update in updates:
            rows[(update.dimension, update.variant)] = DimensionState(
                update.dimension, update.variant, update.status, update.pending_until
            )
        return Dimensions(rows.values(), self.now)

    def state_of(self, dimension: str, variant: str = "") -> dict[str, object] | None:
        """The stored row as a plain dict (for audit), or None when there is no row."""
        row = self._rows.get((dimension, variant))
        if row is None:
            return None
        return {"status": str(row.status), "pending_until": row.pending_until}

    def __getitem__(self, key: tuple[str, str]) -> DimensionState:
        return self._rows[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
