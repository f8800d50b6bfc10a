"""The budget of failed authentications per client address, and what the address is."""

from __future__ import annotations

import pytest

from workqueue.api.middleware.failed_authentications import (
    UNKNOWN_ADDRESS,
    FailedAuthentications,
    client_address,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("failures_at", "asked_at", "retry_after"),
    [
        ([], 0.0, None),
        ([0.0] * 29, 0.0, None),  # 29 failures: still within the budget
        ([0.0] * 30, 0.0, 60),  # the 30th fills it: the next request waits a minute
        ([0.0] * 30, 59.5, 1),  # rounded up, never 0
        ([0.0] * 30, 60.0, None),  # the oldest left the window
        ([0.0, *[30.0] * 29], 45.0, 15),  # the oldest of the last 30 decides
        ([0.0, *[30.0] * 29], 61.0, None),  # ...and then there are 29 in the window
        ([0.0] * 40, 0.0, 60),  # more failures keep only the latest 30
        ([float(n) for n in range(40)], 40.0, 30),
    ],
)
def test_retry_after_by_the_failures_of_the_last_minute(failures_at, asked_at, retry_after):
    clock = Clock()
    budget = FailedAuthentications(clock=clock)
    start = clock.now
    for moment in failures_at:
        clock.now = start + moment
        budget.record("192.0.2.1")
    clock.now = start + asked_at
    assert budget.retry_after("192.0.2.1") == retry_after
    assert budget.retry_after("192.0.2.2") is None


def test_the_addresses_kept_are_bounded_least_recently_failed_dropped_first():
    clock = Clock()
    budget = FailedAuthentications(clock=clock, limit=2, max_addresses=3)
    for address in ("a", "b", "c"):
        budget.record(address)
        budget.record(address)
    budget.record("a")  # `a` failed last: `b` is now the least recent
    budget.record("d")
    assert len(budget) == 3
    assert budget.retry_after("b") is None
    assert budget.retry_after("a") == 60
    assert budget.retry_after("c") == 60


@pytest.mark.parametrize(
    ("client", "address"),
    [
        (("192.0.2.7", 51000), "192.0.2.7"),
        (("2001:db8:1:2::7", 51000), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:ffff:ffff:ffff:ffff", 1), "2001:db8:1:2::/64"),
        (("2001:db8:1:3::7", 51000), "2001:db8:1:3::/64"),
        (("::ffff:192.0.2.7", 51000), "192.0.2.7"),  # an IPv4 client of a dual-stack socket
        (("::1", 51000), "::/64"),
        (("testclient", 50000), "testclient"),  # Starlette's TestClient names no address
        (None, UNKNOWN_ADDRESS),  # a unix socket
        (("", 0), UNKNOWN_ADDRESS),
    ],
)
def test_client_address(client, address):
    scope = {"type": "http", "client": client}
    assert client_address(scope) == address
