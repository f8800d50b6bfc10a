"""Alembic environment: runs against the engine the caller passes in `attributes`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from workqueue.db.migrate import VERSION_TABLE
from workqueue.schema import target_metadata

config = context.config


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        raise RuntimeError("run migrations through workqueue.db.migrate (it supplies the engine)")
    with engine.connect() as connection:
        # Fail fast rather than queue behind long transactions of a live service.
        connection.execute(text("SET lock_timeout = '10s'"))
        connection.execute(text("SET statement_timeout = '300s'"))
        connection.commit()
        context.configure(
            connection=connection,
            target_metadata=target_metadata(),
            version_table=VERSION_TABLE,
            compare_type=True,
            compare_server_default=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
