"""SQL of submission idempotency: a caller's `Idempotency-Key` and the answer it got.

A key is looked up before anything else (a replay costs no GitLab call), then
again in the submission's own transaction under a transaction advisory lock
on the caller's key: of two identical requests at the same time, the second
waits for the first to commit and then finds its answer, so one item is made.
The answer is recorded in that transaction, so a rolled-back or refused
submission records nothing. Times are the database clock's.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

KEY_LOCK_NAMESPACE = 0x6B657973  # "keys"


@dataclass(frozen=True)
class CallerKey:
    """A key as one caller sent it: keys of different callers never meet."""

    issuer: str
    identity: str
    key: str

    def params(self) -> dict[str, str]:
        return {"issuer": self.issuer, "identity": self.identity, "key": self.key}


@dataclass(frozen=True)
class StoredAnswer:
    """The first answer to a key."""

    item_type: str
    request_digest: str
    work_item_id: uuid.UUID
    status_code: int
    outcome: str


def lock_key(session: Session, key: CallerKey) -> None:
    """Serialise submissions carrying this caller's key until the transaction ends."""
    # A JSON array keeps ("a:b", "c") and ("a", "b:c") apart.
    name = json.dumps([key.issuer, key.identity, key.key])
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:name))"),
        {"namespace": KEY_LOCK_NAMESPACE, "name": name},
    )


_FIND = sa.text(
    "SELECT item_type, request_digest, work_item_id, status_code, outcome "
    "FROM submission_keys "
    "WHERE caller_issuer = :issuer AND caller_identity = :identity "
    "AND idempotency_key = :key AND expires_at > now()"
)


def find_answer(session: Session, key: CallerKey) -> StoredAnswer | None:
    """The answer recorded for `key`, unless it expired (an expired key is a new key)."""
    row = session.execute(_FIND, key.params()).first()
    if row is None:
        return None
    return StoredAnswer(
        item_type=row.item_type,
        request_digest=row.request_digest,
        work_item_id=uuid.UUID(str(row.work_item_id)),
        status_code=int(row.status_code),
        outcome=row.outcome,
    )


# Under the key's lock, and after `find_answer` found nothing: a row still
# there has expired and is replaced.
_RECORD = sa.text(
    """
    INSERT INTO submission_keys AS keys (
        caller_issuer, caller_identity, idempotency_key, item_type, request_digest,
        work_item_id, status_code, outcome, created_at, expires_at
    )
    VALUES (
        :issuer, :identity, :key, :item_type, :request_digest,
        :work_item_id, :status_code, :outcome, now(), now() + make_interval(secs => :seconds)
    )
    ON CONFLICT (caller_issuer, caller_identity, idempotency_key) DO UPDATE SET
        item_type = excluded.item_type,
        request_digest = excluded.request_digest,
        work_item_id = excluded.work_item_id,
        status_code = excluded.status_code,
        outcome = excluded.outcome,
        created_at = excluded.created_at,
        expires_at = excluded.expires_at
    """
)


def record_answer(
    session: Session, key: CallerKey, answer: StoredAnswer, *, lifetime: timedelta
) -> None:
    """Remember `answer` for `key` for `lifetime`. Call it holding `lock_key`."""
    session.execute(
        _RECORD,
        {
            **key.params(),
            "item_type": answer.item_type,
            "request_digest": answer.request_digest,
            "work_item_id": answer.work_item_id,
            "status_code": answer.status_code,
            "outcome": answer.outcome,
            "seconds": lifetime.total_seconds(),
        },
    )


def prune_expired(session: Session) -> int:
    """Delete expired keys (the safety sweep); returns how many."""
    deleted: int = session.execute(
        sa.text(
            "WITH gone AS (DELETE FROM submission_keys WHERE expires_at <= now() RETURNING 1) "
            "SELECT count(*) FROM gone"
        )
    ).scalar_one()
    return deleted
