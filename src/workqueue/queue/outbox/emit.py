"""Outbound events: `emit` writes them to the outbox in the caller's transaction.

Who receives what is an `Outbox` built once from `notifications:` and
attached to the session factory (`attach`), so every session it makes knows
the subscribers without any plumbing through call chains. With no outbox
attached, or no subscriber wanting an event, `emit` issues no SQL at all.

Delivery is `workqueue.notifications.delivery`'s job, after commit: an event
whose transaction rolls back was never written, so it is never sent.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from workqueue.project_patterns import path_matches, scope_regexes
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.outbox import repository as outbox_repository
from workqueue.queue.outbox.config import NotificationsConfig, OutboundEvent, SubscriberConfig

SESSION_INFO_KEY = "workqueue.outbox"
KNOWN_EVENTS = frozenset(event.value for event in OutboundEvent)

PHASE_EVENTS: Mapping[Phase, OutboundEvent] = {
    Phase.COMPLETED: OutboundEvent.WORK_ITEM_COMPLETED,
    Phase.FAILED: OutboundEvent.WORK_ITEM_FAILED,
    Phase.CANCELLED: OutboundEvent.WORK_ITEM_CANCELLED,
}


@dataclass(frozen=True)
class Subscriber:
    """A subscriber with its secret resolved; the secret never appears in a repr."""

    name: str
    url: str
    secret: str = field(repr=False)
    events: frozenset[str]
    item_types: frozenset[str] | None = None
    project_regexes: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, config: SubscriberConfig, environ: Mapping[str, str]) -> Subscriber:
        return cls(
            name=config.name,
            url=config.url,
            secret=environ[config.secret_env],
            events=frozenset(str(event) for event in config.events),
            item_types=None if config.item_types is None else frozenset(config.item_types),
            project_regexes=(
                None if config.projects is None else scope_regexes(config.projects, {})
            ),
        )

    def wants(self, event_type: str, item_type: str | None, project: str | None) -> bool:
        if event_type not in self.events:
            return False
        if self.item_types is not None and item_type not in self.item_types:
            return False
        if self.project_regexes is not None:
            return project is not None and path_matches(self.project_regexes, project)
        return True


class Outbox:
    """The subscribers of this service and the delivery settings."""

    def __init__(
        self, subscribers: Sequence[Subscriber], config: NotificationsConfig | None = None
    ) -> None:
        self.subscribers = tuple(subscribers)
        self.config = config or NotificationsConfig()
        self._by_name = {subscriber.name: subscriber for subscriber in self.subscribers}
        self._wanted: frozenset[str] = frozenset().union(*(s.events for s in self.subscribers))

    @classmethod
    def from_config(
        cls, config: NotificationsConfig, environ: Mapping[str, str] | None = None
    ) -> Outbox:
        env = os.environ if environ is None else environ
        return cls([Subscriber.from_config(item, env) for item in config.subscribers], config)

    def subscriber(self, name: str) -> Subscriber | None:
        return self._by_name.get(name)

    def wants(self, event_type: str) -> bool:
        """Whether any subscriber takes `event_type` at all (before any filter)."""
        return event_type in self._wanted

    def recipients(self, event_type: str, item_type: str | None, project: str | None) -> list[str]:
        if event_type not in self._wanted:
            return []
        return [s.name for s in self.subscribers if s.wants(event_type, item_type, project)]

    def attach(self, sessions: sessionmaker[Session]) -> None:
        """Make every session of `sessions` emit to this outbox."""
        info = dict(sessions.kw.get("info") or {})
        info[SESSION_INFO_KEY] = self
        sessions.configure(info=info)


def outbox_of(session: Session) -> Outbox | None:
    outbox = session.info.get(SESSION_INFO_KEY)
    return outbox if isinstance(outbox, Outbox) else None


def emit(
    session: Session, event_type: str, *, item: WorkItem | None, data: Mapping[str, Any]
) -> None:
    """Write `event_type` for every subscriber that wants it, in the session's transaction.

    `data` becomes the body's `data`, after `work_item_id`, `item_type`,
    `phase` and `project` taken from `item` (without an item, pass those in
    `data` yourself so subscriber filters can see them). Flushes, never
    commits: the event is sent only if the caller's transaction commits.
    """
    if event_type not in KNOWN_EVENTS:
        raise ValueError(f"unknown outbound event type {event_type!r}")
    outbox = outbox_of(session)
    if outbox is None or not outbox.wants(event_type):
        return
    payload: dict[str, Any] = {}
    if item is not None:
        payload = {
            "work_item_id": item.id,
            "item_type": item.item_type,
            "phase": item.phase,
            "project": item.project_path,
        }
    payload.update(data)
    item_type, project = payload.get("item_type"), payload.get("project")
    recipients = outbox.recipients(
        event_type,
        item_type if isinstance(item_type, str) else None,
        project if isinstance(project, str) else None,
    )
    if not recipients:
        return
    raw_id = payload.get("work_item_id")
    outbox_repository.insert_deliveries(
        session,
        event_id=uuid.uuid4(),
        event_type=event_type,
        work_item_id=uuid.UUID(str(raw_id)) if raw_id is not None else None,
        data_json=json.dumps(payload, default=_json_value, sort_keys=True),
        subscribers=recipients,
    )
    session.flush()


def emit_phase_change(session: Session, item: WorkItem) -> None:
    """Announce that `item` is now completed, failed or cancelled (nothing for active)."""
    event_type = PHASE_EVENTS.get(item.phase)
    if event_type is None or outbox_of(session) is None:
        return
    data: dict[str, Any] = {}
    if item.phase == Phase.FAILED:
        data["error"] = item.error
    # A detail column some types have (mr): why the item completed.
    completion_reason = getattr(item, "completion_reason", None)
    if completion_reason is not None:
        data["completion_reason"] = completion_reason
    emit(session, event_type, item=item, data=data)


def emit_phase_reached(
    session: Session,
    phase: Phase,
    *,
    work_item_id: uuid.UUID,
    item_type: str,
    project: str | None,
    error: str | None = None,
) -> None:
    """`emit_phase_change` for phase changes made in SQL, where no loaded item is at hand."""
    event_type = PHASE_EVENTS.get(phase)
    if event_type is None or outbox_of(session) is None:
        return
    data: dict[str, Any] = {
        "work_item_id": work_item_id,
        "item_type": item_type,
        "phase": phase,
        "project": project,
    }
    if phase == Phase.FAILED:
        data["error"] = error
    emit(session, event_type, item=None, data=data)


def _json_value(value: object) -> object:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable in an outbound event")
