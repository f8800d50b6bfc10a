"""SQL about who holds what: callers' live items, their submission rate, live keys.

Generic over item types: every type that creates items on behalf of callers
uses these for ownership (`live_key` holders) and for the per-caller limits
of `authorization.limits`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

# Namespace of the two-key advisory locks that serialise one caller's item
# creations (so the live-item limit is exact under concurrency). Distinct
# from the types' submission namespaces; two-key locks never conflict with the
# engine's single-key per-item locks.
CALLER_LOCK_NAMESPACE = 0x63616C6C  # "call"
RATE_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class RateWindow:
    """The caller's current one-minute window after counting one more submission."""

    submissions: int
    ends_at: datetime
    now: datetime

    def seconds_left(self) -> int:
        """Whole seconds until the window ends (at least 1): the `Retry-After` value."""
        return max(1, int((self.ends_at - self.now).total_seconds() + 0.999))


def count_submission(session: Session, caller_issuer: str, caller_identity: str) -> RateWindow:
    """Count one submission in the caller's current fixed one-minute window.

    One upsert per submission; the caller's older windows are deleted in the
    same transaction, so each caller keeps at most one row.
    """
    row = session.execute(
        sa.text(
            "WITH now AS (SELECT clock_timestamp() AS at), "
            "counted AS ("
            "  INSERT INTO caller_submission_windows "
            "    (caller_issuer, caller_identity, window_start, submissions) "
            "  SELECT :issuer, :identity, date_trunc('minute', now.at), 1 FROM now "
            "  ON CONFLICT (caller_issuer, caller_identity, window_start) "
            "  DO UPDATE SET submissions = caller_submission_windows.submissions + 1 "
            "  RETURNING submissions, window_start"
            ") "
            "SELECT counted.submissions, counted.window_start, now.at FROM counted, now"
        ),
        {"issuer": caller_issuer, "identity": caller_identity},
    ).one()
    session.execute(
        sa.text(
            "DELETE FROM caller_submission_windows WHERE caller_issuer = :issuer "
            "AND caller_identity = :identity AND window_start < :current"
        ),
        {"issuer": caller_issuer, "identity": caller_identity, "current": row.window_start},
    )
    return RateWindow(row.submissions, row.window_start + RATE_WINDOW, row.at)


def lock_caller(session: Session, caller_issuer: str, caller_identity: str) -> None:
    """Serialise one caller's item creations until the transaction ends."""
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:caller))"),
        {"namespace": CALLER_LOCK_NAMESPACE, "caller": f"{caller_issuer}\n{caller_identity}"},
    )


def live_item_count(session: Session, caller_issuer: str, caller_identity: str) -> int:
    """How many active or failed items the caller holds (all types)."""
    return int(
        session.execute(
            sa.text(
                "SELECT count(*) FROM work_items WHERE caller_issuer = :issuer "
                "AND caller_identity = :identity AND phase NOT IN ('completed', 'cancelled')"
            ),
            {"issuer": caller_issuer, "identity": caller_identity},
        ).scalar_one()
    )


def live_key_holder(session: Session, live_key: str, *, other_than: uuid.UUID) -> uuid.UUID | None:
    """The live item holding `live_key`, if it is not `other_than`."""
    holder = session.execute(
        sa.text(
            "SELECT id FROM work_items WHERE live_key = :key AND id <> :id "
            "AND phase NOT IN ('completed', 'cancelled')"
        ),
        {"key": live_key, "id": other_than},
    ).scalar_one_or_none()
    return None if holder is None else uuid.UUID(str(holder))
