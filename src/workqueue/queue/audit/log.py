"""Audit trail: every entry is logged; with a bucket configured it is also archived,
and with a history (`history.AuditHistory`) it is kept in the database.

Archive objects are gzipped JSON under `YYYY/MM/DD/HH/MM/` keys (partitions for
Athena-style queries) with `ContentEncoding: gzip` (DDR-17/28). Uploads run on
a background thread so a slow object store never slows the processing loop,
and nothing here ever raises into the caller: an audit failure is logged, the
work goes on.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import queue
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.orm import Session

logger = logging.getLogger("workqueue.audit")

SYSTEM_ACTOR = "system"


@dataclass(frozen=True)
class AuditEntry:
    """One thing that happened to an item (or to a request, for auth denials)."""

    event_type: str  # phase_change, dimension_change, action_outcome, event_applied, ...
    work_item_id: uuid.UUID | None = None
    item_type: str | None = None
    actor: str = SYSTEM_ACTOR
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    entry_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def to_json(self) -> str:
        # Not `dataclasses.asdict`: it deep-copies every value and so fails on
        # details that cannot be copied (a lock, a client, a mappingproxy)
        # instead of letting `json_default` turn them into strings. The ids and
        # the time are turned into strings here, as `json_default` would, which
        # spares the encoder three calls back into Python per entry.
        work_item_id = self.work_item_id
        return _ENCODE(
            {
                "actor": self.actor,
                "after": self.after,
                "before": self.before,
                "details": self.details,
                "entry_id": str(self.entry_id),
                "event_type": self.event_type,
                "item_type": self.item_type,
                "reason": self.reason,
                "timestamp": self.timestamp.isoformat(),
                "work_item_id": None if work_item_id is None else str(work_item_id),
            }
        )


class ObjectStore(Protocol):
    """The slice of boto3's S3 client the archive uses."""

    def put_object(self, **kwargs: Any) -> Any: ...


class HistorySink(Protocol):
    """Where committed entries are kept (`history.AuditHistory`): the log writes to it
    without depending on how it stores them."""

    def store_in(self, session: Session, entries: Sequence[AuditEntry]) -> bool: ...

    def prune_if_due(self, session: Session) -> None: ...

    def enqueue(self, entries: Iterable[AuditEntry]) -> None: ...

    def close(self, timeout: float = 10.0) -> None: ...


class AuditLog:
    """Writes audit entries to the log and, optionally, to an S3 bucket."""

    def __init__(
        self,
        *,
        object_store: ObjectStore | None = None,
        bucket: str | None = None,
        key_prefix: str = "",
        max_queued: int = 10_000,
        history: HistorySink | None = None,
    ) -> None:
        self._history = history
        self._store = object_store if bucket else None
        self._bucket = bucket
        self._key_prefix = key_prefix
        self._queue: queue.Queue[AuditEntry | None] = queue.Queue(maxsize=max_queued)
        self._uploader: threading.Thread | None = None
        if self._store is not None:
            self._uploader = threading.Thread(
                target=self._upload_loop, name="audit-uploader", daemon=True
            )
            self._uploader.start()

    def store_in(self, session: Session, entries: list[AuditEntry]) -> bool:
        """Put `entries` in the history within `session`'s transaction, before its commit.

        True when they are stored there (pass `stored=True` to `write_all`
        after the commit); False without a history or when the insert failed.
        Never raises.
        """
        if self._history is None:
            return False
        return self._history.store_in(session, entries)

    def prune_history(self, session: Session) -> None:
        """Drop history entries past retention (throttled by the history). Never raises."""
        if self._history is not None:
            self._history.prune_if_due(session)

    def write(self, entry: AuditEntry, *, stored: bool = False) -> None:
        """Record an entry. Never raises.

        The log, the archive and the history are independent: a failing log
        handler does not keep the entry out of the archive, and a full archive
        queue leaves it in the log only. `stored`: the entry is in the history
        already (`store_in`), so it is not queued for it again.
        """
        if self._history is not None and not stored:
            self._history.enqueue([entry])
        entry_id = getattr(entry, "entry_id", None)
        try:
            if logger.isEnabledFor(logging.INFO):
                logger.info("audit %s", entry.to_json())
        except Exception:
            _report(logging.ERROR, "could not log audit entry %s", entry_id, exc_info=True)
        if self._store is None:
            return
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            _report(
                logging.WARNING, "audit archive queue full; entry %s kept in the log only", entry_id
            )
        except Exception:
            _report(logging.ERROR, "could not queue audit entry %s", entry_id, exc_info=True)

    def write_all(self, entries: list[AuditEntry], *, stored: bool = False) -> None:
        for entry in entries:
            self.write(entry, stored=stored)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until queued entries are uploaded; False if that took longer than `timeout`."""
        if self._store is None:
            return True
        done = threading.Event()

        def _wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=_wait, daemon=True).start()
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Upload and store what is queued (up to `timeout` each) and stop the threads."""
        if self._history is not None:
            self._history.close(timeout)
        if self._uploader is None:
            return
        self.flush(timeout)
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            return
        self._uploader.join(timeout)
        self._uploader = None

    def object_key(self, entry: AuditEntry) -> str:
        moment = entry.timestamp.astimezone(UTC)
        return f"{self._key_prefix}{moment:%Y/%m/%d/%H/%M}/{entry.entry_id}.json.gz"

    def _upload_loop(self) -> None:
        while True:
            entry = self._queue.get()
            try:
                if entry is None:
                    return
                self._upload(entry)
            finally:
                self._queue.task_done()

    def _upload(self, entry: AuditEntry) -> None:
        assert self._store is not None  # noqa: S101 - the thread only runs with a store
        try:
            self._store.put_object(
                Bucket=self._bucket,
                Key=self.object_key(entry),
                Body=gzip.compress(entry.to_json().encode()),
                ContentType="application/json",
                ContentEncoding="gzip",
            )
        except Exception as error:
            # The message of a botocore error never carries credentials; the
            # entry itself stays in the log. No traceback: one per failed
            # upload is noise.
            _report(logging.ERROR, "audit archive upload failed for %s: %s", entry.entry_id, error)


def _report(level: int, message: str, *args: object, exc_info: bool = False) -> None:
    """Log an audit failure; a log handler that raises must not escape `write()`
    nor kill the uploader thread."""
    with contextlib.suppress(Exception):
        logger.log(level, message, *args, exc_info=exc_info)


def _fields_of(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in fields(instance)}


def json_default(value: object) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    if is_dataclass(value) and not isinstance(value, type):
        return _fields_of(value)
    return str(value)


# One encoder for every entry: `json.dumps` with options builds a new one per call.
_ENCODE = json.JSONEncoder(default=json_default, sort_keys=True).encode
