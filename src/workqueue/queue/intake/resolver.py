"""IntakeResolver: the thread that resolves stored deliveries behind the receivers.

Woken by the receivers in this process (`wake`), by the NOTIFY every stored
delivery sends (other replicas' receivers), when its listener (re)connects,
and by the safety sweep (`processing.safety_sweep_seconds`), which finds
deliveries a replica left behind when it died mid-batch. Idle, it sends no SQL
until that sweep. Each round resolves batches (`intake.resolve`) until a batch
comes back short, then hands the items that got events to `on_items` (the
processing manager's `notify`).

A batch whose resolution raises is retried one delivery per transaction, so
one delivery a type cannot resolve (a bug) costs only itself: after
`ATTEMPTS_ALONE` failed attempts it is logged and dropped, and the others are
applied.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable
from workqueue.queue.background import BackgroundService, Backoff
from workqueue.queue.intake import deliveries as intake
from workqueue.queue.intake.deliveries import DEFAULT_BATCH_SIZE, ResolvedBatch
from workqueue.queue.intake.repository import INTAKE_CHANNEL
from workqueue.queue.listener import ChannelListener
from workqueue.queue.registry import TypeRegistry

logger = logging.getLogger(__name__)

MAX_FAILURE_DELAY_SECONDS = 30.0
# A delivery whose batch failed is tried this often on its own before it is dropped.
ATTEMPTS_ALONE = 3


class IntakeResolver(BackgroundService):
    """Resolves stored deliveries in batches, one thread per replica."""

    # Its wake-ups (a delivery stored here, the listener reconnecting) mean the
    # database answers again: resolve now rather than wait out an outage's backoff.
    wake_ends_backoff = True

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        on_items: Callable[[list[uuid.UUID]], None],
        sweep_seconds: float,
        listen_conninfo: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._sessions = sessions
        self._registry = registry
        self._on_items = on_items
        self._sweep_seconds = sweep_seconds
        self._batch_size = batch_size
        self.listening = threading.Event()  # set once the listener's LISTEN is in effect
        super().__init__(
            thread_name="workqueue-intake",
            listener=(
                ChannelListener(
                    listen_conninfo,
                    channel=INTAKE_CHANNEL,
                    on_notify=lambda _payload: self.wake(),
                    on_connected=self._on_listener_connected,
                    thread_name="workqueue-intake-listen",
                    description="intake listener",
                )
                if listen_conninfo
                else None
            ),
            backoff=Backoff(maximum=MAX_FAILURE_DELAY_SECONDS),
        )

    def start(self) -> None:
        self.wake()  # catch up with deliveries stored while nobody resolved
        super().start()

    def stored_here(self) -> None:
        """A receiver of this process stored a delivery (committed).

        Its NOTIFY wakes this resolver through the listener; waking it here as
        well made it run a second round that found nothing, most of the time
        (the two wake-ups come a fraction of a millisecond apart). Before the
        listener is connected, or without one, it is woken here. A NOTIFY lost
        to a dropped listener connection is made up for by the wake-up on
        reconnection.
        """
        if not self.listening.is_set():
            self.wake()

    def _on_listener_connected(self) -> None:
        self.listening.set()
        self.wake()  # catch up with what was sent while we were not listening

    def seconds_until_next_round(self) -> float:
        return self._sweep_seconds  # the safety sweep: a NOTIFY may be lost

    def run_round(self) -> None:
        self.resolve_waiting()

    def resolve_waiting(self) -> int:
        """Resolve batches until none is full; returns how many deliveries were resolved."""
        total = 0
        while not self._stopping.is_set():
            with self._sessions() as session:
                deliveries = intake.claim(session, self._batch_size)
                if not deliveries:
                    return total
                try:
                    result = intake.resolve(session, self._registry, deliveries)
                    session.commit()
                except Exception as error:
                    session.rollback()
                    if is_database_unavailable(error):
                        raise
                    logger.warning(
                        "resolving %d deliveries failed (%s); one by one", len(deliveries), error
                    )
                    result = self._one_by_one([delivery.id for delivery in deliveries])
            if result.item_ids:
                self._on_items(result.item_ids)
            total += result.deliveries
            if len(deliveries) < self._batch_size:
                return total
        return total

    def _one_by_one(self, delivery_ids: list[int]) -> ResolvedBatch:
        done = ResolvedBatch()
        for delivery_id in delivery_ids:
            result = self._resolve_alone(delivery_id)
            done.deliveries += result.deliveries
            done.item_ids += result.item_ids
        return done

    def _resolve_alone(self, delivery_id: int) -> ResolvedBatch:
        """One delivery in its own transaction, a few times; then it is dropped."""
        for attempt in range(1, ATTEMPTS_ALONE + 1):
            with self._sessions() as session:
                try:
                    result = intake.resolve_one(session, self._registry, delivery_id)
                    session.commit()
                except Exception as error:
                    session.rollback()
                    if is_database_unavailable(error):
                        raise
                    if attempt < ATTEMPTS_ALONE:
                        continue
                    logger.exception(
                        "delivery %d could not be resolved (%d attempts) and is dropped",
                        delivery_id,
                        attempt,
                    )
                    intake.forget(session, delivery_id)
                    session.commit()
                else:
                    return result
        return ResolvedBatch()
