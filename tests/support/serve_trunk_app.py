"""Serve the whole service for the `trunk` type (HTTP, webhooks, processing) in a child
process, for tests that run several service processes against one database.

Usage: python serve_trunk_app.py DATABASE_URL GITLAB_URL PORT [MAX_CONCURRENT]
"""

from __future__ import annotations

import sys

import uvicorn
from mr_harness import TOKEN
from sqlalchemy.engine import make_url
from trunk_harness import SECRET, trunk_section

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.types.plugin import InstallContext


def main() -> None:
    database_url, gitlab_url, port = make_url(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    max_concurrent = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    settings = Settings(
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user",
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRET,
    )
    config = ServiceConfig.model_validate(
        {
            "processing": {
                "workers": 2,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.2,
            },
            "handled_types": {
                "trunk": trunk_section(gitlab_url, queue={"max_concurrent": max_concurrent})
            },
        }
    )
    app = create_app(
        settings,
        config,
        database_url=database_url,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
