"""An app built by `create_app` on a test database, with the GitLab simulator behind it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from live_app import live_client
from mr_harness import TOKEN

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.plugin import InstallContext

LOCAL_USER = "dev-user"


@contextmanager
def build_client(
    database_url: Any,
    simulator: GitLabSimulator,
    *,
    local_user: str | None = LOCAL_USER,
    webhook_secret: str | None = None,
    rules: tuple[dict[str, Any], ...] = (),
    limits: dict[str, Any] | None = None,
    handled_types: dict[str, Any] | None = None,
    notifications: dict[str, Any] | None = None,
    signals: dict[str, Any] | None = None,
    **app_options: Any,
) -> Iterator[httpx.Client]:
    settings = Settings(
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER=local_user,
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=webhook_secret,
    )
    config = ServiceConfig.model_validate(
        {
            "authorization": {"rules": list(rules), "limits": limits or {}},
            "processing": {
                "workers": 2,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.2,
            },
            "handled_types": (
                {"mr": {"gitlab_url": simulator.url}} if handled_types is None else handled_types
            ),
            "notifications": notifications or {},
            "signals": signals or {},
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
        **app_options,
    )
    with live_client(app) as client:
        yield client
