"""Migrations and models describe the same schema; the SQL helpers match the Python ones."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from databases import create_database_from, drop_database

from workqueue.db.engine import build_engine
from workqueue.db.migrate import (
    VERSION_TABLE,
    alembic_config,
    current_revision,
    head_revision,
    upgrade_to_head,
)
from workqueue.queue.repository import advisory_lock_key
from workqueue.schema import target_metadata


def _fresh_engine(server_url):
    url = create_database_from(server_url, "template0")
    return url, build_engine(url, pool_size=1)


def test_models_and_migrations_agree(server_url):
    url, engine = _fresh_engine(server_url)
    try:
        upgrade_to_head(engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "version_table": VERSION_TABLE,
                },
            )
            differences = compare_metadata(context, target_metadata())
        assert differences == []
    finally:
        engine.dispose()
        drop_database(server_url, url)


def test_version_table_is_ours_and_upgrade_is_idempotent(server_url):
    url, engine = _fresh_engine(server_url)
    try:
        upgrade_to_head(engine)
        upgrade_to_head(engine)
        with engine.connect() as connection:
            assert current_revision(connection) == head_revision()
            tables = set(sa.inspect(connection).get_table_names())
        assert VERSION_TABLE in tables
        assert "alembic_version" not in tables
    finally:
        engine.dispose()
        drop_database(server_url, url)


def test_downgrade_to_base_and_back(server_url):
    url, engine = _fresh_engine(server_url)
    try:
        upgrade_to_head(engine)
        command.downgrade(alembic_config(engine), "base")
        with engine.connect() as connection:
            assert set(sa.inspect(connection).get_table_names()) == {VERSION_TABLE}
        upgrade_to_head(engine)
        with engine.connect() as connection:
            assert current_revision(connection) == head_revision()
    finally:
        engine.dispose()
        drop_database(server_url, url)


def test_sql_lock_key_matches_python(engine):
    ids = [uuid.uuid4() for _ in range(200)]
    ids += [
        uuid.UUID(int=0),
        uuid.UUID(int=2**128 - 1),
        uuid.UUID(int=2**63),
        uuid.UUID(int=2**64 - 1),
    ]
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text(
                "SELECT id, workqueue_item_lock_key(id) FROM unnest(CAST(:ids AS uuid[])) AS id"
            ),
            {"ids": ids},
        ).all()
    assert {row[0]: row[1] for row in rows} == {item: advisory_lock_key(item) for item in ids}
