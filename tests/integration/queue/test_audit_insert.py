"""`audit_repository.insert_entries`, the statement every step's audit entries go through:
every field survives exactly, ids follow the entries' order, repeats are skipped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from workqueue.queue.audit import repository as audit_repository
from workqueue.queue.audit.history import history_row
from workqueue.queue.audit.log import AuditEntry

COLUMNS = (
    "entry_id, occurred_at, work_item_id, item_type, event_type, actor, reason,"
    " before, after, details"
)


def stored(sessions, entry_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    with sessions() as session:
        rows = session.execute(
            sa.text(f"SELECT id, {COLUMNS} FROM audit_entries WHERE entry_id = ANY(:ids)"),
            {"ids": entry_ids},
        )
        return sorted((dict(row._mapping) for row in rows), key=lambda row: row["id"])


def test_every_field_is_stored_as_written_and_ids_follow_the_entries(sessions):
    awkward = 'quote " backslash \\ comma , braces {} ünïcode ✓ newline \n tab \t'
    entries = [
        AuditEntry(
            "action_outcome",
            work_item_id=uuid.uuid4(),
            item_type="mr",
            actor="alice",
            before={"phase": "active", "n": [1, 2.5, None, True]},
            after={"outcome": "succeeded", "nested": {"deep": [{"k": awkward}]}},
            reason=awkward,
            details={"attempt": 3, "big": 2**62, "text": awkward},
            timestamp=datetime(2026, 12, 1, 16, 0, 0, 123456, tzinfo=UTC),
        ),
        # No item, no before/after, no details, a time at +02:00 with no fraction.
        AuditEntry(
            "authorization_denied",
            timestamp=datetime(2026, 12, 1, 18, 0, tzinfo=timezone(timedelta(hours=2))),
        ),
        *(AuditEntry("merge_not_now", work_item_id=uuid.uuid4()) for _ in range(5)),
    ]
    with sessions() as session:
        audit_repository.insert_entries(session, [history_row(entry) for entry in entries])
        session.commit()

    rows = stored(sessions, [entry.entry_id for entry in entries])
    assert [row["entry_id"] for row in rows] == [entry.entry_id for entry in entries]
    for row, entry in zip(rows, entries, strict=True):
        expected = history_row(entry)
        assert {name: row[name] for name in expected} == expected
    assert rows[1]["before"] is None  # SQL NULL, not JSON null
    assert rows[1]["after"] is None
    assert rows[1]["work_item_id"] is None
    assert rows[1]["reason"] is None
    assert rows[0]["occurred_at"] == entries[0].timestamp  # to the microsecond


def test_an_entry_stored_before_is_skipped_and_the_others_are_stored(sessions):
    first = AuditEntry("phase_change", work_item_id=uuid.uuid4(), reason="first")
    with sessions() as session:
        audit_repository.insert_entries(session, [history_row(first)])
        session.commit()
    again = AuditEntry(
        "phase_change",
        work_item_id=first.work_item_id,
        reason="changed",
        entry_id=first.entry_id,
    )
    other = AuditEntry("phase_change", work_item_id=first.work_item_id)
    with sessions() as session:
        audit_repository.insert_entries(session, [history_row(again), history_row(other)])
        audit_repository.insert_entries(session, [])
        session.commit()

    rows = stored(sessions, [first.entry_id, other.entry_id])
    assert [(row["entry_id"], row["reason"]) for row in rows] == [
        (first.entry_id, "first"),
        (other.entry_id, None),
    ]
