"""Delivers outbox rows to their subscribers (Standard Webhooks), at least once.

Threads, like the processing engine's:

* the dispatcher starts drains when something may be due: a NOTIFY sent by
  the commit of new rows, the timer set to the earliest retry, or the slow
  safety sweep (which also prunes old delivered rows). Idle, it issues no SQL
  until the next sweep;
* up to `notifications.workers` drains, each claiming one row at a time
  (FOR UPDATE SKIP LOCKED, held through the HTTP call: no two replicas ever
  send one row at once), posting it and recording the outcome;
* the listener turns NOTIFYs into local wake-ups.

A crash between the subscriber's 2xx and our commit sends the row again:
that is the at-least-once contract, and `webhook-id` stays the same so the
receiver can drop the duplicate.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from workqueue import __version__
from workqueue.db.errors import is_database_unavailable
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.background import BackgroundService
from workqueue.queue.listener import ChannelListener
from workqueue.queue.outbox import repository as outbox_repository
from workqueue.queue.outbox.emit import Outbox, Subscriber
from workqueue.queue.outbox.models import DeliveryStatus
from workqueue.queue.outbox.repository import OUTBOX_CHANNEL, DueDelivery

logger = logging.getLogger(__name__)

# A due row we could not claim (another replica holds it for a moment):
# look again after this long rather than spinning.
RETRY_DUE_SECONDS = 0.25
MAX_ERROR_LENGTH = 1000


def webhook_id(delivery: DueDelivery) -> str:
    """The Standard Webhooks message id: one per event, the same on every retry."""
    return f"msg_{delivery.event_id.hex}"


def event_body(delivery: DueDelivery) -> str:
    """The JSON body; rebuilt identically on every attempt from the stored row."""
    timestamp = delivery.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return json.dumps(
        {"type": delivery.event_type, "timestamp": timestamp, "data": delivery.data},
        sort_keys=True,
        separators=(",", ":"),
    )


class OutboxDeliveryWorker(BackgroundService):
    """Sends this service's outbound events; one per replica, alongside the engine."""

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        outbox: Outbox,
        listen_conninfo: str | None = None,
        audit: AuditLog | None = None,
        safety_sweep_seconds: float = 300,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._sessions = sessions
        self._outbox = outbox
        self._config = outbox.config
        self._audit = audit or AuditLog()
        self._safety_sweep_seconds = safety_sweep_seconds
        self._signers = {s.name: Webhook(s.secret) for s in outbox.subscribers}
        self._client = httpx.Client(
            timeout=self._config.timeout_seconds,
            follow_redirects=False,  # a redirect is not an acceptance
            headers={"user-agent": f"workqueue-service/{__version__}"},
            transport=transport,
        )
        self._pool = ThreadPoolExecutor(self._config.workers, thread_name_prefix="outbox-send")

        self._lock = threading.Lock()
        self._active = 0  # drains running
        self._requested = False  # new rows may be due: start a drain
        self._sweep_at = 0.0  # monotonic; 0 = at once (startup catches up)
        self._due_at: float | None = None  # monotonic time of the earliest known retry
        self._timer_stale = True

        super().__init__(
            thread_name="outbox-dispatch",
            listener=(
                ChannelListener(
                    listen_conninfo,
                    channel=OUTBOX_CHANNEL,
                    on_notify=lambda _payload: self.wake(),
                    on_connected=self.wake,
                    thread_name="outbox-listen",
                )
                if listen_conninfo
                else None
            ),
        )

    # -- public API ----------------------------------------------------------

    def start(self) -> None:
        if not self._outbox.subscribers:
            return  # nothing can be due: no threads, no connection, no SQL
        super().start()
        logger.info(
            "delivering notifications to %s",
            ", ".join(subscriber.name for subscriber in self._outbox.subscribers),
        )

    def wake(self) -> None:
        """New rows may have been committed: look for due deliveries soon."""
        with self._lock:
            self._requested = True
        super().wake()

    def sweep(self) -> None:
        with self._lock:
            self._sweep_at = 0.0
        self._wake.set()

    def after_stop(self, _ended: bool, timeout: float, /) -> None:
        """Deliveries in flight finish (up to `timeout`); the rest are retried later."""
        deadline = time.monotonic() + timeout
        while self.active_count and time.monotonic() < deadline:
            time.sleep(0.02)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    @property
    def active_count(self) -> int:
        with self._lock:
            return self._active

    # -- dispatcher ----------------------------------------------------------

    def round_failed(self, error: Exception, failures: int, delay: float) -> None:
        super().round_failed(error, failures, delay)
        with self._lock:
            self._sweep_at = time.monotonic() + delay

    def seconds_until_next_round(self) -> float:
        with self._lock:
            free = self._active < self._config.workers
            if self._requested and free:
                return 0.0
            if self._timer_stale and self._active == 0:
                return 0.0
            wake_at = self._sweep_at
            if self._due_at is not None and free:
                wake_at = min(wake_at, self._due_at)
        return max(wake_at - time.monotonic(), 0.0)

    def run_round(self) -> None:
        now = time.monotonic()
        with self._lock:
            sweep = now >= self._sweep_at
            timer_fired = self._due_at is not None and now >= self._due_at
            if sweep:
                self._sweep_at = now + self._safety_sweep_seconds
            if timer_fired:
                self._due_at = None
            start_drain = (sweep or timer_fired or self._requested) and (
                self._active < self._config.workers
            )
            if start_drain:
                self._requested = False
                self._active += 1
            # Rows held by our own drains are skipped by the due-time query:
            # ask it only once they are done and have recorded their retries.
            recompute = (sweep or self._timer_stale) and self._active == 0
            if recompute:
                self._timer_stale = False
        if start_drain:
            try:
                self._pool.submit(self._drain)
            except BaseException:
                self._drain_ended()  # never started: the slot is free again
                raise
        if sweep:
            # After the drain is on its way: a failing prune (an outage) must not
            # keep a slot counted for a drain that never started.
            self._prune()
        if recompute:
            self._recompute_timer()

    def _prune(self) -> None:
        with self._sessions() as session:
            pruned = outbox_repository.prune_delivered_older_than(
                session, self._config.retention_days * 86400
            )
            session.commit()
        if pruned:
            logger.info("outbox: pruned %d delivered rows", pruned)

    def _recompute_timer(self) -> None:
        with self._sessions() as session:
            seconds = outbox_repository.seconds_until_due(session)
            session.commit()
        with self._lock:
            self._due_at = (
                None if seconds is None else time.monotonic() + max(seconds, RETRY_DUE_SECONDS)
            )

    # -- drains ----------------------------------------------------------------

    def _drain(self) -> None:
        """Deliver due rows one by one until none is left to claim."""
        try:
            while not self._stopping.is_set():
                with self._sessions() as session:
                    delivery = outbox_repository.claim_due(session)
                    if delivery is None:
                        session.commit()
                        return
                    # There may be more: let another drain start beside this one.
                    self.wake()
                    entry = self._attempt(session, delivery)
                    session.commit()
                if entry is not None:
                    self._audit.write(entry)
        except Exception as error:
            if is_database_unavailable(error):
                logger.warning("outbox: database unavailable while delivering (%s)", error)
            else:
                logger.exception("outbox: unexpected error while delivering")
        finally:
            self._drain_ended()

    def _drain_ended(self) -> None:
        with self._lock:
            self._active -= 1
            self._timer_stale = True
        self._wake.set()

    def _attempt(self, session: Session, delivery: DueDelivery) -> AuditEntry | None:
        """One attempt, its outcome written to the claimed row; an audit entry on give-up."""
        subscriber = self._outbox.subscriber(delivery.subscriber)
        if subscriber is None:
            gone = "the subscriber is no longer configured"
            outbox_repository.abandon(session, delivery.id, error=gone)
            return self._abandoned(delivery, gone)
        error = self._post(subscriber, delivery)
        if error is None:
            outbox_repository.mark_delivered(session, delivery.id)
            return None
        outcome = outbox_repository.record_failed_attempt(
            session,
            delivery.id,
            error=error,
            max_age_seconds=self._config.max_age_seconds,
            backoff_initial_seconds=self._config.backoff_initial_seconds,
            backoff_max_seconds=self._config.backoff_max_seconds,
        )
        if outcome.status is DeliveryStatus.ABANDONED:
            return self._abandoned(delivery, error)
        logger.warning(
            "notification %s (%s) to %s failed: %s; retrying in %.1f s",
            webhook_id(delivery),
            delivery.event_type,
            subscriber.name,
            error,
            outcome.retry_in_seconds or 0.0,
        )
        if outcome.retry_in_seconds is not None:
            due = time.monotonic() + outcome.retry_in_seconds
            with self._lock:
                self._due_at = due if self._due_at is None else min(self._due_at, due)
        return None

    def _post(self, subscriber: Subscriber, delivery: DueDelivery) -> str | None:
        """POST the event; None when the subscriber accepted it (2xx), else why not."""
        message_id = webhook_id(delivery)
        body = event_body(delivery)
        sent_at = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": self._signers[subscriber.name].sign(message_id, sent_at, body),
        }
        try:
            response = self._client.post(subscriber.url, content=body.encode(), headers=headers)
        except httpx.TimeoutException:
            return f"timed out after {self._config.timeout_seconds:g} s"
        except httpx.HTTPError as error:
            # httpx's messages name the failure, not the URL or our headers.
            return f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    def _abandoned(self, delivery: DueDelivery, error: str) -> AuditEntry:
        logger.error(
            "notification %s (%s) to %s abandoned after %d attempts: %s",
            webhook_id(delivery),
            delivery.event_type,
            delivery.subscriber,
            delivery.attempts + 1,
            error,
        )
        return AuditEntry(
            event_type="notification_abandoned",
            work_item_id=delivery.work_item_id,
            reason=error,
            details={
                "webhook_id": webhook_id(delivery),
                "subscriber": delivery.subscriber,
                "notification_type": delivery.event_type,
                "attempts": delivery.attempts + 1,
            },
        )
