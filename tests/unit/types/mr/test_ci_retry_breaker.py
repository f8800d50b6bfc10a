"""The CI retry circuit breaker (in `ci_retry_breaker.py`), on a fake clock."""

from __future__ import annotations

import logging
import threading

import pytest

from workqueue.types.mr.executors.ci_retry_breaker import BreakerState, RetryCircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


def test_admits_up_to_the_limit_then_opens_for_the_window(clock, caplog):
    breaker = RetryCircuitBreaker(3, 60, clock=clock)
    for _ in range(3):
        assert breaker.acquire().admitted
        clock.now += 1
    assert not breaker.is_open()
    with caplog.at_level(logging.WARNING):
        refused = breaker.acquire()
        clock.now += 10
        again = breaker.acquire()
    assert (refused.admitted, refused.wait_seconds, refused.ticket) == (False, 60, None)
    assert (again.admitted, again.wait_seconds) == (False, 50)
    assert breaker.is_open()
    opened = [r for r in caplog.records if "circuit breaker OPEN" in r.getMessage()]
    assert len(opened) == 1  # logged once, when it opens
    assert opened[0].levelno == logging.WARNING


def test_stays_open_for_the_whole_window_then_closes_with_a_clean_slate(clock):
    breaker = RetryCircuitBreaker(2, 60, clock=clock)
    breaker.acquire()
    breaker.acquire()
    assert not breaker.acquire().admitted  # opens at t=1000
    clock.now += 59.9
    assert not breaker.acquire().admitted
    clock.now += 0.1
    assert not breaker.is_open()
    assert breaker.state().retries_in_window == 0
    assert breaker.acquire().admitted
    assert breaker.acquire().admitted
    assert not breaker.acquire().admitted  # and it opens again


def test_the_window_slides(clock):
    breaker = RetryCircuitBreaker(2, 60, clock=clock)
    breaker.acquire()
    clock.now += 40
    breaker.acquire()
    clock.now += 20  # the first retry leaves the window
    assert breaker.acquire().admitted
    assert not breaker.acquire().admitted


def test_a_released_slot_is_free_again(clock):
    breaker = RetryCircuitBreaker(1, 60, clock=clock)
    admission = breaker.acquire()
    assert admission.ticket is not None
    breaker.release(admission.ticket)
    breaker.release(admission.ticket)  # twice: harmless
    assert breaker.acquire().admitted
    assert breaker.state().admitted_total == 1


def test_state_for_metrics(clock):
    breaker = RetryCircuitBreaker(1, 60, clock=clock)
    assert breaker.state() == BreakerState(
        open=False,
        retries_in_window=0,
        max_retries=1,
        window_seconds=60,
        seconds_until_close=0.0,
        admitted_total=0,
        refused_total=0,
        opened_total=0,
    )
    breaker.acquire()
    breaker.acquire()
    clock.now += 15
    breaker.acquire()
    assert breaker.state() == BreakerState(
        open=True,
        retries_in_window=1,
        max_retries=1,
        window_seconds=60,
        seconds_until_close=45,
        admitted_total=1,
        refused_total=2,
        opened_total=1,
    )


@pytest.mark.parametrize(("max_retries", "window"), [(0, 60), (1, 0), (1, -1)])
def test_rejects_nonsense(max_retries, window):
    with pytest.raises(ValueError):
        RetryCircuitBreaker(max_retries, window)


def test_concurrent_acquires_admit_exactly_the_limit():
    breaker = RetryCircuitBreaker(50, 3600)
    results: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def worker():
        barrier.wait()
        for _ in range(20):
            admitted = breaker.acquire().admitted
            with lock:
                results.append(admitted)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 50
    assert len(results) == 320
    state = breaker.state()
    assert (state.admitted_total, state.refused_total, state.opened_total) == (50, 270, 1)
