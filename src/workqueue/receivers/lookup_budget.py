"""How many GitLab project look-ups webhook deliveries may cost, per secret.

A look-up the service holds no answer for costs a GitLab call with the service's
own token, whose rate limit every project shares. A secret's holder could send a
new made-up `project.id` in every delivery; without a bound that spends the
token's limit for everyone and queues real hooks behind the made-up ones. So:

* Each payer (one configured secret, or the SQS consumer) may cause
  `LOOKUPS_PER_MINUTE` GitLab calls a minute: a token bucket holding as many,
  refilled evenly. Answers already held cost nothing and are never refused.
* At most `MAX_WAITING` look-ups wait or run at once, and at most
  `MAX_WAITING_PER_PAYER` of one payer, so one secret cannot fill the queue
  that the others' first deliveries need. (Deliveries asking the same question
  at once share one look-up: `ProjectDirectory`.)

Over either bound the question is refused at once (`LookupRefused`), before
anything is queued or asked; the receiver answers 503 with `Retry-After`.
Thread-safe: spent from the look-up threads, admitted from the event loop.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

LOOKUPS_PER_MINUTE = 60
MAX_WAITING = 16  # the two look-up threads' work and what waits for them
MAX_WAITING_PER_PAYER = 8  # one secret takes at most half
QUEUE_FULL_RETRY_SECONDS = 5


class LookupRefused(Exception):  # noqa: N818 - a condition, reported as 503
    """A project look-up not made now: the payer's budget is spent, or too many wait."""

    def __init__(self, reason: str, retry_after_seconds: int) -> None:
        super().__init__(reason)
        self.retry_after_seconds = retry_after_seconds


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class LookupBudget:
    """Per-payer look-up allowance and the bounded wait (see the module doc)."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        per_minute: int = LOOKUPS_PER_MINUTE,
        max_waiting: int = MAX_WAITING,
        max_waiting_per_payer: int = MAX_WAITING_PER_PAYER,
    ) -> None:
        self._clock = clock
        self._capacity = float(per_minute)
        self._per_second = per_minute / 60.0
        self._max_waiting = max_waiting
        self._max_waiting_per_payer = max_waiting_per_payer
        self._buckets: dict[str, _Bucket] = {}  # one per configured secret (and SQS): bounded
        self._waiting: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, payer: str) -> None:
        """Take a place in the wait for a look-up of `payer`'s; raises LookupRefused when
        its budget is spent or the wait is full. Pair with `leave`."""
        with self._lock:
            self._refuse_when_spent(payer)
            held = self._waiting.get(payer, 0)
            if held >= self._max_waiting_per_payer or sum(self._waiting.values()) >= (
                self._max_waiting
            ):
                raise LookupRefused("too many project look-ups waiting", QUEUE_FULL_RETRY_SECONDS)
            self._waiting[payer] = held + 1

    def leave(self, payer: str) -> None:
        with self._lock:
            held = self._waiting.get(payer, 0) - 1
            if held > 0:
                self._waiting[payer] = held
            else:
                self._waiting.pop(payer, None)

    def spend(self, payer: str) -> None:
        """One GitLab call for `payer`; raises LookupRefused when none is left."""
        with self._lock:
            bucket = self._refuse_when_spent(payer)
            bucket.tokens -= 1.0

    def remaining(self, payer: str) -> int:
        """Whole look-ups `payer` may still cause now."""
        with self._lock:
            return int(self._refilled(payer).tokens)

    def _refuse_when_spent(self, payer: str) -> _Bucket:
        bucket = self._refilled(payer)
        if bucket.tokens < 1.0:
            wait = math.ceil((1.0 - bucket.tokens) / self._per_second)
            raise LookupRefused("the secret's project look-ups for this minute are spent", wait)
        return bucket

    def _refilled(self, payer: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(payer)
        if bucket is None:
            bucket = self._buckets[payer] = _Bucket(self._capacity, now)
        elapsed = max(0.0, now - bucket.at)
        bucket.tokens = min(self._capacity, bucket.tokens + elapsed * self._per_second)
        bucket.at = now
        return bucket
