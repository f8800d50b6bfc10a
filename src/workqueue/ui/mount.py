"""Attach the dashboard to the service's app: pages, static files, headers, and `GET /`."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from workqueue.types.catalog import catalog
from workqueue.ui.browser_guard import UI_PREFIX, DashboardHeaders
from workqueue.ui.pages import router, type_page_route

STATIC_DIRECTORY = Path(__file__).parent / "static"


def mount_dashboard(app: FastAPI) -> None:
    """Serve the dashboard under `/ui/`, with each known type's pages; `/` and `/ui` lead
    to it."""
    app.include_router(router)
    taken = built_in_segments()
    for plugin in catalog():
        for page in plugin.dashboard_pages:
            problem = page_path_problem(page.path, taken)
            if problem is not None:
                raise ValueError(
                    f"dashboard page {page.path!r} of item type {plugin.name}: {problem}"
                )
            taken.add(page.path)
            app.add_api_route(
                f"{UI_PREFIX}/{page.path}",
                type_page_route(plugin.name, page),
                methods=["GET"],
                response_class=HTMLResponse,
                include_in_schema=False,
                name=f"ui-{plugin.name}-{page.path}",
            )
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=STATIC_DIRECTORY), name="ui-static")
    app.add_api_route("/", _to_dashboard, methods=["GET"], include_in_schema=False)
    app.add_api_route(UI_PREFIX, _to_dashboard, methods=["GET"], include_in_schema=False)
    app.add_middleware(DashboardHeaders)


# One plain path segment: no parameters, no nesting under a built-in page.
PAGE_PATH = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def built_in_segments() -> set[str]:
    """The first path segments the dashboard's own pages and files use under `/ui/`."""
    segments = {"", "static"}
    for route in router.routes:
        path = getattr(route, "path", "")
        if path.startswith(UI_PREFIX):
            segments.add(path[len(UI_PREFIX) :].lstrip("/").split("/", 1)[0])
    return segments


def page_path_problem(path: str, taken: set[str]) -> str | None:
    """Why a type's page cannot be served at `/ui/<path>`, or None."""
    if not PAGE_PATH.fullmatch(path):
        return "a page path is one lower-case segment of letters, digits and '-'"
    if path in taken:
        return "the path is already a page of the dashboard or of another type"
    return None


def _to_dashboard(request: Request) -> RedirectResponse:
    return RedirectResponse(f"{request.scope.get('root_path', '')}{UI_PREFIX}/", status_code=307)
