"""Workers give way to a request path that falls behind (`queue.give_way`): pure rules."""

from __future__ import annotations

import pytest

from workqueue.queue.give_way import (
    LAG_THRESHOLD_SECONDS,
    MAX_WAIT_PER_BATCH_SECONDS,
    WAIT_SECONDS,
    give_way,
    wait_seconds,
)


@pytest.mark.parametrize(
    ("lag", "waited", "expected"),
    [
        (0.0, 0.0, 0.0),  # the loop keeps up: go on
        (LAG_THRESHOLD_SECONDS, 0.0, 0.0),  # at the threshold: go on
        (LAG_THRESHOLD_SECONDS * 2, 0.0, WAIT_SECONDS),
        (5.0, 0.0, WAIT_SECONDS),  # one wait at a time, however late
        (5.0, MAX_WAIT_PER_BATCH_SECONDS - WAIT_SECONDS / 2, WAIT_SECONDS / 2),  # up to the bound
        (5.0, MAX_WAIT_PER_BATCH_SECONDS, 0.0),  # bound reached: the batch runs anyway
    ],
)
def test_wait_seconds(lag, waited, expected):
    assert wait_seconds(lag, waited) == pytest.approx(expected)


def test_without_a_request_path_nobody_waits():
    slept = []
    assert give_way(None, lambda: False, slept.append) == 0.0
    assert slept == []


def test_waits_while_the_loop_is_late_then_goes_on():
    lags = iter([0.5, 0.5, 0.5, 0.001])
    slept: list[float] = []
    waited = give_way(lambda: next(lags), lambda: False, slept.append)
    assert slept == [WAIT_SECONDS] * 3
    assert waited == pytest.approx(3 * WAIT_SECONDS)


def test_a_loop_that_stays_late_never_stops_processing():
    slept: list[float] = []
    waited = give_way(lambda: 10.0, lambda: False, slept.append)
    assert waited == pytest.approx(MAX_WAIT_PER_BATCH_SECONDS)
    assert sum(slept) == pytest.approx(MAX_WAIT_PER_BATCH_SECONDS)


def test_stopping_ends_the_wait():
    calls = iter([False, False, True])
    slept: list[float] = []
    give_way(lambda: 10.0, lambda: next(calls), slept.append)
    assert slept == [WAIT_SECONDS, WAIT_SECONDS]
