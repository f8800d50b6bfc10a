"""Jinja2 rendering of dashboard pages: a whole page, or only its content for htmx.

Autoescape is on for every template: titles, branches, errors and details
come from untrusted callers and GitLab, and are always text, never markup.
A request htmx makes for part of a page (`HX-Request` without
`HX-Boosted`: live refresh, a button, the first load after pasting a token)
gets the content without the surrounding layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import ChoiceLoader, Environment, PackageLoader, PrefixLoader, StrictUndefined

from workqueue import __version__
from workqueue.api.caller_state import Caller
from workqueue.types.catalog import catalog
from workqueue.types.plugin import DashboardPage
from workqueue.ui import views

REFRESH_SECONDS = 5


@dataclass(frozen=True, slots=True)
class NavLink:
    path: str
    title: str


def type_template(page: DashboardPage) -> str:
    """A type page's template name: its package, then the file in that package's templates."""
    return f"{page.package}/{page.template}"


@cache
def environment() -> Environment:
    """The dashboard's templates, then each type's own (`types/<name>/templates/`),
    named `<package>/<file>`. Built on first use: the catalog loads the types."""
    packages = {page.package for plugin in catalog() for page in plugin.dashboard_pages}
    environment = Environment(
        loader=ChoiceLoader(
            [
                PackageLoader("workqueue.ui", "templates"),
                PrefixLoader(
                    {package: PackageLoader(package, "templates") for package in packages}
                ),
            ]
        ),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals.update(
        views=views,
        version=__version__,
        refresh_seconds=REFRESH_SECONDS,
    )
    return environment


def wants_fragment(request: Request) -> bool:
    headers = request.headers
    return headers.get("hx-request") == "true" and headers.get("hx-boosted") != "true"


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    caller: Caller | None,
    status_code: int = 200,
    nav: Sequence[NavLink] = (),
) -> HTMLResponse:
    """The page (or its content) as HTML; `nav` lists the type pages to link."""
    page = environment().get_template(template)
    html = page.render(
        {
            **context,
            "layout": "fragment.html" if wants_fragment(request) else "layout.html",
            "caller": caller,
            "nav": nav,
            "root": request.scope.get("root_path", ""),
            "here": _here(request),
            "now": views.now(),
        }
    )
    # Whole pages and fragments differ for one URL: caches must keep them apart.
    return HTMLResponse(html, status_code=status_code, headers={"Vary": "HX-Request"})


def _here(request: Request) -> str:
    """This page's path and query, for live refresh and reloading after sign-in."""
    url = request.scope.get("root_path", "") + request.url.path
    return f"{url}?{request.url.query}" if request.url.query else url
