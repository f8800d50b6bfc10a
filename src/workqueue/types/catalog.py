"""The item types this build knows, and the registry assembled from the config.

`handled_types` in the config file opts a replica into types (DDR-25); each
named type validates its own section and registers its decider, executors,
event handlers and resolvers into a fresh `TypeRegistry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from workqueue.queue import TypeRegistry
from workqueue.settings import Settings


@dataclass(frozen=True)
class InstallContext:
    """What types may need from the process environment (secrets, test doubles)."""

    gitlab_token: str | None = None
    # Builds the GitLab client for a base URL and token; tests pass one that
    # points at the simulator. None: the real client.
    gitlab_client_factory: Callable[[str, str], Any] | None = None
    # Told about every GitLab call (operation, HTTP status): metrics.
    gitlab_on_call: Callable[[str, int | str], None] | None = None


def install_context(
    settings: Settings, *, on_gitlab_call: Callable[[str, int | str], None] | None = None
) -> InstallContext:
    token = settings.gitlab_token.get_secret_value() if settings.gitlab_token else None
    return InstallContext(gitlab_token=token, gitlab_on_call=on_gitlab_call)


TypeInstaller = Callable[[TypeRegistry, Mapping[str, Any], InstallContext], None]
"""Validates a type's config section and registers the type."""


class HandledTypeError(ValueError):
    """handled_types names an unknown type, or a type's section is invalid."""


def known_types() -> dict[str, TypeInstaller]:
    # Imported here so that listing the catalog does not import every type's
    # dependencies at module import time.
    from workqueue.types.mr.install import install_mr  # noqa: PLC0415
    from workqueue.types.trunk.install import install_trunk  # noqa: PLC0415

    return {"mr": install_mr, "trunk": install_trunk}


def type_config_models() -> dict[str, type[BaseModel]]:
    """Each known type's `handled_types.<name>` section model (for the JSON Schema)."""
    from workqueue.types.mr.config import MRTypeConfig  # noqa: PLC0415 - see known_types
    from workqueue.types.trunk.config import TrunkTypeConfig  # noqa: PLC0415

    return {"mr": MRTypeConfig, "trunk": TrunkTypeConfig}


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
