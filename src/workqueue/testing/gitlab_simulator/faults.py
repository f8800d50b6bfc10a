"""Fault injection per route, and the request log.

A `FaultRule` targets one route template (`"POST", "/projects/:id/repository/commits"`)
or every route (`"*"`), for the next `times` matching calls (None: until cleared).
It can delay the call, replace the answer with an error status, drop the
connection, or — with `after_apply=True` — let the request take effect and then
lose the answer, the case that makes idempotency matter. With `probability` below 1
a matching call is hit only that often (a storm: half the calls fail), drawn from
the injector's own seeded random generator so a run can be repeated.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from workqueue.testing.gitlab_simulator.routing import Response

ANY = "*"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


@dataclass
class FaultRule:
    method: str
    route: str
    status: int | None = 500
    times: int | None = 1
    latency: float = 0.0
    # With status None: apply the request, then wait this long before answering
    # (a client killed meanwhile never learns what it did).
    latency_after: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    after_apply: bool = False
    disconnect: bool = False
    probability: float = 1.0
    hits: int = 0

    def matches(self, method: str, route: str) -> bool:
        return self.method in {ANY, method} and self.route in {ANY, route}

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def response(self) -> Response:
        if self.disconnect or self.status is None:
            return Response(status=0, disconnect=True)
        headers = dict(self.headers)
        # Retry-After: 0 keeps clients that honour it (python-gitlab, the engine) fast in tests.
        if self.status == 429 or self.status >= 500:
            headers.setdefault("Retry-After", "0")
        if self.body is not None:
            return Response(status=self.status, body=self.body, headers=headers)
        if self.status == 429:
            # Rack::Attack's throttle answer is plain text, not JSON.
            return Response(
                status=429, body=b"Retry later\n", headers=headers, content_type="text/plain"
            )
        message = {"message": f"{self.status} {_reason(self.status)}"}
        return Response(status=self.status, body=message, headers=headers)


class FaultInjector:
    """Thread-safe list of rules; the first unexhausted matching rule fires."""

    def __init__(self, known_routes: set[str], seed: int = 0) -> None:
        self._known = known_routes
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._random = random.Random(seed)  # noqa: S311 - fault draws, not secrets

    def inject(
        self,
        method: str,
        route: str,
        *,
        status: int | None = 500,
        times: int | None = 1,
        latency: float = 0.0,
        headers: dict[str, str] | None = None,
        body: Any = None,
        after_apply: bool = False,
        disconnect: bool = False,
        latency_after: float = 0.0,
        probability: float = 1.0,
    ) -> FaultRule:
        """Add a rule. `status=None` with `latency` only slows the call down; with
        `latency_after` the call takes effect first and its answer comes late.
        `probability` (0 < p <= 1): the share of matching calls the rule fires on."""
        method = method.upper()
        if not 0 < probability <= 1:
            raise ValueError("probability must be in (0, 1]")
        if route != ANY and not any(
            known.endswith(f" {route}") and (method == ANY or known.startswith(f"{method} "))
            for known in self._known
        ):
            raise ValueError(f"no simulated route {method} {route}")
        rule = FaultRule(
            method=method,
            route=route,
            status=status,
            times=times,
            latency=latency,
            latency_after=latency_after,
            headers=dict(headers or {}),
            body=body,
            after_apply=after_apply,
            disconnect=disconnect,
            probability=probability,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, method: str, route: str) -> FaultRule | None:
        """Consume one firing of the first matching rule, if any."""
        with self._lock:
            for rule in self._rules:
                if not rule.exhausted and rule.matches(method, route):
                    if rule.probability < 1 and self._random.random() >= rule.probability:
                        continue
                    rule.hits += 1
                    return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str  # raw path after /api/v4, percent-encoding kept
    route: str | None  # matched template, None for unknown routes
    query: dict[str, Any]
    body: Any
    status: int  # 0 when the connection was dropped
    fault: bool  # True when an injected fault shaped the answer
    at: float = field(default_factory=time.time)  # when the answer was ready
    started_at: float | None = None  # when the request arrived (None: not known)
    caller: str | None = None  # the label of the token used (`add_bot_token`), if any

    @property
    def is_write(self) -> bool:
        return self.method not in {"GET", "HEAD"}


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._in_flight: dict[int, RequestRecord] = {}
        self._next_ticket = 0

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def begin(self, record: RequestRecord) -> int:
        """Note a request being handled (status 0 until it ends); returns its ticket."""
        with self._lock:
            self._next_ticket += 1
            self._in_flight[self._next_ticket] = record
            return self._next_ticket

    def end(self, ticket: int) -> None:
        with self._lock:
            self._in_flight.pop(ticket, None)

    def in_flight(self) -> list[RequestRecord]:
        """Requests arrived and not answered yet (a test can strike while one is)."""
        with self._lock:
            return list(self._in_flight.values())

    def records(self, method: str | None = None, route: str | None = None) -> list[RequestRecord]:
        with self._lock:
            snapshot = list(self._records)
        return [
            r
            for r in snapshot
            if (method is None or r.method == method.upper())
            and (route is None or r.route == route)
        ]

    def count(self, method: str | None = None, route: str | None = None) -> int:
        return len(self.records(method, route))

    def writes(self) -> list[RequestRecord]:
        return [r for r in self.records() if r.is_write]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
