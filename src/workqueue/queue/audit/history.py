"""The database sink of the audit trail: the per-item history, kept `retention_days`.

Two ways in, so the history tells what was committed and nothing else:

* `store_in(session, entries)`: a processing step's entries go into the
  step's own transaction (under a savepoint), so a rolled-back step leaves
  no history claiming it happened;
* `enqueue(entries)`: entries written outside a transaction (API routes after
  their commit, authorization denials) are batched by a background thread
  with its own connection.

Like the rest of the audit trail, nothing here raises into the caller: a
failing insert is logged and the entry stays in the log (DDR-28). Values are
made JSON-safe and anything named like a credential is redacted before it
is stored.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import queue
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue.audit import repository as audit_repository
from workqueue.queue.audit.log import AuditEntry, json_default

logger = logging.getLogger("workqueue.audit")

REDACTED = "[redacted]"
# Keys whose values are never stored, wherever they sit in an entry.
_SECRET_KEY = re.compile(
    r"token|secret|password|passwd|authorization|cookie|credential|api_?key", re.IGNORECASE
)
MAX_TEXT = 4000  # longer strings are cut: history is for people, not for payloads
BATCH_SIZE = 500
PRUNE_INTERVAL_SECONDS = 3600.0


def history_row(entry: AuditEntry) -> dict[str, Any]:
    """The `audit_entries` row for `entry`: JSON-safe, redacted, without NUL characters."""
    return {
        "entry_id": entry.entry_id,
        "occurred_at": entry.timestamp,
        "work_item_id": entry.work_item_id,
        "item_type": _text(entry.item_type, 64),
        "event_type": _text(entry.event_type, 64) or "unknown",
        "actor": _text(entry.actor) or "unknown",
        "reason": _text(entry.reason),
        "before": _clean(entry.before) if entry.before is not None else None,
        "after": _clean(entry.after) if entry.after is not None else None,
        "details": _clean(entry.details) if entry.details else {},
    }


class AuditHistory:
    """Keeps audit entries in the `audit_entries` table."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        retention: timedelta,
        max_queued: int = 10_000,
        batch_size: int = BATCH_SIZE,
        prune_interval_seconds: float = PRUNE_INTERVAL_SECONDS,
    ) -> None:
        self._sessions = sessions
        self.retention = retention
        self._batch_size = batch_size
        self._prune_interval = prune_interval_seconds
        self._next_prune = 0.0  # monotonic; 0: at the first opportunity
        self._queue: queue.Queue[AuditEntry | None] = queue.Queue(maxsize=max_queued)
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._closed = False

    # -- inside a transaction ----------------------------------------------------------------

    def store_in(self, session: Session, entries: Sequence[AuditEntry]) -> bool:
        """Insert `entries` within `session`'s transaction; False when they could not be.

        A savepoint keeps a failing insert from spoiling the caller's
        transaction; the caller then hands the entries to `enqueue` after
        its commit.
        """
        if not entries:
            return True
        try:
            rows = [history_row(entry) for entry in entries]
            with session.begin_nested():
                audit_repository.insert_entries(session, rows)
        except Exception as error:
            _report(logging.ERROR, "could not store %d audit entries: %s", len(entries), error)
            return False
        return True

    def prune_if_due(self, session: Session) -> None:
        """Delete entries past retention, at most once per interval; never raises."""
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._prune_interval
        try:
            with session.begin_nested():
                deleted = audit_repository.prune(session, self.retention)
        except Exception as error:
            _report(logging.ERROR, "could not prune the audit history: %s", error)
            return
        if deleted:
            _report(logging.INFO, "pruned %d audit entries older than %s", deleted, self.retention)

    # -- outside a transaction ---------------------------------------------------------------

    def enqueue(self, entries: Iterable[AuditEntry]) -> None:
        """Store `entries` soon, from the writer thread. Never raises nor blocks."""
        try:
            self._start_writer()
            for entry in entries:
                self._queue.put_nowait(entry)
        except queue.Full:
            _report(logging.WARNING, "audit history queue full; entries kept in the log only")
        except Exception as error:
            _report(logging.ERROR, "could not queue audit entries for the history: %s", error)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until queued entries are written; False if that took longer than `timeout`."""
        done = threading.Event()

        def _wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=_wait, daemon=True).start()
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (up to `timeout`) and stop the writer thread."""
        with self._lock:
            self._closed = True
            writer, self._writer = self._writer, None
        if writer is None:
            return
        self.flush(timeout)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        writer.join(timeout)

    def _start_writer(self) -> None:
        # Started on first use: a process that never audits outside a step
        # (tests, a worker-only replica) runs no extra thread.
        with self._lock:
            if self._writer is not None or self._closed:
                return
            self._writer = threading.Thread(
                target=self._write_loop, name="audit-history", daemon=True
            )
            self._writer.start()

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            batch = [first]
            while first is not None and len(batch) < self._batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            entries = [entry for entry in batch if entry is not None]
            try:
                self._write(entries)
            finally:
                for _ in batch:
                    self._queue.task_done()
            if len(entries) < len(batch):
                return  # close() asked to stop

    def _write(self, entries: list[AuditEntry]) -> None:
        if not entries:
            return
        rows = [history_row(entry) for entry in entries]
        delay = 0.2
        for attempt in range(3):
            try:
                with self._sessions() as session:
                    audit_repository.insert_entries(session, rows)
                    session.commit()
            except Exception as error:
                if attempt == 2:
                    self._write_one_by_one(entries, rows, error)
                    return
                time.sleep(delay)
                delay *= 4
            else:
                return

    def _write_one_by_one(
        self, entries: list[AuditEntry], rows: list[dict[str, Any]], error: Exception
    ) -> None:
        """After a batch failed three times: each entry alone, so one entry the database
        refuses costs only itself (an outage costs them all, as before)."""
        lost = []
        for entry, row in zip(entries, rows, strict=True):
            try:
                with self._sessions() as session:
                    audit_repository.insert_entries(session, [row])
                    session.commit()
            except Exception as entry_error:
                error = entry_error
                lost.append(entry.entry_id)
        if lost:
            _report(
                logging.ERROR,
                "could not store %d of %d audit entries in the history (their log lines "
                "are the record, at INFO): %s",
                len(lost),
                len(entries),
                error,
            )


def _clean(value: Any, depth: int = 0) -> Any:
    """A JSON value PostgreSQL's jsonb accepts, with credentials redacted."""
    if depth > 20:
        return "…"
    if isinstance(value, Mapping):
        return {
            _text(str(key)) or "": REDACTED
            if _SECRET_KEY.search(str(key))
            else _clean(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_clean(item, depth + 1) for item in value]
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, bool | int) or _finite(value):
        return value
    # Datetimes, UUIDs, dataclasses, NaN: as the log line shows them.
    return _clean(
        json.loads(
            json.dumps(str(value) if isinstance(value, float) else value, default=json_default)
        ),
        depth + 1,
    )


def _finite(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _text(value: str | None, limit: int = MAX_TEXT) -> str | None:
    if value is None:
        return None
    cleaned = value.replace("\x00", "\ufffd")
    if not cleaned.isascii():
        # A lone surrogate (from a decoded '\ud800' escape) is no character jsonb or
        # UTF-8 can hold: PostgreSQL would refuse the whole statement, every entry of it.
        cleaned = cleaned.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _report(level: int, message: str, *args: object) -> None:
    with contextlib.suppress(Exception):
        logger.log(level, message, *args)
