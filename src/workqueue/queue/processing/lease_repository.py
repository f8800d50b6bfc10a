"""The SQL of claims and leases: who may work on an item, and for how long.

A claim leases an item to one process for `lease_seconds` under a fresh
random token; the heartbeat extends the leases still held; every outcome
write is fenced on the token, so a holder that lost its lease (it stalled
past expiry and another replica took over) changes nothing. The database
clock is the only clock for leases. Nothing here commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue import pg_arrays
from workqueue.queue.enqueue import driver_connection
from workqueue.queue.models import Phase


@dataclass(frozen=True, slots=True)
class Claim:
    """A lease on one item, held by this process until released or lost."""

    item_id: uuid.UUID
    item_type: str
    lease_token: uuid.UUID


@dataclass(frozen=True, slots=True)
class FailureOutcome:
    attempts: int
    phase: Phase
    retry_in_seconds: float | None  # None when the item failed for good
    project_path: str | None = None  # for announcing a failure without loading the item


_CLAIM_SQL = """
WITH due AS (
    SELECT id FROM work_items
    WHERE actionable
      AND item_type = ANY(%(item_types)s::text[])
      AND (next_attempt_at IS NULL OR next_attempt_at <= now())
      AND (leased_until IS NULL OR leased_until < now())
      {only_ids}
      -- Never one this process holds already: a second claim of it would run
      -- beside the first (say, after heartbeats failed for a lease's length).
      AND NOT (id = ANY(%(held)s::uuid[]))
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE work_items AS item
SET leased_until = now() + make_interval(secs => %(lease_seconds)s),
    lease_token = gen_random_uuid()
FROM due
WHERE item.id = due.id
RETURNING item.id, item.item_type, item.lease_token
"""
_CLAIM_ANY = _CLAIM_SQL.format(only_ids="")
_CLAIM_AMONG = _CLAIM_SQL.format(only_ids="AND id = ANY(%(ids)s::uuid[])")


def claim_due_items(
    session: Session,
    *,
    item_types: Collection[str],
    limit: int,
    lease_seconds: float,
    only_ids: Collection[uuid.UUID] | None = None,
    held: Collection[uuid.UUID] = (),
) -> list[Claim]:
    """Lease up to `limit` due actionable items (optionally among `only_ids`), none of
    `held` (the caller's own claims)."""
    if limit <= 0 or not item_types:
        return []
    params: dict[str, Any] = {
        "item_types": pg_arrays.texts(item_types),
        "limit": limit,
        "lease_seconds": lease_seconds,
        "held": pg_arrays.uuids(held),
    }
    if only_ids is not None:
        params["ids"] = pg_arrays.uuids(only_ids)
    # To the driver: a claim returns a row per item, and SQLAlchemy's result
    # handling per row cost the dispatcher more than the statement.
    rows = (
        driver_connection(session)
        .execute(_CLAIM_ANY if only_ids is None else _CLAIM_AMONG, params)
        .fetchall()
    )
    return [Claim(item_id, item_type, token) for item_id, item_type, token in rows]


def extend_leases(
    session: Session, claims: Sequence[Claim], lease_seconds: float
) -> set[uuid.UUID]:
    """Heartbeat: extend every lease still held; returns the ids whose lease is still ours.

    Never waits on a row lock. A step holds its item's row for as long as its
    transaction runs (GitLab calls included); one blocked row must not hold up
    every other lease. Locked rows are skipped: the token read from the
    committed row says whether the lease is still ours, and the row is
    extended at the next beat after its lock is gone. Meanwhile nobody can
    claim it (claims skip locked rows too), and the step's own outcome write
    extends or clears the lease from the commit's clock (`continue_step`).
    """
    if not claims:
        return set()
    rows = session.execute(
        sa.text(
            "WITH held AS ("
            "  SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:tokens AS uuid[])) AS h(id, token)"
            "), free AS ("
            "  SELECT item.id FROM work_items AS item JOIN held "
            "    ON item.id = held.id AND item.lease_token = held.token "
            "  FOR NO KEY UPDATE OF item SKIP LOCKED"
            "), extended AS ("
            "  UPDATE work_items AS item "
            "  SET leased_until = clock_timestamp() + make_interval(secs => :lease_seconds) "
            "  FROM free WHERE item.id = free.id "
            "  RETURNING item.id"
            ") "
            "SELECT item.id FROM work_items AS item JOIN held "
            "  ON item.id = held.id AND item.lease_token = held.token "
            "UNION SELECT id FROM extended"
        ),
        {
            "lease_seconds": lease_seconds,
            "ids": [claim.item_id for claim in claims],
            "tokens": [claim.lease_token for claim in claims],
        },
    ).all()
    return {row.id for row in rows}


def release_lease(session: Session, claim: Claim) -> bool:
    """Give the item back without changing it (shutdown, deadline); it stays actionable."""
    result = session.execute(
        sa.text(
            "UPDATE work_items SET leased_until = NULL, lease_token = NULL "
            "WHERE id = :id AND lease_token = :token RETURNING id"
        ),
        {"id": claim.item_id, "token": claim.lease_token},
    ).first()
    return result is not None


def failure_is_final(
    session: Session, claim: Claim, *, permanent: bool, max_attempts: int
) -> bool | None:
    """Whether recording this failure fails the item for good; None when the lease was lost.

    Read before `record_failure`, so a type's failure hook can run first and
    take its locks in the order a step takes them (its own rows, then the item).
    Only the lease holder changes `attempts`, so the answer holds until then.
    """
    attempts = (
        driver_connection(session)
        .execute(
            "SELECT attempts FROM work_items WHERE id = %s AND lease_token = %s",
            (claim.item_id, claim.lease_token),
        )
        .fetchone()
    )
    if attempts is None:
        return None
    return permanent or int(attempts[0]) + 1 >= max_attempts


def record_failure(
    session: Session,
    claim: Claim,
    *,
    error: str,
    permanent: bool,
    max_attempts: int,
    backoff_initial_seconds: float,
    backoff_max_seconds: float,
    not_before_seconds: float = 0.0,
) -> FailureOutcome | None:
    """Count a failed action: back off, or fail the item; None when the lease was lost.

    `attempts` counts consecutive failures (DDR-14). The delay before the next
    attempt doubles from `backoff_initial_seconds` up to `backoff_max_seconds`,
    and is at least `not_before_seconds` (a server's `Retry-After`).

    The delay counts from this statement (`clock_timestamp()`), not from the
    transaction's start (`now()`): a batched step records a failure in the
    transaction it has been running since before the failed call, so `now()`
    could be seconds before the answer that said how long to wait.
    `retry_in_seconds` stays relative to the transaction's start, like the
    step's start time it is added to (`_ClaimsRun.record`).
    """
    row = session.execute(
        sa.text(
            "UPDATE work_items SET "
            "  attempts = attempts + 1, "
            "  error = :error, "
            "  phase = CASE WHEN :permanent OR attempts + 1 >= :max_attempts "
            "          THEN 'failed' ELSE phase END, "
            "  actionable = NOT (:permanent OR attempts + 1 >= :max_attempts), "
            "  next_attempt_at = CASE WHEN :permanent OR attempts + 1 >= :max_attempts "
            "    THEN NULL ELSE clock_timestamp() + make_interval(secs => greatest(least("
            # The exponent is capped: an outage's failures keep counting.
            "      :backoff_initial * power(2, least(attempts, 30)), :backoff_max),"
            "      :not_before)) END, "
            "  leased_until = NULL, lease_token = NULL, updated_at = now() "
            "WHERE id = :id AND lease_token = :token "
            "RETURNING attempts, phase, project_path, "
            "  extract(epoch FROM next_attempt_at - now())::float AS retry_in_seconds"
        ),
        {
            "error": error,
            "permanent": permanent,
            "max_attempts": max_attempts,
            "backoff_initial": backoff_initial_seconds,
            "backoff_max": backoff_max_seconds,
            "not_before": not_before_seconds,
            "id": claim.item_id,
            "token": claim.lease_token,
        },
    ).first()
    if row is None:
        return None
    return FailureOutcome(row.attempts, Phase(row.phase), row.retry_in_seconds, row.project_path)
