"""Creating and dropping throwaway databases on the test cluster."""

from __future__ import annotations

import threading
import uuid

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL

from workqueue.db.url import libpq_conninfo


def admin_connection(server_url: URL) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(libpq_conninfo(server_url), autocommit=True)


def create_database_from(server_url: URL, template: str) -> URL:
    name = f"workqueue_test_{uuid.uuid4().hex[:12]}"
    with admin_connection(server_url) as connection:
        connection.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return server_url.set(database=name)


def drop_database(server_url: URL, url: URL) -> None:
    with admin_connection(server_url) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(url.database or "")
            )
        )


class DatabasePool:
    """Fresh copies of the template made ahead, and used ones dropped, by a thread of its own.

    A copy and a drop take ~0.1 s each; done here, a test waits for neither (about
    2,000 tests take a database). Each copy is still used by one test only.
    """

    def __init__(self, server_url: URL, template: str, *, ahead: int = 2) -> None:
        self._server_url = server_url
        self._template = template
        self._ahead = ahead
        self._ready: list[URL] = []
        self._used: list[URL] = []
        self._failure: BaseException | None = None
        self._closing = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._keep, name="test-database-pool", daemon=True)
        self._thread.start()

    def take(self) -> URL:
        with self._changed:
            while not self._ready and self._failure is None:
                self._changed.wait()
            if self._failure is not None:
                raise RuntimeError("the test database pool failed") from self._failure
            url = self._ready.pop(0)
            self._changed.notify_all()
            return url

    def give_back(self, url: URL) -> None:
        """Dropped soon, in the pool's thread (`WITH (FORCE)`: leftover sessions end)."""
        with self._changed:
            self._used.append(url)
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(120)
        for url in [*self._ready, *self._used]:
            drop_database(self._server_url, url)

    def _keep(self) -> None:
        try:
            while True:
                with self._changed:
                    while not (self._closing or self._used or len(self._ready) < self._ahead):
                        self._changed.wait()
                    if self._closing:
                        return
                    # A test waiting for a copy comes first; drops fill the gaps.
                    used = self._used.pop(0) if self._used and self._ready else None
                    if used is None and len(self._ready) >= self._ahead:
                        used = self._used.pop(0)
                if used is not None:
                    drop_database(self._server_url, used)
                    continue
                url = create_database_from(self._server_url, self._template)
                with self._changed:
                    self._ready.append(url)
                    self._changed.notify_all()
        except BaseException as failure:
            with self._changed:
                self._failure = failure
                self._changed.notify_all()
