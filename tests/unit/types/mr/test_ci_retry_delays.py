"""`RetryDelays`: when a delayed CI retry is due (in `ci_retry_delays.py`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from workqueue.types.mr.executors.ci_retry_delays import RetryDelays

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
ITEM = uuid.uuid4()
MINUTE = timedelta(minutes=1)


def test_first_sight_books_the_whole_delay_and_the_woken_run_is_due():
    delays = RetryDelays()
    assert delays.remaining((ITEM, 1), MINUTE, NOW) == MINUTE
    assert delays.remaining((ITEM, 1), MINUTE, NOW + MINUTE) == timedelta(0)
    assert delays.remaining((ITEM, 1), MINUTE, NOW + 2 * MINUTE) == timedelta(0)


def test_an_early_run_waits_only_for_the_rest():
    delays = RetryDelays()
    delays.remaining((ITEM, 1), MINUTE, NOW)
    assert delays.remaining((ITEM, 1), MINUTE, NOW + timedelta(seconds=45)) == timedelta(seconds=15)


def test_each_job_waits_its_own_delay():
    delays = RetryDelays()
    delays.remaining((ITEM, 1), MINUTE, NOW)
    assert delays.remaining((ITEM, 2), MINUTE, NOW + MINUTE) == MINUTE
    assert delays.remaining((uuid.uuid4(), 1), MINUTE, NOW + MINUTE) == MINUTE


def test_no_delay_books_nothing():
    delays = RetryDelays()
    assert delays.remaining((ITEM, 1), timedelta(0), NOW) == timedelta(0)
    assert len(delays) == 0


def test_forget_and_expiry():
    delays = RetryDelays()
    delays.remaining((ITEM, 1), MINUTE, NOW)
    delays.forget((ITEM, 1))
    delays.forget((ITEM, 1))
    assert len(delays) == 0
    delays.remaining((ITEM, 2), MINUTE, NOW)
    delays.remaining((ITEM, 3), MINUTE, NOW + timedelta(days=2))  # prunes the stale booking
    assert len(delays) == 1
