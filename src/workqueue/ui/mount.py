"""Attach the dashboard to the service's app: pages, static files, headers, and `GET /`."""

from __future__ import annotations

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
    for plugin in catalog():
        for page in plugin.dashboard_pages:
            app.add_api_route(
                f"{UI_PREFIX}/{page.path}",
                type_page_route(page),
                methods=["GET"],
                response_class=HTMLResponse,
                include_in_schema=False,
                name=f"ui-{plugin.name}-{page.path}",
            )
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=STATIC_DIRECTORY), name="ui-static")
    app.add_api_route("/", _to_dashboard, methods=["GET"], include_in_schema=False)
    app.add_api_route(UI_PREFIX, _to_dashboard, methods=["GET"], include_in_schema=False)
    app.add_middleware(DashboardHeaders)


def _to_dashboard(request: Request) -> RedirectResponse:
    return RedirectResponse(f"{request.scope.get('root_path', '')}{UI_PREFIX}/", status_code=307)
