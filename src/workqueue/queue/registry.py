"""The explicit registry through which item types plug into the engine (DDR-8).

Built at startup (`build_registry(...)` in the application), never filled by
import side effects; registering anything twice is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from workqueue.queue.contract import (
    CancelHook,
    ContentDropper,
    Creator,
    Decider,
    EventHandler,
    Executor,
    FailureHook,
    ManyResolver,
    ProjectPathResolver,
    ProjectSubmissionCheck,
    Resolver,
    RetryHook,
)
from workqueue.queue.errors import DuplicateRegistrationError, UnknownItemTypeError
from workqueue.queue.models import WorkItem

_Value = TypeVar("_Value")


@dataclass(frozen=True)
class TypeCounter:
    """A type's own counter for monitoring: `read` gives the count per label values
    (in the order of `labels`), read at scrape time; counts only ever grow."""

    help: str
    read: Callable[[], Mapping[tuple[str, ...], float]]
    labels: tuple[str, ...] = ()


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
    # For types whose rules depend on the project's settings on GitLab (read at submission).
    project_submission_check: ProjectSubmissionCheck | None = None
    # For types whose items store contents: retention drops them (safety sweep).
    content_dropper: ContentDropper | None = None
    # Type-specific numbers for monitoring, read at scrape time (name -> reader).
    gauges: dict[str, Callable[[], float]] = field(default_factory=dict)
    counters: dict[str, TypeCounter] = field(default_factory=dict)
    executors: dict[str, Executor] = field(default_factory=dict)
    event_handlers: dict[str, EventHandler] = field(default_factory=dict)
    resolvers: dict[str, Resolver] = field(default_factory=dict)
    # The optional many-bodies form of some of `resolvers`, by event type.
    many_resolvers: dict[str, ManyResolver] = field(default_factory=dict)
    creators: dict[str, Creator] = field(default_factory=dict)

    def add_executor(self, action_name: str, executor: Executor) -> None:
        _add_unique(self.executors, action_name, executor, f"executor for {self.item_type}")

    def add_event_handler(self, event_type: str, handler: EventHandler) -> None:
        _add_unique(self.event_handlers, event_type, handler, f"event handler for {self.item_type}")

    def add_gauge(self, name: str, read: Callable[[], float]) -> None:
        _add_unique(self.gauges, name, read, f"gauge for {self.item_type}")

    def add_counter(
        self,
        name: str,
        help_text: str,
        read: Callable[[], Mapping[tuple[str, ...], float]],
        *,
        labels: tuple[str, ...] = (),
    ) -> None:
        """A counter exported as `workqueue_<name>_total{item_type, *labels}`."""
        counter = TypeCounter(help_text, read, labels)
        _add_unique(self.counters, name, counter, f"counter for {self.item_type}")

    def add_resolver(
        self, event_type: str, resolver: Resolver, *, many: ManyResolver | None = None
    ) -> None:
        """`many`, when given, answers what `resolver` would for each of many bodies."""
        _add_unique(self.resolvers, event_type, resolver, f"resolver for {self.item_type}")
        if many is not None:
            self.many_resolvers[event_type] = many

    def resolver_of_many(self, event_type: str) -> ManyResolver:
        """The many-bodies resolver of `event_type`: the registered one, else the
        one-body resolver applied to each body in turn."""
        many = self.many_resolvers.get(event_type)
        if many is not None:
            return many
        resolver = self.resolvers[event_type]
        return lambda session, bodies: [resolver(session, body) for body in bodies]

    def add_creator(self, event_type: str, creator: Creator) -> None:
        _add_unique(self.creators, event_type, creator, f"creator for {self.item_type}")

    def set_cancel_hook(self, hook: CancelHook) -> None:
        self.cancel_hook = _set_once(self.cancel_hook, hook, f"cancel hook of {self.item_type}")

    def set_retry_hook(self, hook: RetryHook) -> None:
        self.retry_hook = _set_once(self.retry_hook, hook, f"retry hook of {self.item_type}")

    def set_failure_hook(self, hook: FailureHook) -> None:
        self.failure_hook = _set_once(self.failure_hook, hook, f"failure hook of {self.item_type}")

    def set_content_dropper(self, dropper: ContentDropper) -> None:
        self.content_dropper = _set_once(
            self.content_dropper, dropper, f"content dropper of {self.item_type}"
        )

    def set_project_submission_check(self, check: ProjectSubmissionCheck) -> None:
        self.project_submission_check = _set_once(
            self.project_submission_check, check, f"project submission check of {self.item_type}"
        )

    def set_project_path_resolver(self, resolver: ProjectPathResolver) -> None:
        self.resolve_project_path = _set_once(
            self.resolve_project_path, resolver, f"project path resolver of {self.item_type}"
        )

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

    def many_resolvers_for(self, event_type: str) -> list[tuple[str, ManyResolver]]:
        """(item_type, many-bodies resolver) pairs of every type that routes this event type."""
        return [
            (registration.item_type, registration.resolver_of_many(event_type))
            for registration in self._types.values()
            if event_type in registration.resolvers
        ]

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


def _set_once(current: _Value | None, value: _Value, what: str) -> _Value:
    if current is not None:
        raise DuplicateRegistrationError(f"{what} is already registered")
    return value
