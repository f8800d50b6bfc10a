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
from workqueue.queue.enqueue import advisory_lock_key
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


def test_0004_scopes_existing_items_and_keys_the_newest_live_generation(server_url):
    """Before 0004 nothing stopped two live generations of one branch; the upgrade must
    still succeed, giving the live key to the newest one only."""
    url, engine = _fresh_engine(server_url)
    try:
        command.upgrade(alembic_config(engine), "0003")
        with engine.begin() as connection:
            for generation, phase in ((1, "failed"), (2, "active"), (3, "completed")):
                item_id = connection.execute(
                    sa.text(
                        "INSERT INTO work_items (item_type, phase, caller_identity, generation, "
                        "idempotency_key) VALUES ('mr', :phase, 'bot', :generation, :key) "
                        "RETURNING id"
                    ),
                    {"phase": phase, "generation": generation, "key": f"mr:g/p:b:{generation}"},
                ).scalar_one()
                connection.execute(
                    sa.text(
                        "INSERT INTO mr_details (id, project, source_branch, title, "
                        "commit_message, file_actions, content_hash) "
                        "VALUES (:id, 'g/p', 'b', 't', 'm', '[]', 'h')"
                    ),
                    {"id": item_id},
                )
        upgrade_to_head(engine)
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT generation, project_path, live_key, caller_issuer FROM work_items "
                    "ORDER BY generation"
                )
            ).all()
        assert [tuple(row) for row in rows] == [
            (1, "g/p", None, None),
            (2, "g/p", "mr:g/p:b", None),
            (3, "g/p", None, None),
        ]
    finally:
        engine.dispose()
        drop_database(server_url, url)
