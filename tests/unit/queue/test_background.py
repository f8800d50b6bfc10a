"""The background loop every owner shares: rounds on wake and timer, backoff, stop."""

from __future__ import annotations

import threading

import pytest

from workqueue.queue.background import BackgroundService, Backoff

WAIT = 5.0  # generous: the events below fire in milliseconds when the loop works


@pytest.mark.parametrize(
    ("backoff", "failures", "delay"),
    [
        (Backoff(), 0, 0.0),
        (Backoff(), 1, 0.5),
        (Backoff(), 2, 1.0),
        (Backoff(), 3, 2.0),
        (Backoff(), 7, 30.0),
        (Backoff(1.0, 60.0), 6, 32.0),
        (Backoff(1.0, 60.0), 7, 60.0),
        (Backoff(1.0, 1.0), 5, 1.0),
        # An outage of days: the exponent is capped, the delay stays the maximum.
        (Backoff(0.5, 30.0), 10_000, 30.0),
    ],
)
def test_backoff_doubles_up_to_its_maximum(backoff: Backoff, failures: int, delay: float) -> None:
    assert backoff.delay(failures) == delay


@pytest.mark.parametrize(("initial", "maximum"), [(0.0, 1.0), (2.0, 1.0), (-1.0, 1.0)])
def test_backoff_rejects_impossible_bounds(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial, maximum)


class FakeListener:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")


class Rounds(BackgroundService):
    """Counts rounds; `failing` rounds raise; `hang` holds a round until released."""

    def __init__(
        self,
        *,
        every: float | None = None,
        listener: FakeListener | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__(thread_name="test-rounds", listener=listener, backoff=backoff)
        self.every = every
        self.rounds = 0
        self.failing = 0
        self.failures_seen: list[tuple[str, int, float]] = []
        self.round_started = threading.Event()
        self.round_done = threading.Semaphore(0)
        self.hang = threading.Event()
        self.release = threading.Event()
        self.stopped_with: tuple[bool, float] | None = None

    def seconds_until_next_round(self) -> float | None:
        return self.every

    def run_round(self) -> None:
        self.rounds += 1
        self.round_started.set()
        try:
            if self.hang.is_set():
                self.release.wait(WAIT)
            if self.failing:
                self.failing -= 1
                raise RuntimeError("round failed on purpose")
        finally:
            self.round_done.release()

    def round_failed(self, error: Exception, failures: int, delay: float) -> None:
        self.failures_seen.append((str(error), failures, delay))

    def after_stop(self, ended: bool, timeout: float, /) -> None:
        self.stopped_with = (ended, timeout)


def test_a_wake_runs_a_round_and_nothing_runs_unwoken() -> None:
    service = Rounds()
    service.start()
    try:
        assert not service.round_done.acquire(timeout=0.2)  # no timer, no wake: no round
        service.wake()
        assert service.round_done.acquire(timeout=WAIT)
        assert service.rounds == 1
    finally:
        assert service.stop(timeout=WAIT)


def test_a_due_round_runs_without_a_wake() -> None:
    service = Rounds(every=0.01)
    service.start()
    try:
        for _ in range(3):
            assert service.round_done.acquire(timeout=WAIT)
    finally:
        service.stop(timeout=WAIT)


def test_failed_rounds_back_off_and_retry_without_a_wake() -> None:
    service = Rounds(backoff=Backoff(0.01, 0.02))
    service.failing = 3
    service.start()
    try:
        service.wake()
        # One wake: three failures, then the retry that works, all by the backoff alone.
        for _ in range(4):
            assert service.round_done.acquire(timeout=WAIT)
        failed = "round failed on purpose"
        assert service.failures_seen == [(failed, 1, 0.01), (failed, 2, 0.02), (failed, 3, 0.02)]
        assert not service.round_done.acquire(timeout=0.2)  # success: back to waiting
    finally:
        service.stop(timeout=WAIT)


def test_stop_cuts_a_backoff_short() -> None:
    service = Rounds(backoff=Backoff(600.0, 600.0))
    service.failing = 1
    service.start()
    service.wake()
    assert service.round_done.acquire(timeout=WAIT)
    assert service.stop(timeout=WAIT)  # a 10-minute backoff, yet it stops at once
    assert service.stopped_with == (True, WAIT)
    assert not service.running


def test_stop_gives_up_on_a_hung_round_and_says_so() -> None:
    service = Rounds()
    service.hang.set()
    service.start()
    service.wake()
    assert service.round_started.wait(WAIT)
    try:
        assert not service.stop(timeout=0.1)
        assert service.stopped_with == (False, 0.1)
        assert service.stopping
        assert service.running
    finally:
        service.release.set()
    assert service.round_done.acquire(timeout=WAIT)
    service._thread.join(WAIT)
    assert not service.running


def test_the_listener_lives_as_long_as_the_thread() -> None:
    listener = FakeListener()
    service = Rounds(listener=listener)
    service.start()
    assert listener.calls == ["start"]
    service.stop(timeout=WAIT)
    assert listener.calls == ["start", "stop"]


def test_a_service_never_started_stops_cleanly() -> None:
    service = Rounds()
    assert service.stop(timeout=WAIT)
    assert service.stopped_with == (True, WAIT)
    assert service.rounds == 0
