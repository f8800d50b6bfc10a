"""Probes and scrape-time gauges have a small pool of their own, and a scrape storm is cheap."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import sqlalchemy as sa
from live_app import live_client
from mr_harness import TOKEN

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.runtime import EXTRA_CONNECTIONS
from workqueue.settings import Settings
from workqueue.types.plugin import InstallContext

WORKERS = 2


def _app(database_url, simulator, **options):
    config = ServiceConfig.model_validate(
        {
            "processing": {"workers": WORKERS, "lease_seconds": 3, "heartbeat_seconds": 1},
            "handled_types": {"mr": {"gitlab_url": simulator.url}},
        }
    )
    return create_app(
        Settings(WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user"),
        config,
        database_url=database_url,
        process_items=False,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
        **options,
    )


def test_probes_and_metrics_answer_while_the_work_pool_is_exhausted(database_url, simulator):
    app = _app(database_url, simulator, metrics_cache_seconds=30)
    with live_client(app) as client, ExitStack() as held:
        work_engine = app.state.runtime.engine
        connections = 2 * (WORKERS + EXTRA_CONNECTIONS)  # pool_size + max_overflow
        for _ in range(connections):
            held.enter_context(work_engine.connect())
        assert work_engine.pool.checkedout() == connections

        assert client.get("/readyz", timeout=10).json() == {"status": "ready"}
        scraped = client.get("/metrics", timeout=10)
        assert scraped.status_code == 200
        assert "workqueue_items" in scraped.text
        assert 'workqueue_oldest_due_item_age_seconds{item_type="mr"}' in scraped.text

        # A scrape storm within the cache interval: no query at all (the
        # scrape above filled the cache), however many scrapes at once.
        statements: list[str] = []
        sa.event.listen(
            app.state.probe_engine,
            "before_cursor_execute",
            lambda _conn, _cursor, statement, *_rest: statements.append(statement),
        )
        answers: list[int] = []
        scrapers = [
            threading.Thread(
                target=lambda: answers.append(client.get("/metrics", timeout=10).status_code)
            )
            for _ in range(20)
        ]
        for scraper in scrapers:
            scraper.start()
        for scraper in scrapers:
            scraper.join(30)
        assert answers == [200] * 20
        assert [s for s in statements if "work_items" in s] == []


def test_a_scrape_storm_after_the_interval_issues_one_query_per_gauge(database_url, simulator):
    app = _app(database_url, simulator, metrics_cache_seconds=30)
    with live_client(app) as client:
        statements: list[str] = []
        sa.event.listen(
            app.state.probe_engine,
            "before_cursor_execute",
            lambda _conn, _cursor, statement, *_rest: statements.append(statement),
        )
        answers: list[int] = []
        scrapers = [
            threading.Thread(
                target=lambda: answers.append(client.get("/metrics", timeout=10).status_code)
            )
            for _ in range(20)
        ]
        for scraper in scrapers:
            scraper.start()
        for scraper in scrapers:
            scraper.join(30)
        assert answers == [200] * 20
        counts = [s for s in statements if "GROUP BY 1, 2" in s]
        oldest = [s for s in statements if "age_seconds" in s]
        assert (len(counts), len(oldest)) == (1, 1)
