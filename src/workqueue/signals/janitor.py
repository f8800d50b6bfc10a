"""Old signals go: `signals.keep_days` after they were received, every replica sweeps.

A signal is kept a while without an item for its commit (a build can report
before the merge webhook is processed), and items copy what they show of their
checks into their own details, so a signal older than any wait is dead weight.
Batches are short transactions that skip rows another replica is deleting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.transactions import run_in_transaction
from workqueue.queue.background import BackgroundService
from workqueue.signals.repository import prune_batch

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 600.0
BATCH = 1000


class SignalJanitor(BackgroundService):
    """Deletes signals and reporters' keys received more than `keep` ago."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        keep: timedelta,
        sweep_seconds: float = SWEEP_SECONDS,
        batch: int = BATCH,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(thread_name="workqueue-signal-janitor")
        self._sessions = sessions
        self._keep = keep
        self._sweep_seconds = sweep_seconds
        self._batch = batch
        self._now = now

    def seconds_until_next_round(self) -> float:
        return self._sweep_seconds

    def run_round(self) -> None:
        self.sweep()

    def sweep(self) -> int:
        """Delete everything past `keep`, batch by batch; returns the rows deleted."""
        cutoff = self._now() - self._keep
        deleted = 0
        while not self.stopping:
            batch = run_in_transaction(
                self._sessions,
                lambda session: prune_batch(session, received_before=cutoff, limit=self._batch),
            )
            deleted += batch
            if batch < self._batch:
                break
        if deleted:
            logger.info("deleted %d signals and keys received before %s", deleted, cutoff)
        return deleted
