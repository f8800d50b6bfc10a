"""SQL of the signal store. Flushes nothing it does not need; the caller commits."""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from workqueue.queue import TypeRegistry
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.signals.models import CheckSignal, SignalKey
from workqueue.signals.signal import CHECK_SIGNAL_EVENT, CheckState, CheckStatus, Signal

SOURCE_LENGTH = 16


class Outcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class Recorded:
    outcome: Outcome
    # The store changed (a newer status, or the first of its variant): the items of
    # the commit were told. An older signal is accepted and changes nothing.
    changed: bool


def record_signal(
    session: Session,
    registry: TypeRegistry,
    signal: Signal,
    *,
    source: str,
    reporter: str,
    idempotency_key: str | None = None,
) -> Recorded:
    """Store `signal` unless its key was seen or a newer one of its variant is stored;
    announce a change to the item types (a `check_signal` event for its commit)."""
    if idempotency_key is not None and not _first_use(session, reporter, idempotency_key):
        return Recorded(Outcome.DUPLICATE, changed=False)
    values = {
        "project": signal.project,
        "sha": signal.sha,
        "name": signal.name,
        "variant": signal.variant,
        "status": signal.status.value,
        "url": signal.url,
        "description": signal.description,
        "reported_at": signal.reported_at,
        "received_at": sa.func.now(),
        "source": source[:SOURCE_LENGTH],
        "reporter": reporter,
    }
    inserted = insert(CheckSignal).values(values)
    excluded = inserted.excluded
    # The newest by the reporter's own time wins: a late delivery of an older
    # status never overwrites a newer one (a tie keeps what is stored).
    statement = inserted.on_conflict_do_update(
        index_elements=["project", "sha", "name", "variant"],
        set_={
            key: excluded[key]
            for key in (
                "status",
                "url",
                "description",
                "reported_at",
                "received_at",
                "source",
                "reporter",
            )
        },
        where=CheckSignal.reported_at < excluded.reported_at,
    ).returning(CheckSignal.project)
    changed = session.execute(statement).first() is not None
    if changed:
        store_delivery(
            session,
            registry,
            source="signals",
            delivery_key=None,
            event_type=CHECK_SIGNAL_EVENT,
            # Only which commit: the handlers read the checks from the store.
            body={"project": signal.project, "sha": signal.sha},
        )
    return Recorded(Outcome.ACCEPTED, changed=changed)


def _first_use(session: Session, reporter: str, key: str) -> bool:
    statement = (
        insert(SignalKey)
        .values(reporter=reporter, idempotency_key=key)
        .on_conflict_do_nothing()
        .returning(SignalKey.reporter)
    )
    return session.execute(statement).first() is not None


def checks_on(
    session: Session, project: str, sha: str, names: Collection[str] | None = None
) -> list[CheckState]:
    """The stored checks of one commit (only `names` when given), by name and variant."""
    query = sa.select(CheckSignal).where(CheckSignal.project == project, CheckSignal.sha == sha)
    if names is not None:
        query = query.where(CheckSignal.name.in_(sorted(names)))
    rows = session.scalars(query.order_by(CheckSignal.name, CheckSignal.variant))
    return [
        CheckState(
            name=row.name,
            variant=row.variant,
            status=CheckStatus(row.status),
            url=row.url,
            reported_at=row.reported_at,
            received_at=row.received_at,
        )
        for row in rows
    ]


def prune_batch(session: Session, *, received_before: datetime, limit: int) -> int:
    """Delete up to `limit` signals and `limit` keys received before the cutoff; returns
    how many rows went (a batch under 2 * limit: nothing older is left)."""
    old_signals = (
        sa.select(CheckSignal.project, CheckSignal.sha, CheckSignal.name, CheckSignal.variant)
        .where(CheckSignal.received_at < received_before)
        .limit(limit)
        .with_for_update(skip_locked=True)  # another replica's batch takes the others
    )
    signals = session.execute(
        sa.delete(CheckSignal).where(
            sa.tuple_(
                CheckSignal.project, CheckSignal.sha, CheckSignal.name, CheckSignal.variant
            ).in_(old_signals)
        )
    )
    old_keys = (
        sa.select(SignalKey.reporter, SignalKey.idempotency_key)
        .where(SignalKey.received_at < received_before)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    keys = session.execute(
        sa.delete(SignalKey).where(
            sa.tuple_(SignalKey.reporter, SignalKey.idempotency_key).in_(old_keys)
        )
    )
    return int(getattr(signals, "rowcount", 0) or 0) + int(getattr(keys, "rowcount", 0) or 0)
