"""The item types this build knows, and the registry assembled from the config.

`handled_types` in the config file opts a replica into types (DDR-25); each
named type validates its own section and registers its decider, executors,
event handlers and resolvers into a fresh `TypeRegistry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from workqueue.queue.registry import TypeRegistry

TypeInstaller = Callable[[TypeRegistry, Mapping[str, Any]], None]
"""Validates a type's config section and registers the type."""

KNOWN_TYPES: dict[str, TypeInstaller] = {}


class UnknownHandledTypeError(ValueError):
    """handled_types names a type this build does not have."""


def build_registry(
    handled_types: Mapping[str, Mapping[str, Any] | None],
    known_types: Mapping[str, TypeInstaller] | None = None,
) -> TypeRegistry:
    known = KNOWN_TYPES if known_types is None else known_types
    registry = TypeRegistry()
    for item_type, section in handled_types.items():
        installer = known.get(item_type)
        if installer is None:
            available = ", ".join(sorted(known)) or "none"
            raise UnknownHandledTypeError(
                f"handled_types.{item_type}: unknown item type (available: {available})"
            )
        installer(registry, section or {})
    return registry
