"""Creating and dropping throwaway databases on the test cluster."""

from __future__ import annotations

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
