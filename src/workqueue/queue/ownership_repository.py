"""SQL about who holds what: callers' and projects' live items, stored bytes,
submission rates, live keys.

Generic over item types: every type that creates items on behalf of callers
uses these for ownership (`live_key` holders) and for the limits of
`authorization.limits`. A caller is `(caller_issuer, limit_key)`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

# Namespaces of the two-key advisory locks that serialise one caller's (and
# one project's) item creations, so the live-item and stored-bytes limits are
# exact under concurrency, across replicas. Distinct from the types'
# submission namespaces; two-key locks never conflict with the engine's
# single-key per-item locks.
CALLER_LOCK_NAMESPACE = 0x63616C6C  # "call"
PROJECT_LOCK_NAMESPACE = 0x70726F6A  # "proj"
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


def count_submission(session: Session, caller_issuer: str, limit_key: str) -> RateWindow:
    """Count one submission in the caller's current fixed one-minute window.

    One upsert per submission; the caller's older windows are deleted in the
    same transaction, so each caller keeps at most one row.
    """
    row = session.execute(
        sa.text(
            "WITH now AS (SELECT clock_timestamp() AS at), "
            "counted AS ("
            "  INSERT INTO caller_submission_windows "
            "    (caller_issuer, limit_key, window_start, submissions) "
            "  SELECT :issuer, :key, date_trunc('minute', now.at), 1 FROM now "
            "  ON CONFLICT (caller_issuer, limit_key, window_start) "
            "  DO UPDATE SET submissions = caller_submission_windows.submissions + 1 "
            "  RETURNING submissions, window_start"
            ") "
            "SELECT counted.submissions, counted.window_start, now.at FROM counted, now"
        ),
        {"issuer": caller_issuer, "key": limit_key},
    ).one()
    session.execute(
        sa.text(
            "DELETE FROM caller_submission_windows WHERE caller_issuer = :issuer "
            "AND limit_key = :key AND window_start < :current"
        ),
        {"issuer": caller_issuer, "key": limit_key, "current": row.window_start},
    )
    return RateWindow(row.submissions, row.window_start + RATE_WINDOW, row.at)


def count_project_submission(session: Session, project_path: str) -> RateWindow:
    """Count one submission to `project_path` in its current fixed one-minute window
    (as `count_submission` does for callers)."""
    row = session.execute(
        sa.text(
            "WITH now AS (SELECT clock_timestamp() AS at), "
            "counted AS ("
            "  INSERT INTO project_submission_windows (project_path, window_start, submissions) "
            "  SELECT :project, date_trunc('minute', now.at), 1 FROM now "
            "  ON CONFLICT (project_path, window_start) "
            "  DO UPDATE SET submissions = project_submission_windows.submissions + 1 "
            "  RETURNING submissions, window_start"
            ") "
            "SELECT counted.submissions, counted.window_start, now.at FROM counted, now"
        ),
        {"project": project_path},
    ).one()
    session.execute(
        sa.text(
            "DELETE FROM project_submission_windows WHERE project_path = :project "
            "AND window_start < :current"
        ),
        {"project": project_path, "current": row.window_start},
    )
    return RateWindow(row.submissions, row.window_start + RATE_WINDOW, row.at)


def lock_project(session: Session, project_path: str) -> None:
    """Serialise the item creations of one project until the transaction ends.

    Taken before `lock_caller`, always: one order, so the two never deadlock.
    """
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:project))"),
        {"namespace": PROJECT_LOCK_NAMESPACE, "project": project_path},
    )


def lock_caller(session: Session, caller_issuer: str, limit_key: str) -> None:
    """Serialise one caller's item creations and content growth until the transaction ends."""
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:caller))"),
        {"namespace": CALLER_LOCK_NAMESPACE, "caller": f"{caller_issuer}\n{limit_key}"},
    )


def live_item_count(
    session: Session, caller_issuer: str, limit_key: str, *, other_than: uuid.UUID | None = None
) -> int:
    """How many active or failed items the caller holds (all types), `other_than` aside."""
    return int(
        session.execute(
            sa.text(
                "SELECT count(*) FROM work_items WHERE caller_issuer = :issuer "
                "AND limit_key = :key AND phase NOT IN ('completed', 'cancelled') "
                "AND id IS DISTINCT FROM :other"
            ),
            {"issuer": caller_issuer, "key": limit_key, "other": other_than},
        ).scalar_one()
    )


def project_live_item_count(
    session: Session, project_path: str, *, other_than: uuid.UUID | None = None
) -> int:
    """How many active or failed items of the project exist (all types and callers)."""
    return int(
        session.execute(
            sa.text(
                "SELECT count(*) FROM work_items WHERE project_path = :project "
                "AND phase NOT IN ('completed', 'cancelled') AND id IS DISTINCT FROM :other"
            ),
            {"project": project_path, "other": other_than},
        ).scalar_one()
    )


def stored_bytes(
    session: Session, caller_issuer: str, limit_key: str, *, other_than: uuid.UUID | None = None
) -> int:
    """Bytes of file contents the caller's items hold, live and finished, `other_than` aside."""
    return int(
        session.execute(
            sa.text(
                "SELECT coalesce(sum(content_bytes), 0) FROM work_items "
                "WHERE caller_issuer = :issuer AND limit_key = :key AND content_bytes > 0 "
                "AND id IS DISTINCT FROM :other"
            ),
            {"issuer": caller_issuer, "key": limit_key, "other": other_than},
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
