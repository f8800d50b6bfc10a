"""What an item type is to the rest of the service: an `ItemTypePlugin`.

Each type's package exports one `PLUGIN` (`types/<name>/plugin.py`): its name,
its config section's model, the installer that registers it on a
`TypeRegistry`, its detail tables, its HTTP routes and its dashboard pages.
Everything else the service knows about types (the config's JSON Schema, the
tables Alembic compares, the routers, the dashboard's pages and links, the
registry) is derived from the catalog's list of plugins (`types/catalog.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import BaseModel

from workqueue.queue import TypeRegistry
from workqueue.settings import Settings

if TYPE_CHECKING:
    from workqueue.api.caller_state import Caller
    from workqueue.api.deps import Runtime


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


@dataclass(frozen=True, slots=True)
class DashboardPage:
    """A page a type adds to the dashboard, at `/ui/<path>`, linked in its navigation
    while this replica handles the type.

    `template` is a file in the `templates/` folder of `package` (the type's own,
    `__package__` where the page is declared); it extends the dashboard's
    `layout` like the built-in pages. `context` builds what the
    template shows for a signed-in caller: it calls the type's route functions,
    so scoping, permissions and refusals (an `HTTPException`) are the API's.
    """

    path: str
    title: str
    package: str
    template: str
    context: Callable[[Runtime, Caller], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ItemTypePlugin:
    """One item type, as the service assembles it."""

    name: str
    # The `handled_types.<name>` section: validated by `install`, published in the
    # config's JSON Schema.
    config_model: type[BaseModel]
    install: TypeInstaller
    # Detail tables (joined-table subclasses of `WorkItem`, and any table of the
    # type's own): mapped on the engine's metadata for Alembic and the parity test.
    models: tuple[type[Any], ...]
    # The type's routes under /api/, mounted whether or not this replica handles
    # the type (a replica answers for every type it knows).
    router: APIRouter | None = None
    dashboard_pages: tuple[DashboardPage, ...] = ()
