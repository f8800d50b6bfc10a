"""Pages that item types add to the dashboard: served only where the type is handled,
never over a built-in path, and with the dashboard's headers under a root path."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from api_harness import build_client
from scoping_support import scoped_rules

from workqueue.types import catalog as catalog_module
from workqueue.types.catalog import Catalog
from workqueue.types.plugin import DashboardPage
from workqueue.ui import mount, pages, rendering
from workqueue.ui.browser_guard import DashboardHeaders


def _with_pages(monkeypatch, type_name: str, *extra: DashboardPage) -> None:
    real = catalog_module.catalog()
    plugins = [
        dataclasses.replace(p, dashboard_pages=(*p.dashboard_pages, *extra))
        if p.name == type_name
        else p
        for p in real
    ]
    patched = Catalog(plugins)
    for module in (mount, pages, rendering):
        monkeypatch.setattr(module, "catalog", lambda: patched)
    rendering.environment.cache_clear()


def test_a_page_of_a_type_this_replica_does_not_handle_answers_404(
    monkeypatch, database_url, simulator, issuer, admin
):
    """Its context need not ask the registry: the route answers 404 first."""
    page = DashboardPage(
        path="trunk-stats",
        title="Trunk stats",
        package="workqueue.ui",
        template="queues.html",
        context=lambda _runtime, _caller: {"queues": []},  # reads without asking the registry
    )
    _with_pages(monkeypatch, "trunk", page)
    try:
        with build_client(
            database_url,
            simulator,
            local_user=None,
            rules=scoped_rules(issuer.issuer),
            process_items=False,  # handles mr only
        ) as client:
            answer = client.get("/ui/trunk-stats", headers=admin)
            assert answer.status_code == 404
            assert '<a href="/ui/trunk-stats">' not in answer.text  # nor linked
    finally:
        rendering.environment.cache_clear()


def test_a_type_page_cannot_take_a_built_in_path(
    monkeypatch, database_url, simulator, issuer, admin
):
    page = DashboardPage(
        path="queues",
        title="MR queues",
        package="workqueue.ui",
        template="queues.html",
        context=lambda _runtime, _caller: {"queues": []},
    )
    _with_pages(monkeypatch, "mr", page)
    try:
        with (
            pytest.raises(ValueError, match="already a page of the dashboard"),
            build_client(
                database_url,
                simulator,
                local_user=None,
                rules=scoped_rules(issuer.issuer),
                process_items=False,
            ),
        ):
            pass
    finally:
        rendering.environment.cache_clear()


def test_dashboard_headers_apply_under_a_root_path():
    """Behind `--root-path /wq` the scope's path is `/wq/ui/...`."""

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"page"})

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/wq/ui/trunk",
        "root_path": "/wq",
        "headers": [],
        "query_string": b"",
    }
    asyncio.run(DashboardHeaders(app)(scope, receive, send))
    names = {name for name, _ in sent[0]["headers"]}
    assert {b"content-security-policy", b"x-frame-options", b"cache-control"} <= names
