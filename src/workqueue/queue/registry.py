"""The explicit registry through which item types plug into the engine (DDR-8).

Built at startup (`build_registry(...)` in the application), never filled by
import side effects; registering anything twice is an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from workqueue.queue.errors import DuplicateRegistrationError, UnknownItemTypeError
from workqueue.queue.models import WorkItem

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from workqueue.queue.context import EventContext, ExecutionContext
    from workqueue.queue.dimensions import Dimensions
    from workqueue.queue.events import EventResult


@dataclass(frozen=True, slots=True)
class Action:
    """What the decider wants done next: an executor name, and a variant for per-variant work."""

    name: str
    variant: str = ""


_Value = TypeVar("_Value")

Decider = Callable[[Any, "Dimensions"], Action | None]
"""Pure function of the item (its columns and details) and its dimensions (DDR-4)."""

Executor = Callable[["ExecutionContext"], None]
"""Performs one action; changes state through the session and context; never commits."""

EventHandler = Callable[["EventContext"], "EventResult | None"]
"""Interprets one raw event for one item; read-only; its result is applied generically."""

CancelHook = Callable[["Session", Any, Mapping[str, Any]], None]
"""Type-specific cleanup when a person cancels an item (e.g. close its MR on request)."""

RetryHook = Callable[["Session", Any], None]
"""Type-specific preparation when a person retries an item (e.g. ask for its MR again)."""

FailureHook = Callable[["Session", Any, str], None]
"""Type-specific cleanup when the ENGINE fails an item (a `PermanentError`, or an error
repeated until `max_attempts`), with the error: it runs in the transaction that moves
the item to `failed` (e.g. give back a shared slot the item held). Not called for
`ExecutionContext.fail`, where the type's own executor already ends the item."""

ProjectPathResolver = Callable[[str], str]
"""Turns a submitted project reference (a path or a numeric id) into the project's path,
which authorization scopes match; a type whose items name projects by id provides one."""

Resolver = Callable[["Session", Mapping[str, Any]], list[uuid.UUID]]
"""Finds the active items an incoming event of some type concerns (DDR-32)."""

Creator = Callable[["Session", Mapping[str, Any]], list[uuid.UUID]]
"""Creates the items an incoming event brings into being (a pushed head to validate)
and returns their ids; flushes, never commits. It must be idempotent per event
(a redelivery whose delivery record was pruned runs it again) and, like a
resolver, must treat a malformed payload as "nothing to create"."""


@dataclass
class ItemTypeRegistration:
    """Everything the engine needs to process items of one type."""

    item_type: str
    model: type[WorkItem]
    decider: Decider
    # The type's own validated configuration, for its API and CLI code.
    config: object = None
    cancel_hook: CancelHook | None = None
    retry_hook: RetryHook | None = None
    failure_hook: FailureHook | None = None
    resolve_project_path: ProjectPathResolver | None = None
    # Type-specific numbers for monitoring, read at scrape time (name -> reader).
    gauges: dict[str, Callable[[], float]] = field(default_factory=dict)
    executors: dict[str, Executor] = field(default_factory=dict)
    event_handlers: dict[str, EventHandler] = field(default_factory=dict)
    resolvers: dict[str, Resolver] = field(default_factory=dict)
    creators: dict[str, Creator] = field(default_factory=dict)

    def add_executor(self, action_name: str, executor: Executor) -> None:
        _add_unique(self.executors, action_name, executor, f"executor for {self.item_type}")

    def add_event_handler(self, event_type: str, handler: EventHandler) -> None:
        _add_unique(self.event_handlers, event_type, handler, f"event handler for {self.item_type}")

    def add_gauge(self, name: str, read: Callable[[], float]) -> None:
        _add_unique(self.gauges, name, read, f"gauge for {self.item_type}")

    def add_resolver(self, event_type: str, resolver: Resolver) -> None:
        _add_unique(self.resolvers, event_type, resolver, f"resolver for {self.item_type}")

    def add_creator(self, event_type: str, creator: Creator) -> None:
        _add_unique(self.creators, event_type, creator, f"creator for {self.item_type}")

    def executor(self, action_name: str) -> Executor:
        try:
            return self.executors[action_name]
        except KeyError:
            raise UnknownItemTypeError(
                f"item type {self.item_type!r} has no executor {action_name!r}"
            ) from None


class TypeRegistry:
    """Item types known to this process, keyed by `item_type`."""

    def __init__(self) -> None:
        self._types: dict[str, ItemTypeRegistration] = {}

    def register(
        self, item_type: str, *, model: type[WorkItem], decider: Decider, config: object = None
    ) -> ItemTypeRegistration:
        """Add a type; returns its registration to attach executors, handlers and resolvers."""
        registration = ItemTypeRegistration(
            item_type=item_type, model=model, decider=decider, config=config
        )
        _add_unique(self._types, item_type, registration, "item type")
        return registration

    def get(self, item_type: str) -> ItemTypeRegistration:
        try:
            return self._types[item_type]
        except KeyError:
            raise UnknownItemTypeError(f"no item type {item_type!r} is registered") from None

    def __contains__(self, item_type: object) -> bool:
        return item_type in self._types

    def __iter__(self) -> Iterator[ItemTypeRegistration]:
        return iter(self._types.values())

    @property
    def item_types(self) -> frozenset[str]:
        return frozenset(self._types)

    def creators_for(self, event_type: str) -> list[tuple[str, Creator]]:
        """(item_type, creator) pairs of every type that makes items from this event type."""
        return [
            (registration.item_type, registration.creators[event_type])
            for registration in self._types.values()
            if event_type in registration.creators
        ]

    def routes_event(self, event_type: str) -> bool:
        """Whether any type resolves or creates items from this event type."""
        return any(
            event_type in registration.resolvers or event_type in registration.creators
            for registration in self._types.values()
        )

    def resolvers_for(self, event_type: str) -> list[tuple[str, Resolver]]:
        """(item_type, resolver) pairs of every type that routes this event type."""
        return [
            (registration.item_type, registration.resolvers[event_type])
            for registration in self._types.values()
            if event_type in registration.resolvers
        ]


def _add_unique(target: dict[str, _Value], key: str, value: _Value, what: str) -> None:
    if key in target:
        raise DuplicateRegistrationError(f"{what} {key!r} is already registered")
    target[key] = value
