"""The item types this build knows: one line per type, and what derives from the list.

`handled_types` in the config file opts a replica into types (DDR-25); each
named type validates its own section and registers its decider, executors,
event handlers and resolvers into a fresh `TypeRegistry`.

The list names each type's plugin module; modules are imported when the
catalog is first read, so importing the catalog (the CLI does) costs nothing,
and a type's modules never import the catalog back.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ValidationError

from workqueue.queue import TypeRegistry
from workqueue.types.plugin import HandledTypeError, InstallContext, ItemTypePlugin, TypeInstaller

# One line per item type: the module that exports its `PLUGIN`.
PLUGIN_MODULES = (
    "workqueue.types.mr.plugin",
    "workqueue.types.trunk.plugin",
    "workqueue.types.agent.plugin",
)


class DuplicatePluginError(ValueError):
    """Two plugins claim one item type name."""


class Catalog:
    """The known plugins by name; an explicit object that refuses a second plugin of a name."""

    def __init__(self, plugins: Iterable[ItemTypePlugin] = ()) -> None:
        self._plugins: dict[str, ItemTypePlugin] = {}
        for plugin in plugins:
            self.add(plugin)

    def add(self, plugin: ItemTypePlugin) -> None:
        if plugin.name in self._plugins:
            raise DuplicatePluginError(f"item type {plugin.name!r} is already in the catalog")
        self._plugins[plugin.name] = plugin

    def __iter__(self) -> Iterator[ItemTypePlugin]:
        return iter(self._plugins.values())

    def __contains__(self, name: object) -> bool:
        return name in self._plugins

    def installers(self) -> dict[str, TypeInstaller]:
        return {plugin.name: plugin.install for plugin in self}

    def config_models(self) -> dict[str, type[BaseModel]]:
        return {plugin.name: plugin.config_model for plugin in self}

    def detail_models(self) -> tuple[type[Any], ...]:
        return tuple(model for plugin in self for model in plugin.models)

    def routers(self) -> tuple[APIRouter, ...]:
        return tuple(plugin.router for plugin in self if plugin.router is not None)


def load_catalog(modules: Iterable[str]) -> Catalog:
    """A catalog of the `PLUGIN` each module exports."""
    plugins = []
    for name in modules:
        plugin = getattr(importlib.import_module(name), "PLUGIN", None)
        if not isinstance(plugin, ItemTypePlugin):
            raise TypeError(f"{name}.PLUGIN is not an ItemTypePlugin")
        plugins.append(plugin)
    return Catalog(plugins)


@cache
def catalog() -> Catalog:
    """This build's catalog (`PLUGIN_MODULES`)."""
    return load_catalog(PLUGIN_MODULES)


def known_types() -> dict[str, TypeInstaller]:
    return catalog().installers()


def type_config_models() -> dict[str, type[BaseModel]]:
    """Each known type's `handled_types.<name>` section model (for the JSON Schema)."""
    return catalog().config_models()


def build_registry(
    handled_types: Mapping[str, Mapping[str, Any] | None],
    context: InstallContext | None = None,
    *,
    available: Mapping[str, TypeInstaller] | None = None,
) -> TypeRegistry:
    installers = known_types() if available is None else available
    registry = TypeRegistry()
    for item_type, section in handled_types.items():
        installer = installers.get(item_type)
        if installer is None:
            names = ", ".join(sorted(installers)) or "none"
            raise HandledTypeError(
                f"handled_types.{item_type}: unknown item type (available: {names})"
            )
        try:
            installer(registry, section or {}, context or InstallContext())
        except ValidationError as error:
            problems = "; ".join(
                f"handled_types.{item_type}.{'.'.join(str(p) for p in detail['loc'])}: "
                f"{detail['msg']}"
                for detail in error.errors()
            )
            raise HandledTypeError(problems) from None
    return registry
