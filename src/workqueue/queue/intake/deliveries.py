"""The delivery intake: receivers store deliveries, the resolver turns them into events.

A receiver (the webhook route, the SQS consumer) authenticates a delivery and
calls `store_delivery`, which in one statement records its key in
`received_deliveries` (the durable de-duplication, the only source of
"duplicate") and stores the body in `incoming_deliveries`; the receiver
commits and answers. Nothing type-specific runs in the request.

Behind it, `resolve_stored` (driven by `intake_loop.IntakeResolver`) takes a
batch of stored deliveries (deleted and so locked in one statement, `FOR UPDATE
SKIP LOCKED`, oldest first), runs the types' creators and resolvers on each
(`ingest.resolve_event`) and stores the pending events
(`ingest.store_pending_events`, deduplicated per delivery and item), all in one
transaction. A replica that dies
mid-batch leaves its deliveries unresolved and unlocked for another; one that
commits has applied each delivery exactly once.

Nothing here knows about HTTP, GitLab or item types.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from workqueue.queue.intake import repository as intake_repository
from workqueue.queue.intake.pending_events import (
    IngestStatus,
    PendingEventTarget,
    ResolvedEvent,
    jsonb_safe,
    normalize_delivery_key,
    resolve_event,
    resolve_events,
    store_pending_events,
)
from workqueue.queue.intake.repository import NewDelivery, StoredDelivery
from workqueue.queue.registry import TypeRegistry

DEFAULT_BATCH_SIZE = 100
_SOURCE_LENGTH = 32  # received_deliveries.source
# JSON escapes PostgreSQL's JSONB refuses (NUL) or that may be a lone surrogate.
_ESCAPES_JSONB_REFUSES = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def store_delivery(
    session: Session,
    registry: TypeRegistry,
    *,
    source: str,
    delivery_key: str | None,
    event_type: str,
    body: Mapping[str, Any],
    raw_body: bytes | None = None,
) -> IngestStatus:
    """Store one delivery for resolution; "ignored" (no SQL) when no type routes its
    event type, "duplicate" when its key was recorded before, else "accepted".

    `raw_body`, the strict JSON `body` was parsed from, is stored as it came
    when PostgreSQL accepts it as is (saves serialising `body` again).
    `delivery_key` None disables de-duplication. Flushes nothing; the caller commits.
    """
    if not registry.routes_event(event_type):
        return "ignored"
    delivery = new_delivery(
        source=source,
        delivery_key=delivery_key,
        event_type=event_type,
        body=body,
        raw_body=raw_body,
    )
    return store_deliveries(session, [delivery])[0]


def new_delivery(
    *,
    source: str,
    delivery_key: str | None,
    event_type: str,
    body: Mapping[str, Any],
    raw_body: bytes | None = None,
) -> NewDelivery:
    """A delivery ready for `store_deliveries` (key normalised, body as JSONB text)."""
    if len(source) > _SOURCE_LENGTH:
        raise ValueError(f"source must be at most {_SOURCE_LENGTH} characters")
    return NewDelivery(
        delivery_key=None if delivery_key is None else normalize_delivery_key(delivery_key),
        source=source,
        event_type=event_type,
        body_json=_stored_json(body, raw_body),
    )


def store_deliveries(session: Session, deliveries: Sequence[NewDelivery]) -> list[IngestStatus]:
    """Store many deliveries in one statement (their event types must be routed);
    per delivery "accepted", or "duplicate" for a key recorded before or earlier in
    the list. Flushes nothing; the caller commits."""
    stored = intake_repository.store_many(session, deliveries)
    return ["accepted" if index in stored else "duplicate" for index in range(len(deliveries))]


def store_for_later(
    session: Session, *, source: str, event_type: str, body: Mapping[str, Any]
) -> None:
    """Keep something to resolve in a later round, from inside a resolution: a creator
    that needs an outside service which is down right now stores a delivery of its own
    this way instead of raising (which would retry the batch one by one at once, then
    drop the delivery).

    No de-duplication and no wake-up: the next round takes it (the next delivery
    stored, or the safety sweep), never a tight loop; pacing the service itself
    is the type's business. `event_type` must be routed. Flushes nothing.
    """
    delivery = new_delivery(source=source, delivery_key=None, event_type=event_type, body=body)
    intake_repository.store_quietly(session, delivery)


@dataclass
class ResolvedBatch:
    """What one resolver transaction did; `item_ids` were created or got an event."""

    deliveries: int = 0
    item_ids: list[uuid.UUID] = field(default_factory=list)


def resolve_stored(session: Session, registry: TypeRegistry, *, limit: int) -> ResolvedBatch:
    """Resolve up to `limit` stored deliveries (see the module doc). Flushes, never commits."""
    return resolve(session, registry, claim(session, limit))


def claim(session: Session, limit: int) -> list[StoredDelivery]:
    """Take up to `limit` stored deliveries, oldest first: deleted in this transaction,
    so locked until it ends, and back unresolved if it rolls back."""
    return intake_repository.claim(session, limit)


def resolve_one(session: Session, registry: TypeRegistry, delivery_id: int) -> ResolvedBatch:
    """Resolve one stored delivery by id (nothing when it is gone or locked elsewhere)."""
    delivery = intake_repository.claim_one(session, delivery_id)
    return resolve(session, registry, [] if delivery is None else [delivery])


def forget(session: Session, delivery_id: int) -> None:
    """Drop a delivery that cannot be resolved (its resolution raised)."""
    intake_repository.forget(session, [delivery_id])


def resolve(
    session: Session, registry: TypeRegistry, deliveries: list[StoredDelivery]
) -> ResolvedBatch:
    """Turn claimed deliveries into item events (claiming deleted them). Flushes, never
    commits.

    Oldest first, so an item's events keep arrival order. Deliveries of event types
    that no creator handles are resolved together, one query per type for a run of
    them (`ingest.resolve_events`); a delivery whose event type makes items ends the
    run and is resolved alone, so every resolver sees the items the deliveries before
    it created, as when resolving one by one.
    """
    if not deliveries:
        return ResolvedBatch()
    resolved: list[ResolvedEvent | None] = [None] * len(deliveries)
    run: list[int] = []  # indexes of creator-free deliveries not yet resolved

    def resolve_run() -> None:
        by_type: dict[str, list[int]] = {}
        for index in run:
            by_type.setdefault(deliveries[index].event_type, []).append(index)
        for event_type, indexes in by_type.items():
            bodies = [deliveries[index].body for index in indexes]
            answers = resolve_events(session, registry, event_type=event_type, bodies=bodies)
            for index, answer in zip(indexes, answers, strict=True):
                resolved[index] = answer
        run.clear()

    for index, delivery in enumerate(deliveries):
        if registry.creators_for(delivery.event_type):
            resolve_run()
            resolved[index] = resolve_event(
                session, registry, event_type=delivery.event_type, body=delivery.body
            )
        else:
            run.append(index)
    resolve_run()
    created: list[uuid.UUID] = []
    targets: list[PendingEventTarget] = []
    for delivery, answer in zip(deliveries, resolved, strict=True):
        assert answer is not None  # noqa: S101 - every index was resolved above
        created += answer.created
        targets += (
            PendingEventTarget(
                item_id,
                item_type,
                delivery.event_type,
                delivery.body,
                delivery.delivery_key,
                delivery.body_json,
            )
            for item_id, item_type in answer.targets.items()
        )
    stored = store_pending_events(session, targets)
    return ResolvedBatch(len(deliveries), created + stored)


def _stored_json(body: Mapping[str, Any], raw_body: bytes | None) -> str:
    if raw_body is not None and _ESCAPES_JSONB_REFUSES.search(raw_body) is None:
        try:
            return raw_body.decode("utf-8")
        except UnicodeDecodeError:
            pass  # strict JSON is UTF-8; re-serialise to be safe anyway
    return json.dumps(jsonb_safe(body), ensure_ascii=False, allow_nan=False)
