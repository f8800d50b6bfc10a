"""Serve the service (with the webhook receiver) in a child process, for the load test.

Usage: python serve_webhook_app.py DATABASE_URL GITLAB_URL PORT

A separate process gives the server its own GIL, so the load generator in the
test process does not slow it down. Items are not processed.
"""

from __future__ import annotations

import sys

import uvicorn
from sqlalchemy.engine import make_url
from webhook_support import (
    SECRETS,
    ensure_mr_resolvers,
    install_context,
    service_config,
    wire_webhooks,
)

from workqueue.api.app import create_app
from workqueue.settings import Settings
from workqueue.types import catalog


def with_mr_resolvers() -> None:
    """Make `build_registry` register the MR resolvers (until install_mr does it itself)."""
    known_types = catalog.known_types

    def patched() -> dict[str, catalog.TypeInstaller]:
        installers = dict(known_types())
        install_mr = installers["mr"]

        def install(registry, section, context):
            install_mr(registry, section, context)
            ensure_mr_resolvers(registry.get("mr"))

        installers["mr"] = install
        return installers

    catalog.known_types = patched


def main() -> None:
    database_url, gitlab_url, port = make_url(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with_mr_resolvers()
    settings = Settings(WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRETS)
    app = create_app(
        settings,
        service_config(gitlab_url),
        database_url=database_url,
        process_items=False,
        type_context=install_context(),
    )
    wire_webhooks(app, settings)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
