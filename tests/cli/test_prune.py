"""`workqueue-service prune` as an operator runs it: a real process against real PostgreSQL.

The database is seeded with SQL: MR items in every phase, old and recent,
each with a detail row, dimension rows, a pending event, audit entries, an
outbox delivery and an attention membership, so that what goes and what
stays can be read back row by row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.slow

OLD = "now() - interval '100 days'"
RECENT = "now() - interval '10 days'"


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workqueue", "prune", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def env(database_url, tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    return {
        **clean,
        "DATABASE_URL": database_url.render_as_string(hide_password=False),
        "WORKQUEUE_SERVICE_CONFIG": str(tmp_path / "unused.yml"),
    }


def _seed(connection: psycopg.Connection, phase: str, finished: str) -> uuid.UUID:
    """One MR item with a row in every table that refers to items."""
    item_id = uuid.uuid4()
    connection.execute(
        "INSERT INTO work_items (id, item_type, phase, caller_identity, created_at, updated_at)"
        f" VALUES (%s, 'mr', %s, 'tester', {finished}, {finished})",
        (item_id, phase),
    )
    connection.execute(
        "INSERT INTO mr_details (id, project, source_branch, title, commit_message,"
        " file_actions, content_hash)"
        " VALUES (%s, 'group/app', %s, 't', 'm', '[]', 'h')",
        (item_id, f"workqueue/{item_id}"),
    )
    connection.execute(
        "INSERT INTO work_item_statuses (work_item_id, dimension, status)"
        " VALUES (%s, 'needs_mr', 'false'), (%s, 'needs_reconcile', 'false')",
        (item_id, item_id),
    )
    connection.execute(
        "INSERT INTO pending_events (work_item_id, event_type, body) VALUES (%s, 'x', '{}')",
        (item_id,),
    )
    for _ in range(3):
        connection.execute(
            "INSERT INTO audit_entries (entry_id, occurred_at, work_item_id, event_type, actor)"
            f" VALUES (%s, {finished}, %s, 'phase_change', 'engine')",
            (uuid.uuid4(), item_id),
        )
    connection.execute(
        "INSERT INTO outbox_deliveries (event_id, subscriber, event_type, work_item_id, data)"
        " VALUES (%s, 'hooks', 'item.completed', %s, '{}')",
        (uuid.uuid4(), item_id),
    )
    connection.execute(
        "INSERT INTO attention_memberships (queue_id, work_item_id, added_by)"
        " SELECT id, %s, 'rule' FROM attention_queues WHERE name = 'review'",
        (item_id,),
    )
    return item_id


@pytest.fixture
def seeded(conninfo: str) -> dict[str, list[uuid.UUID]]:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("INSERT INTO attention_queues (name) VALUES ('review')")
        return {
            "old_finished": [
                _seed(connection, phase, OLD)
                for phase in ("completed", "completed", "failed", "cancelled", "cancelled")
            ],
            "old_active": [_seed(connection, "active", OLD)],
            "recent_finished": [_seed(connection, "completed", RECENT)],
        }


# Every table whose rows are about one item, and its item column.
ITEM_TABLES = {
    "work_items": "id",
    "mr_details": "id",
    "work_item_statuses": "work_item_id",
    "pending_events": "work_item_id",
    "audit_entries": "work_item_id",
    "outbox_deliveries": "work_item_id",
    "attention_memberships": "work_item_id",
}


def _rows_about(conninfo: str, item_ids: list[uuid.UUID]) -> dict[str, int]:
    with psycopg.connect(conninfo) as connection:
        counts = {}
        for table, column in ITEM_TABLES.items():
            row = connection.execute(
                f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)",
                (item_ids,),
            ).fetchone()
            counts[table] = row[0] if row else -1
        return counts


def test_prune_deletes_old_finished_items_and_every_row_about_them(env, conninfo, seeded):
    result = _run(["--older-than", "90d", "--batch-size", "2"], env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "pruned 5 items, 10 dimension rows, 5 pending events, 15 audit entries, "
        "5 outbox deliveries in 3 batches"
    ), result.stdout
    assert set(_rows_about(conninfo, seeded["old_finished"]).values()) == {0}
    kept = seeded["old_active"] + seeded["recent_finished"]
    assert _rows_about(conninfo, kept) == {
        "work_items": 2,
        "mr_details": 2,
        "work_item_statuses": 4,
        "pending_events": 2,
        "audit_entries": 6,
        "outbox_deliveries": 2,
        "attention_memberships": 2,
    }


def test_prune_is_idempotent(env, conninfo, seeded):
    first = _run(["--older-than", "90d"], env)
    second = _run(["--older-than", "90d"], env)

    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.startswith("pruned 5 items")
    assert "in 1 batches" in first.stdout
    assert second.stdout.startswith("pruned 0 items")
    assert "in 0 batches" in second.stdout
    kept = seeded["old_active"] + seeded["recent_finished"]
    assert _rows_about(conninfo, kept)["work_items"] == 2


def test_a_shorter_age_reaches_the_recent_items_too(env, conninfo, seeded):
    result = _run(["--older-than", "1w"], env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pruned 6 items")
    assert _rows_about(conninfo, seeded["old_active"])["work_items"] == 1


def test_dry_run_counts_and_deletes_nothing(env, conninfo, seeded):
    result = _run(["--older-than", "90d", "--dry-run"], env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "dry run: would prune 5 items, 10 dimension rows, 5 pending events, "
        "15 audit entries, 5 outbox deliveries"
    ), result.stdout
    assert _rows_about(conninfo, seeded["old_finished"])["work_items"] == 5


def test_an_item_someone_holds_is_skipped_not_waited_for(env, conninfo, seeded):
    held = seeded["old_finished"][0]
    with psycopg.connect(conninfo) as holder:
        holder.execute("SELECT 1 FROM work_items WHERE id = %s FOR UPDATE", (held,))
        result = _run(["--older-than", "90d"], env)
        holder.rollback()

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pruned 4 items")
    assert _rows_about(conninfo, [held])["work_items"] == 1
    assert _run(["--older-than", "90d"], env).stdout.startswith("pruned 1 items")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "90"], "--older-than must be a whole number and a unit"),
        (["--older-than", "0d"], "--older-than must be a whole number and a unit"),
        (["--older-than", "-5d"], "--older-than must be a whole number and a unit"),
        (["--older-than", "3 months"], "--older-than must be a whole number and a unit"),
        (["--older-than", "90d", "--batch-size", "0"], "--batch-size must be between 1 and"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["WORKQUEUE_SERVICE_DATA_DIR"] = str(tmp_path / "never-created")

    result = _run(args, env)

    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "never-created").exists()


def test_an_unreachable_database_is_one_line_and_exit_1(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["DATABASE_URL"] = "postgresql://prune:secret-password@127.0.0.1:1/none"

    result = _run(["--older-than", "90d"], env)

    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "secret-password" not in result.stderr
    assert "Traceback" not in result.stderr
