"""One daemon thread that does rounds of work: the shape of every background owner.

The intake resolver, the processing manager's dispatcher, the outbox delivery,
the attention reconciler and the SQS consumer all run the same loop: sleep
until woken or until the next round falls due, run a round, and after a
failed round wait a growing delay (a stop cuts it short, and for some owners a
wake-up too) before trying again.
A LISTEN connection, when the owner has one, starts and stops with the thread.
This module holds that loop once; each owner says what a round is and when the
next one is due.
"""

from __future__ import annotations

import abc
import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from workqueue.db.errors import is_database_unavailable

logger = logging.getLogger(__name__)


class Listener(Protocol):
    """What a background service needs of its LISTEN connection (`queue.listener`)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Backoff:
    """Delays after consecutive failed rounds: `initial`, doubled each time, at most `maximum`."""

    initial: float = 0.5
    maximum: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("a backoff needs 0 < initial <= maximum")

    def delay(self, failures: int) -> float:
        """The wait after the `failures`-th failed round in a row (1 for the first)."""
        if failures < 1:
            return 0.0
        # Capping the exponent keeps 2**n finite however long the outage lasts.
        return min(self.maximum, self.initial * 2.0 ** min(failures - 1, 32))


class BackgroundService(abc.ABC):
    """A daemon thread running `run_round` when woken, when a round is due, and after failures.

    Subclasses implement `run_round`, and may say when the next round is due
    unprompted (`seconds_until_next_round`), how a failure is reported
    (`round_failed`) and what stopping releases (`after_stop`).
    """

    # Whether a wake-up cuts a failure's backoff short (a stop always does). For
    # an owner whose wake-ups say "the database is back" (a listener reconnecting),
    # not for one woken by every commit, which would turn an outage into a spin.
    wake_ends_backoff = False

    def __init__(
        self,
        *,
        thread_name: str,
        listener: Listener | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._listener = listener
        self._backoff = backoff or Backoff()
        self._thread = threading.Thread(target=self._run_forever, name=thread_name, daemon=True)

    # -- what a service is ---------------------------------------------------

    @abc.abstractmethod
    def run_round(self) -> None:
        """One round of work; an exception counts as a failed round."""

    def seconds_until_next_round(self) -> float | None:
        """How long to sleep when not woken; None sleeps until woken."""
        return None

    def round_failed(self, error: Exception, failures: int, delay: float) -> None:
        """Report the `failures`-th failed round in a row; the next is tried after `delay` s.

        An outage is a warning without a traceback (it is expected, and repeats);
        anything else is an error with one.
        """
        name = self._thread.name
        if is_database_unavailable(error):
            logger.warning("%s: database unavailable (%s); retrying in %.1f s", name, error, delay)
        else:
            logger.error(
                "%s: round failed (%d in a row); retrying in %.1f s",
                name,
                failures,
                delay,
                exc_info=error,
            )

    def after_stop(self, ended: bool, timeout: float, /) -> None:  # noqa: B027 - optional hook
        """Release what the service holds once its thread `ended` or was given up on;
        `timeout` bounds any further wait (work in flight finishing)."""

    # -- running -------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if self._listener is not None:
            self._listener.start()

    def wake(self) -> None:
        """Run a round soon."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop after the round in progress (at most `timeout`); True when the thread ended."""
        self._stopping.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.stop()
        if self._thread.is_alive():
            self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if not ended:
            logger.warning("%s did not stop within %.0f s", self._thread.name, timeout)
        self.after_stop(ended, timeout)
        return ended

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run_forever(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            if failures == 0:  # after a failure the backoff was the wait: retry now
                self._wake.wait(self.seconds_until_next_round())
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.run_round()
            except Exception as error:
                failures += 1
                delay = self._backoff.delay(failures)
                self.round_failed(error, failures, delay)
                (self._wake if self.wake_ends_backoff else self._stopping).wait(delay)
            else:
                failures = 0
