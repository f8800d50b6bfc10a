"""Incoming events (webhooks, SQS messages) stored for the items they concern.

The receivers store each delivery as it arrives (`queue.intake`) and the
intake resolver turns stored deliveries into item events behind them, in
batches; `ingest_event` does both at once, in the caller's transaction. Either
way:

1. Event types that no registered type resolves are answered "ignored"
   without touching the database (GitLab sends many kinds we never use).
2. The delivery is recorded in `received_deliveries` (durable de-duplication):
   a delivery key seen before answers "duplicate" and writes nothing else.
3. Every creator registered for the event type makes the items the event
   brings into being (a pushed head a type validates) and returns their ids;
   they are woken like new submissions, with no event stored for them.
   Then every resolver registered for the event type names the ACTIVE items the
   event concerns (DDR-32). For each, the raw event is stored in
   `pending_events` through `enqueue.insert_pending_event`, which takes the
   item's advisory lock, marks it actionable and queues a NOTIFY (DDR-34).
4. No item concerned: `ingest_event` answers "ignored" (a stored delivery
   was answered "accepted" already) — the delivery stays recorded, so a
   redelivery is answered "duplicate".

It only flushes. The caller commits, then wakes the items in this process
(`ProcessingManager.notify`) — other replicas get the NOTIFY on commit.
Nothing here knows about HTTP, GitLab or item types.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy.orm import Session

from workqueue.json_strict import InvalidJSONError, parse_strict_json
from workqueue.queue import enqueue
from workqueue.queue.intake import received_repository
from workqueue.queue.registry import TypeRegistry

IngestStatus = Literal["accepted", "duplicate", "ignored"]

DEFAULT_DELIVERY_RETENTION = timedelta(days=7)
"""How long delivery keys are remembered: covers GitLab's retries and manual
resends of recent deliveries, and SQS's default message retention (4 days).
A redelivery after that is stored again; handlers' `last_event_at` guard keeps
it harmless."""

# `received_deliveries.delivery_key` and `pending_events.dedupe_key` are TEXT,
# but keys come from request headers: longer ones are stored as their hash.
MAX_DELIVERY_KEY_LENGTH = 200
_SOURCE_LENGTH = 32  # received_deliveries.source


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What happened to one delivery; `item_ids` are the items that got a new event."""

    status: IngestStatus
    item_ids: list[uuid.UUID] = field(default_factory=list)


def normalize_delivery_key(key: str) -> str:
    """The key as stored: unchanged unless longer than `MAX_DELIVERY_KEY_LENGTH`."""
    key = _clean_text(key)
    if len(key) <= MAX_DELIVERY_KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def ingest_event(
    session: Session,
    registry: TypeRegistry,
    *,
    source: str,
    delivery_key: str | None,
    event_type: str,
    body: Mapping[str, Any],
) -> IngestResult:
    """Store one incoming event for every active item it concerns (see the module doc),
    in the caller's transaction: recording and resolving at once.

    The receivers store deliveries for later resolution instead (`queue.intake`);
    this is the same resolution, done inline. `delivery_key` identifies the
    delivery (the same for redeliveries of it); None disables de-duplication.
    Flushes, never commits.
    """
    if len(source) > _SOURCE_LENGTH:
        raise ValueError(f"source must be at most {_SOURCE_LENGTH} characters")
    if not registry.routes_event(event_type):
        return IngestResult("ignored")
    key = None if delivery_key is None else normalize_delivery_key(delivery_key)
    if key is not None and not received_repository.record_delivery(
        session, delivery_key=key, source=source, event_type=event_type
    ):
        return IngestResult("duplicate")

    # Cleaned first: resolvers pass its strings to SQL, which refuses NUL too.
    stored_body = jsonb_safe(body)
    resolved = resolve_event(session, registry, event_type=event_type, body=stored_body)
    if not resolved.targets:
        session.flush()
        return (
            IngestResult("accepted", resolved.created)
            if resolved.created
            else IngestResult("ignored")
        )
    stored = store_pending_events(
        session,
        [
            PendingEventTarget(item_id, item_type, event_type, stored_body, key)
            for item_id, item_type in resolved.targets.items()
        ],
    )
    session.flush()
    # Nothing new although items were found: every event was already stored
    # (the delivery record had been pruned while its events still waited).
    status: IngestStatus = "accepted" if stored or resolved.created else "duplicate"
    return IngestResult(status, resolved.created + stored)


@dataclass(frozen=True, slots=True)
class ResolvedEvent:
    """What one event brings: items created for it, and the active items it concerns."""

    created: list[uuid.UUID]
    targets: dict[uuid.UUID, str]  # item id -> item type


def resolve_event(
    session: Session, registry: TypeRegistry, *, event_type: str, body: dict[str, Any]
) -> ResolvedEvent:
    """Run every creator, then every resolver registered for `event_type` on `body`.

    Creators make the items the event brings into being (woken like new
    submissions, no event stored for them); resolvers name the ACTIVE items
    the event concerns (DDR-32). `body` must already be JSONB-safe.
    """
    created: list[uuid.UUID] = []
    for _item_type, creator in registry.creators_for(event_type):
        created += creator(session, body)
    targets: dict[uuid.UUID, str] = {}
    for item_type, resolver in registry.resolvers_for(event_type):
        for item_id in resolver(session, body):
            targets.setdefault(item_id, item_type)
    return ResolvedEvent(created, targets)


def resolve_events(
    session: Session, registry: TypeRegistry, *, event_type: str, bodies: Sequence[dict[str, Any]]
) -> list[ResolvedEvent]:
    """`resolve_event` for many bodies of one event type that no creator handles: each
    type's resolver runs once for all of them (`ManyResolver`). Same answers, in order."""
    if registry.creators_for(event_type):
        raise ValueError(f"events of type {event_type!r} make items: resolve them one by one")
    targets: list[dict[uuid.UUID, str]] = [{} for _ in bodies]
    for item_type, resolve_many in registry.many_resolvers_for(event_type):
        found = resolve_many(session, bodies)
        if len(found) != len(bodies):
            raise ValueError(f"the {item_type} resolver of {event_type!r} skipped events")
        for body_targets, item_ids in zip(targets, found, strict=True):
            for item_id in item_ids:
                body_targets.setdefault(item_id, item_type)
    return [ResolvedEvent([], body_targets) for body_targets in targets]


@dataclass(frozen=True, slots=True)
class PendingEventTarget:
    """One event to store for one item; `delivery_key` (stored form) de-duplicates it.

    `body_json` is the body as JSON text when the caller has it already (the
    intake reads it from the stored delivery), which saves serialising it again.
    """

    item_id: uuid.UUID
    item_type: str
    event_type: str
    body: dict[str, Any]
    delivery_key: str | None
    body_json: str | None = None


def store_pending_events(session: Session, targets: list[PendingEventTarget]) -> list[uuid.UUID]:
    """Store each event for its item (`enqueue.insert_pending_events`: the items'
    advisory locks, actionable, NOTIFY); returns the items that got a new event, in
    lock-key order.

    Always in lock-key order (stable: events of one item keep the order given),
    so transactions storing events for overlapping items cannot deadlock on the
    items' advisory locks.
    """
    ordered = sorted(targets, key=lambda target: enqueue.advisory_lock_key(target.item_id))
    stored = enqueue.insert_pending_events(
        session,
        [
            enqueue.NewPendingEvent(
                item_id=target.item_id,
                item_type=target.item_type,
                event_type=target.event_type,
                body_json=json.dumps(target.body) if target.body_json is None else target.body_json,
                dedupe_key=None
                if target.delivery_key is None
                else f"{target.delivery_key}:{target.item_id}",
            )
            for target in ordered
        ],
    )
    in_order = dict.fromkeys(target.item_id for target in ordered)
    return [item_id for item_id in in_order if item_id in stored]


def prune_deliveries(session: Session, older_than: timedelta = DEFAULT_DELIVERY_RETENTION) -> int:
    """Forget delivery keys older than `older_than`; returns how many. Flushes, never commits.

    Meant for the periodic safety sweep: one indexed DELETE (on `received_at`).
    """
    return received_repository.prune_deliveries_older_than(session, older_than.total_seconds())


def parse_event_body(raw: bytes | str) -> dict[str, Any] | None:
    """The JSON object in `raw`; None when it is not strict JSON or not an object.

    Strict as every outside document is (`json_strict`): UTF-8 only, no NaN or
    Infinity, no number that overflows to infinity (JSONB refuses all three),
    bounded nesting.
    """
    try:
        encoded = raw.encode("utf-8") if isinstance(raw, str) else raw
        body = parse_strict_json(encoded)
    except (InvalidJSONError, UnicodeEncodeError):  # lone surrogates cannot be UTF-8
        return None
    return body if isinstance(body, dict) else None


def jsonb_safe(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the body that PostgreSQL's JSONB accepts.

    JSONB rejects U+0000 in strings, and UTF-8 cannot encode lone surrogates
    (which `\\ud800` escapes produce): both are dropped or replaced.
    """
    cleaned = _jsonb_value(body)
    if not isinstance(cleaned, dict):  # pragma: no cover - a Mapping stays a dict
        raise TypeError("event body must be a JSON object")
    return cleaned


def _jsonb_value(value: Any) -> Any:
    """The cleaned copy, built without recursion: a body nested thousands of levels
    deep must not end in RecursionError. Non-finite floats (which JSONB refuses)
    become null."""
    root: list[Any] = [None]
    # (value to copy, container of its copy, index or key of the copy in it)
    pending: list[tuple[Any, list[Any] | dict[str, Any], Any]] = [(value, root, 0)]
    while pending:
        source, target, slot = pending.pop()
        copy: Any
        if isinstance(source, str):
            copy = _clean_text(source)
        elif isinstance(source, float) and not math.isfinite(source):
            copy = None
        elif isinstance(source, Mapping):
            copy = {}
            entries = []
            for key, item in source.items():
                clean_key = _clean_text(key) if isinstance(key, str) else key
                copy[clean_key] = None  # keeps the order; filled when popped
                entries.append((item, copy, clean_key))
            pending.extend(reversed(entries))  # popped in order: a repeated key's last wins
        elif isinstance(source, list | tuple):
            copy = [None] * len(source)
            pending.extend((item, copy, index) for index, item in enumerate(source))
        else:
            copy = source
        target[slot] = copy
    return root[0]


def _clean_text(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
