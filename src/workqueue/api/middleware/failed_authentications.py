"""A budget of failed authentications per client address (API.md v1.2, "Answers").

Checking a token may cost a call to someone else (OpenShift's `users/~`, an
issuer's key set), and anyone can send tokens. Once an address has failed
`LIMIT` times within `WINDOW_SECONDS`, its requests are authenticated only as
far as that needs no outbound call about an unknown token: a token the service
already knows (an OpenShift token found valid within a day, a JWT signed with
a key already fetched) still works, however long the budget stays spent,
anything else answers 429 with `Retry-After` (`TooManyFailedAuthenticationsError`).
Serving known tokens matters because many callers can share one address: every
caller behind the OAuth proxy of the OpenShift deployment arrives from the
router's, unless uvicorn is told to trust the router (`FORWARDED_ALLOW_IPS`).

Only failures of a credential that was sent count: a request without one
costs nothing to refuse, and neither does an answer while over the budget. A
check that could not be made (the issuer is down) is not the caller's failure.

The client address is the ASGI `client`: the socket peer, or what uvicorn's
proxy-header handling made of `X-Forwarded-For` when the peer is a proxy it
trusts (`FORWARDED_ALLOW_IPS`, default `127.0.0.1`: the OAuth proxy beside the
service). An IPv6 client counts by its /64, the block one host usually holds.
The budget is per process, bounded in memory (`MAX_ADDRESSES`, least recently
failed dropped first).
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from starlette.types import Scope

LIMIT = 30
WINDOW_SECONDS = 60.0
MAX_ADDRESSES = 10_000
UNKNOWN_ADDRESS = "unknown"
_IPV6_HOST_PREFIX = 64


class TooManyFailedAuthenticationsError(Exception):
    """The address is over its budget and the token cannot be checked without a call (429)."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(
            f"too many failed authentications from this address: retry in {retry_after_seconds} s"
        )
        self.retry_after_seconds = retry_after_seconds


class FailedAuthentications:
    """The failures of the last `window_seconds` per address. Thread-safe."""

    def __init__(
        self,
        *,
        limit: int = LIMIT,
        window_seconds: float = WINDOW_SECONDS,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window = window_seconds
        self._max_addresses = max_addresses
        self._clock = clock
        self._lock = threading.Lock()
        # address -> times of its latest failures (at most `limit`), least recent address first.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._failures)

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` is within its budget again; None when it is."""
        with self._lock:
            times = self._failures.get(address)
            if times is None or len(times) < self._limit:
                return None
            wait = times[0] + self._window - self._clock()
        if wait <= 0:
            return None
        return max(1, math.ceil(wait))

    def record(self, address: str) -> None:
        """One more failed authentication from `address`."""
        with self._lock:
            times = self._failures.pop(address, None)
            if times is None:
                times = deque(maxlen=self._limit)
                while len(self._failures) >= self._max_addresses:
                    self._failures.popitem(last=False)
            times.append(self._clock())
            self._failures[address] = times


def client_address(scope: Scope) -> str:
    """The address a request's failures count against (see the module doc)."""
    client = scope.get("client")
    host = client[0] if client else None
    if not host:
        return UNKNOWN_ADDRESS
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return str(host)  # a unix socket path, or a name a test client made up
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        network = ipaddress.IPv6Network((address, _IPV6_HOST_PREFIX), strict=False)
        return str(network)
    return str(address)
