"""`submission_keys` on a real database: one answer per caller's key under concurrency,
expiry, and the safety sweep deleting expired keys."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import sqlalchemy as sa
from harness import running_manager, wait_until
from sample_type import Behaviour, build_registry, create_item

from workqueue.queue.submission_keys import repository as keys

KEY = keys.CallerKey("https://issuer.example", "bot", "sync-1")


def answer(item_id: uuid.UUID, digest: str = "sha256:a") -> keys.StoredAnswer:
    return keys.StoredAnswer("sample", digest, item_id, 201, "created")


def new_item(sessions) -> uuid.UUID:
    with sessions() as session:
        item_id = create_item(session, ["a"])
        session.commit()
    return item_id


def waiting_advisory_locks(sessions) -> int:
    with sessions() as session:
        return int(
            session.execute(
                sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            ).scalar_one()
        )


def test_a_second_transaction_with_the_key_waits_and_finds_the_first_answer(sessions):
    item_id = new_item(sessions)
    found: list[keys.StoredAnswer | None] = []

    def second() -> None:
        with sessions() as session:
            keys.lock_key(session, KEY)
            found.append(keys.find_answer(session, KEY))
            session.commit()

    with sessions() as first:
        keys.lock_key(first, KEY)
        assert keys.find_answer(first, KEY) is None
        waiter = threading.Thread(target=second)
        waiter.start()
        wait_until(lambda: waiting_advisory_locks(sessions) == 1, what="the second to wait")
        keys.record_answer(first, KEY, answer(item_id), lifetime=timedelta(hours=24))
        first.commit()
    waiter.join(timeout=30)
    assert found == [answer(item_id)]


def test_keys_of_other_callers_do_not_wait_for_each_other(sessions):
    other = keys.CallerKey(KEY.issuer, "another-bot", KEY.key)
    with sessions() as first, sessions() as second:
        keys.lock_key(first, KEY)
        keys.lock_key(second, other)  # would block the test if it waited
        assert keys.find_answer(second, KEY) is None


def test_an_expired_key_is_a_new_key_and_the_sweep_deletes_it(sessions):
    expired, live = new_item(sessions), new_item(sessions)
    later = keys.CallerKey(KEY.issuer, KEY.identity, "sync-2")
    with sessions() as session:
        keys.record_answer(session, KEY, answer(expired), lifetime=timedelta(seconds=-1))
        keys.record_answer(session, later, answer(live), lifetime=timedelta(hours=24))
        session.commit()
    with sessions() as session:
        assert keys.find_answer(session, KEY) is None
        # Recorded again over the expired row, as a new submission would.
        keys.record_answer(session, KEY, answer(live, "sha256:b"), lifetime=timedelta(seconds=-1))
        session.commit()

    def stored() -> set[str]:
        with sessions() as session:
            rows = session.execute(sa.text("SELECT idempotency_key FROM submission_keys"))
            return {row.idempotency_key for row in rows}

    assert stored() == {"sync-1", "sync-2"}
    with running_manager(sessions, build_registry(Behaviour())):
        # The first safety sweep runs as the manager starts.
        wait_until(lambda: stored() == {"sync-2"}, what="the sweep to delete the expired key")


def test_a_deleted_item_takes_its_keys(sessions):
    item_id = new_item(sessions)
    with sessions() as session:
        keys.record_answer(session, KEY, answer(item_id), lifetime=timedelta(hours=24))
        session.execute(sa.text("DELETE FROM work_items WHERE id = :id"), {"id": item_id})
        session.commit()
    with sessions() as session:
        assert keys.find_answer(session, KEY) is None
