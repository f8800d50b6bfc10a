"""Attack-review: odd values in audit entries reach the database history (real PostgreSQL):
each must be stored (made storable, as NUL characters are), and one entry jsonb refuses
must not take the other entries of its batch with it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from workqueue.queue.audit.history import AuditHistory
from workqueue.queue.audit.log import AuditEntry

ODD = {
    "nul": {"reason": "a\x00b", "details": {"k\x00": "v\x00"}},
    "non_ascii": {"reason": "é ☃ 😀", "details": {"ü": ["😀"]}},
    "nan_inf": {"details": {"n": float("nan"), "i": [float("-inf")]}},
    "huge_int": {"details": {"i": 10**40}},
    "nested_times_uuids": {"details": {"l": [datetime.now(UTC), uuid.uuid4()]}},
    "lone_surrogate_reason": {"reason": "bad \ud800 text"},
    "lone_surrogate_details": {"details": {"title": "bad \udfff text"}},
    "lone_surrogate_key": {"details": {"\ud800": 1}},
}


def stored_ids(sessions) -> set[uuid.UUID]:
    with sessions() as session:
        return set(session.execute(sa.text("SELECT entry_id FROM audit_entries")).scalars())


@pytest.mark.parametrize("kind", sorted(ODD))
def test_an_odd_entry_is_stored_and_does_not_lose_its_neighbours(sessions, kind):
    history = AuditHistory(sessions, retention=timedelta(days=1))
    good = [AuditEntry("phase_change", reason="fine") for _ in range(2)]
    odd = AuditEntry("phase_change", **ODD[kind])
    with sessions() as session:
        ok = history.store_in(session, [good[0], odd, good[1]])
        session.commit()
    assert ok
    assert stored_ids(sessions) == {good[0].entry_id, odd.entry_id, good[1].entry_id}


def test_an_entry_the_database_refuses_costs_only_itself(sessions):
    """The writer's batch fails three times, then each entry goes alone."""
    history = AuditHistory(sessions, retention=timedelta(days=1))
    with sessions() as session:
        # Something jsonb cleaning cannot foresee: the database refuses one row.
        session.execute(
            sa.text(
                "ALTER TABLE audit_entries ADD CONSTRAINT review_refuses "
                "CHECK (reason IS DISTINCT FROM 'refused')"
            )
        )
        session.commit()
    try:
        entries = [
            AuditEntry("phase_change", reason="fine"),
            AuditEntry("phase_change", reason="refused"),
            AuditEntry("phase_change", reason="fine too"),
        ]
        history._write(entries)  # the writer thread's step, run here
        assert stored_ids(sessions) == {entries[0].entry_id, entries[2].entry_id}
    finally:
        with sessions() as session:
            session.execute(sa.text("ALTER TABLE audit_entries DROP CONSTRAINT review_refuses"))
            session.commit()
