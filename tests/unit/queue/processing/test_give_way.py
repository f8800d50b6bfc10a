"""Workers give way to a request path that falls behind (`queue.give_way`)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from workqueue.queue.processing.give_way import (
    HOLD_SECONDS,
    LAG_THRESHOLD_SECONDS,
    MAX_WAIT_PER_BATCH_SECONDS,
    OVERDUE_INTERVAL_SECONDS,
    SEVERE_LAG_SECONDS,
    WAIT_SECONDS,
    GiveWay,
    Waited,
)

MILD = (LAG_THRESHOLD_SECONDS + SEVERE_LAG_SECONDS) / 2
SEVERE = SEVERE_LAG_SECONDS * 2


class FakeClock:
    """Time that moves only when the rule sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def lags_by_time(clock: FakeClock, schedule: list[tuple[float, float]]) -> Callable[[], float]:
    """The lag reported at each moment: `schedule` is (from seconds after start, lag)."""
    start = clock.now

    def lag() -> float:
        elapsed = clock.now - start
        current = 0.0
        for begins, value in schedule:
            if elapsed + 1e-9 >= begins:
                current = value
        return current

    return lag


def waited(schedule: list[tuple[float, float]]) -> Waited:
    clock = FakeClock()
    rule = GiveWay(lags_by_time(clock, schedule), clock=clock, sleep=clock.sleep)
    return rule.wait(lambda: False)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ([(0, 0.0)], 0.0),  # keeping up: go on at once
        ([(0, LAG_THRESHOLD_SECONDS)], 0.0),  # at the threshold: go on
        ([(0, MILD), (0.05, 0.0)], 0.05),  # a little behind: wait until it catches up
        ([(0, MILD), (0.05, 0.0), (0.06, MILD)], 0.05),  # ... and not a moment longer
        # Far behind (last read so at 0.04): held for HOLD_SECONDS after that reading.
        ([(0, SEVERE), (0.05, 0.0)], 0.05 - WAIT_SECONDS + HOLD_SECONDS),
        ([(0, SEVERE), (0.05, MILD), (0.1, 0.0)], 0.05 - WAIT_SECONDS + HOLD_SECONDS),
        # A mild lag outlasting the hold keeps the batch waiting as long as it lasts.
        ([(0, SEVERE), (0.01, MILD), (0.4, 0.0)], 0.4),
        ([(0, MILD)], MAX_WAIT_PER_BATCH_SECONDS),  # never catching up: the bound
        ([(0, SEVERE)], MAX_WAIT_PER_BATCH_SECONDS),
    ],
)
def test_how_long_one_batch_waits(schedule, expected):
    result = waited(schedule)
    assert result.seconds == pytest.approx(expected, abs=WAIT_SECONDS / 2)
    # Only a batch that went while the request path was still behind is overdue.
    assert result.overdue is (expected == MAX_WAIT_PER_BATCH_SECONDS)


def test_without_lag_nobody_sleeps():
    clock = FakeClock()
    rule = GiveWay(lambda: 0.0, clock=clock, sleep=clock.sleep)
    assert [rule.wait(lambda: False) for _ in range(3)] == [Waited(0.0, overdue=False)] * 3
    assert clock.slept == []


def test_the_hold_outlasts_one_batch_and_ends():
    clock = FakeClock()
    lags: Iterator[float] = iter([SEVERE])
    rule = GiveWay(lambda: next(lags, 0.0), clock=clock, sleep=clock.sleep)
    first = rule.wait(lambda: False)
    assert first.seconds == pytest.approx(HOLD_SECONDS, abs=WAIT_SECONDS)
    assert not first.overdue
    # The last far-behind reading is a hold ago: the next batch goes at once.
    assert rule.wait(lambda: False) == Waited(0.0, overdue=False)


def test_stopping_ends_the_wait():
    clock = FakeClock()
    calls = iter([False, False, True])
    GiveWay(lambda: 10.0, clock=clock, sleep=clock.sleep).wait(lambda: next(calls))
    assert clock.slept == [WAIT_SECONDS, WAIT_SECONDS]


def test_overdue_batches_start_one_per_interval_longest_waiting_first():
    """Real threads and time: four workers arriving 50 ms apart, a request path that
    never catches up."""
    rule = GiveWay(lambda: 10.0)
    began = time.monotonic()
    started: list[tuple[float, int]] = []
    lock = threading.Lock()

    def worker(number: int) -> None:
        rule.wait(lambda: False)
        with lock:
            started.append((time.monotonic() - began, number))

    threads = []
    for number in range(4):
        threads.append(threading.Thread(target=worker, args=(number,)))
        threads[-1].start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(timeout=10)

    started.sort()
    assert [number for _, number in started] == [0, 1, 2, 3]  # in the order they came
    moments = [moment for moment, _ in started]
    assert moments[0] >= MAX_WAIT_PER_BATCH_SECONDS * 0.95
    gaps = [later - earlier for earlier, later in itertools.pairwise(moments)]
    assert all(gap >= OVERDUE_INTERVAL_SECONDS * 0.9 for gap in gaps), gaps
    # Processing never stops: the last of them went within a few intervals.
    assert moments[-1] < MAX_WAIT_PER_BATCH_SECONDS + 3 * OVERDUE_INTERVAL_SECONDS + 1.0
