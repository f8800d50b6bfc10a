"""Array literals built in Python read back in PostgreSQL as the values they were built from."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import psycopg

from workqueue.queue import pg_arrays

AWKWARD_TEXTS = [
    "",
    "plain",
    "NULL",
    'with "quotes"',
    "back\\slash",
    "comma, and {braces}",
    "  leading and trailing spaces  ",
    "tab\tnew\nline",
    "ünïcödé ✓",
    None,
]


def _read_back(conninfo: str, literal: str, array_type: str) -> list[object]:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(f"SELECT %s::{array_type}", (literal,)).fetchone()
    assert row is not None
    return list(row[0])


def test_texts_survive_quoting(conninfo):
    assert _read_back(conninfo, pg_arrays.texts(AWKWARD_TEXTS), "text[]") == AWKWARD_TEXTS


def test_uuids_and_nulls(conninfo):
    values = [uuid.uuid4(), None, uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]
    assert _read_back(conninfo, pg_arrays.uuids(values), "uuid[]") == values


def test_timestamps_keep_the_microsecond_and_the_offset(conninfo):
    values = [
        datetime(2026, 12, 1, 13, 45, 7, 123456, tzinfo=UTC),
        datetime(2026, 12, 1, 13, 45, 7, tzinfo=UTC),  # no fraction: isoformat omits it
        datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-7))),
        None,
    ]
    assert _read_back(conninfo, pg_arrays.timestamps(values), "timestamptz[]") == values


def test_booleans_and_empty_arrays(conninfo):
    assert _read_back(conninfo, pg_arrays.booleans([True, False, True]), "boolean[]") == [
        True,
        False,
        True,
    ]
    assert _read_back(conninfo, pg_arrays.uuids([]), "uuid[]") == []
    assert _read_back(conninfo, pg_arrays.texts([]), "text[]") == []
