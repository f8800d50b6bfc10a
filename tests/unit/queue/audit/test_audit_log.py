"""Audit entries and the audit log without a network: JSON form, archive keys, and
that `write()` never raises whatever the object store or the log handlers do."""

from __future__ import annotations

import json
import logging
import re
import threading
import types
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from workqueue.queue.audit.log import AuditEntry, AuditLog

AUDIT_LOGGER = "workqueue.audit"
PLUS_TWO = timezone(timedelta(hours=2))
# 01:05 on 1 March at +02:00 is 23:05 UTC on the leap day before: day, month and
# hour all change when the key is built in UTC.
FIXED_TIME = datetime(2024, 3, 1, 1, 5, 59, 123456, tzinfo=PLUS_TWO)
ENTRY_ID = uuid.UUID("6f8b7f4a-7947-4a05-8c3d-000000000001")
ITEM_ID = uuid.UUID("6f8b7f4a-7947-4a05-8c3d-000000000002")
KEY_LAYOUT = re.compile(
    r"^(?P<prefix>.*?)(?P<y>\d{4})/(?P<mo>\d{2})/(?P<d>\d{2})/(?P<h>\d{2})/(?P<mi>\d{2})/"
    r"(?P<id>[0-9a-f-]{36})\.json\.gz$"
)


def fixed_entry(**overrides: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "event_type": "phase_change",
        "work_item_id": ITEM_ID,
        "item_type": "mr",
        "actor": "alice",
        "before": {"phase": "active"},
        "after": {"phase": "done"},
        "reason": "merged",
        "details": {"action": "merge", "attempt": 2, "labels": ["bot", "sync"]},
        "timestamp": FIXED_TIME,
        "entry_id": ENTRY_ID,
    }
    values.update(overrides)
    return AuditEntry(**values)


class FakeStore:
    """Records put_object calls; `behaviour` may raise or block for a call."""

    def __init__(self, behaviour: Callable[[int], None] | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.attempts = 0
        self._behaviour = behaviour
        self._lock = threading.Lock()

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:
            self.attempts += 1
            attempt = self.attempts
        if self._behaviour is not None:
            self._behaviour(attempt)
        with self._lock:
            self.calls.append(kwargs)
        return {"ETag": '"fake"'}

    @property
    def keys(self) -> list[str]:
        with self._lock:
            return [call["Key"] for call in self.calls]


class UntouchableStore:
    """Any use (put_object included) fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store must not be used without a bucket ({name})")


class RaisingHandler(logging.Handler):
    """A broken log handler: raises from emit() for the records `when` selects."""

    def __init__(self, when: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__(level=logging.DEBUG)
        self._when = when
        self.raised = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self._when(record):
            self.raised += 1
            raise RuntimeError("log handler is down")


@pytest.fixture
def audit_caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    return caplog


@pytest.fixture
def broken_handler() -> Iterator[Callable[[Callable[[logging.LogRecord], bool]], RaisingHandler]]:
    """Install a raising handler on the audit logger (ahead of caplog's, which sits
    on the root logger), removed after the test."""
    installed: list[RaisingHandler] = []

    def install(when: Callable[[logging.LogRecord], bool]) -> RaisingHandler:
        handler = RaisingHandler(when)
        logging.getLogger(AUDIT_LOGGER).addHandler(handler)
        installed.append(handler)
        return handler

    yield install
    for handler in installed:
        logging.getLogger(AUDIT_LOGGER).removeHandler(handler)


@pytest.fixture
def audit_logs() -> Iterator[Callable[..., AuditLog]]:
    """Build audit logs that are closed (uploader thread stopped) after the test."""
    created: list[AuditLog] = []

    def build(**kwargs: Any) -> AuditLog:
        log = AuditLog(**kwargs)
        created.append(log)
        return log

    yield build
    for log in created:
        log.close(timeout=2)


def audit_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == AUDIT_LOGGER and r.levelno == level]


def is_entry_record(record: logging.LogRecord) -> bool:
    return record.levelno == logging.INFO and record.msg == "audit %s"


# --- AuditEntry.to_json ---------------------------------------------------------------


def test_to_json_serialises_uuids_and_datetimes_as_strings() -> None:
    parsed = json.loads(fixed_entry().to_json())

    assert parsed == {
        "actor": "alice",
        "after": {"phase": "done"},
        "before": {"phase": "active"},
        "details": {"action": "merge", "attempt": 2, "labels": ["bot", "sync"]},
        "entry_id": "6f8b7f4a-7947-4a05-8c3d-000000000001",
        "event_type": "phase_change",
        "item_type": "mr",
        "reason": "merged",
        "timestamp": "2024-03-01T01:05:59.123456+02:00",
        "work_item_id": "6f8b7f4a-7947-4a05-8c3d-000000000002",
    }


def test_to_json_round_trips_to_an_equal_entry() -> None:
    entry = fixed_entry()
    parsed = json.loads(entry.to_json())

    rebuilt = AuditEntry(
        **{
            **parsed,
            "work_item_id": uuid.UUID(parsed["work_item_id"]),
            "entry_id": uuid.UUID(parsed["entry_id"]),
            "timestamp": datetime.fromisoformat(parsed["timestamp"]),
        }
    )

    assert rebuilt == entry
    assert rebuilt.timestamp.utcoffset() == timedelta(hours=2)
    assert rebuilt.to_json() == entry.to_json()


def test_to_json_of_a_default_entry_round_trips() -> None:
    entry = AuditEntry(event_type="auth_denied")
    parsed = json.loads(entry.to_json())

    assert parsed["work_item_id"] is None
    assert parsed["actor"] == "system"
    assert parsed["details"] == {}
    assert uuid.UUID(parsed["entry_id"]) == entry.entry_id
    assert datetime.fromisoformat(parsed["timestamp"]) == entry.timestamp
    assert datetime.fromisoformat(parsed["timestamp"]).utcoffset() == timedelta(0)


def test_to_json_sorts_keys_at_every_level() -> None:
    entry = fixed_entry(
        after={"zeta": 1, "alpha": {"z": 1, "a": 2}},
        details={"b": 1, "a": {"y": 2, "x": 1}},
    )
    text = entry.to_json()
    parsed = json.loads(text)

    assert list(parsed) == sorted(parsed)
    assert list(parsed["after"]) == ["alpha", "zeta"]
    assert list(parsed["after"]["alpha"]) == ["a", "z"]
    assert list(parsed["details"]["a"]) == ["x", "y"]
    assert text == json.dumps(parsed, sort_keys=True)


def test_to_json_stringifies_nested_uuids_and_datetimes() -> None:
    pending = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    entry = fixed_entry(
        after={"dimension": "ci", "pending_until": pending},
        details={"other_item": ITEM_ID, "at": [pending]},
    )
    parsed = json.loads(entry.to_json())

    assert parsed["after"]["pending_until"] == "2024-05-06T07:08:09+00:00"
    assert parsed["details"] == {
        "other_item": str(ITEM_ID),
        "at": ["2024-05-06T07:08:09+00:00"],
    }


def test_to_json_accepts_any_mapping_and_values_that_cannot_be_copied() -> None:
    # Executors pass arbitrary **details through EventContext.audit(); an entry that
    # cannot be serialised is lost from both the log and the archive.
    lock = threading.Lock()
    entry = fixed_entry(
        before=types.MappingProxyType({"phase": "active"}),
        details={"lock": lock, "tags": frozenset({"x"})},
    )

    parsed = json.loads(entry.to_json())

    assert parsed["before"] == {"phase": "active"}
    assert parsed["details"] == {"lock": str(lock), "tags": str(frozenset({"x"}))}


# --- AuditLog.object_key ----------------------------------------------------------------


def test_object_key_partitions_by_utc_minute() -> None:
    key = AuditLog().object_key(fixed_entry())

    assert key == f"2024/02/29/23/05/{ENTRY_ID}.json.gz"


def test_object_key_honours_the_prefix() -> None:
    key = AuditLog(key_prefix="audit/prod/").object_key(fixed_entry())

    assert key == f"audit/prod/2024/02/29/23/05/{ENTRY_ID}.json.gz"


def test_object_key_layout_of_a_fresh_entry() -> None:
    entry = AuditEntry(event_type="action_outcome")
    key = AuditLog(key_prefix="p/").object_key(entry)

    match = KEY_LAYOUT.match(key)
    assert match is not None, key
    assert match["prefix"] == "p/"
    assert match["id"] == str(entry.entry_id)
    moment = entry.timestamp.astimezone(UTC)
    assert (match["y"], match["mo"], match["d"], match["h"], match["mi"]) == (
        f"{moment:%Y}",
        f"{moment:%m}",
        f"{moment:%d}",
        f"{moment:%H}",
        f"{moment:%M}",
    )


# --- AuditLog.write: never raises ------------------------------------------------------


def test_write_logs_the_entry_at_info_and_uploads_it(audit_caplog, audit_logs) -> None:
    store = FakeStore()
    log = audit_logs(object_store=store, bucket="audit-bucket", key_prefix="a/")
    entry = fixed_entry()

    log.write(entry)

    assert log.flush(timeout=2)
    [record] = audit_records(audit_caplog, logging.INFO)
    assert record.getMessage() == f"audit {entry.to_json()}"
    [call] = store.calls
    assert call["Bucket"] == "audit-bucket"
    assert call["Key"] == f"a/2024/02/29/23/05/{ENTRY_ID}.json.gz"
    assert call["ContentType"] == "application/json"
    assert call["ContentEncoding"] == "gzip"


def test_write_does_not_raise_when_put_object_raises(audit_caplog, audit_logs) -> None:
    def fail(attempt: int) -> None:
        raise ConnectionError("object store unreachable")

    store = FakeStore(fail)
    log = audit_logs(object_store=store, bucket="audit-bucket")
    entry = fixed_entry()

    log.write(entry)

    assert log.flush(timeout=2)
    assert store.attempts == 1
    assert store.calls == []
    [error] = audit_records(audit_caplog, logging.ERROR)
    assert str(ENTRY_ID) in error.getMessage()
    assert "object store unreachable" in error.getMessage()
    # The entry itself is still in the log.
    assert [r.getMessage() for r in audit_records(audit_caplog, logging.INFO)] == [
        f"audit {entry.to_json()}"
    ]


def test_write_does_not_raise_when_the_log_handler_raises(
    audit_caplog, audit_logs, broken_handler
) -> None:
    handler = broken_handler(is_entry_record)
    store = FakeStore()
    log = audit_logs(object_store=store, bucket="audit-bucket")
    entry = fixed_entry()

    log.write(entry)

    assert handler.raised == 1
    [error] = audit_records(audit_caplog, logging.ERROR)
    assert str(ENTRY_ID) in error.getMessage()
    assert error.exc_info is not None
    assert isinstance(error.exc_info[1], RuntimeError)
    assert "log handler is down" in audit_caplog.text
    # A broken log must not keep the entry out of the archive.
    assert log.flush(timeout=2)
    assert store.keys == [log.object_key(entry)]


def test_write_does_not_raise_when_every_log_record_fails(
    audit_caplog, audit_logs, broken_handler
) -> None:
    handler = broken_handler(lambda _record: True)
    store = FakeStore()
    log = audit_logs(object_store=store, bucket="audit-bucket")
    entry = fixed_entry()

    log.write(entry)  # the failure report fails too; still no exception

    assert handler.raised >= 2
    assert log.flush(timeout=2)
    assert store.keys == [log.object_key(entry)]


def test_uploader_survives_a_log_handler_that_raises(
    audit_caplog, audit_logs, broken_handler
) -> None:
    def fail_first(attempt: int) -> None:
        if attempt == 1:
            raise ConnectionError("object store unreachable")

    handler = broken_handler(lambda record: record.levelno >= logging.ERROR)
    store = FakeStore(fail_first)
    log = audit_logs(object_store=store, bucket="audit-bucket")
    first, second = fixed_entry(entry_id=uuid.uuid4()), fixed_entry(entry_id=uuid.uuid4())

    log.write(first)
    assert log.flush(timeout=2)
    log.write(second)

    assert log.flush(timeout=2), "the uploader thread died"
    assert handler.raised == 1
    assert store.keys == [log.object_key(second)]


def test_write_does_not_raise_when_the_entry_cannot_be_serialised(audit_caplog, audit_logs) -> None:
    store = FakeStore()
    log = audit_logs(object_store=store, bucket="audit-bucket")
    entry = fixed_entry(details={ITEM_ID: "a uuid key is not valid JSON"})

    log.write(entry)

    assert log.flush(timeout=2)
    assert store.calls == []
    errors = [r.getMessage() for r in audit_records(audit_caplog, logging.ERROR)]
    assert errors
    assert all(str(ENTRY_ID) in message for message in errors)


def test_full_queue_keeps_the_entry_in_the_log_only(audit_caplog, audit_logs) -> None:
    uploading = threading.Event()
    release = threading.Event()

    def block_first(attempt: int) -> None:
        if attempt == 1:
            uploading.set()
            release.wait(5)

    store = FakeStore(block_first)
    log = audit_logs(object_store=store, bucket="audit-bucket", max_queued=1)
    first, second, third = (fixed_entry(entry_id=uuid.uuid4()) for _ in range(3))
    try:
        log.write(first)
        assert uploading.wait(2), "the uploader never picked up the first entry"
        log.write(second)  # fills the one queue slot
        log.write(third)  # queue full: log only, no exception, no blocking

        assert not log.flush(timeout=0.05)
    finally:
        release.set()

    assert log.flush(timeout=2)
    assert store.keys == [log.object_key(first), log.object_key(second)]
    [warning] = audit_records(audit_caplog, logging.WARNING)
    assert str(third.entry_id) in warning.getMessage()
    assert "queue full" in warning.getMessage()
    logged = [r.getMessage() for r in audit_records(audit_caplog, logging.INFO)]
    assert logged == [f"audit {e.to_json()}" for e in (first, second, third)]


@pytest.mark.parametrize("bucket", [None, ""])
def test_write_without_a_bucket_never_touches_the_store(audit_caplog, bucket) -> None:
    uploaders_before = _uploader_threads()
    log = AuditLog(object_store=UntouchableStore(), bucket=bucket)
    entry = fixed_entry()

    log.write(entry)
    log.write_all([fixed_entry(entry_id=uuid.uuid4())])

    assert log._uploader is None
    assert log.flush(timeout=0.1)
    log.close(timeout=0.1)
    assert audit_records(audit_caplog, logging.ERROR) == []
    assert audit_records(audit_caplog, logging.INFO)[0].getMessage() == f"audit {entry.to_json()}"
    assert _uploader_threads() <= uploaders_before


def _uploader_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "audit-uploader"}


def test_write_all_writes_every_entry_in_order(audit_caplog, audit_logs) -> None:
    store = FakeStore()
    log = audit_logs(object_store=store, bucket="audit-bucket")
    entries = [fixed_entry(entry_id=uuid.uuid4(), event_type=f"e{i}") for i in range(5)]

    log.write_all(entries)

    assert log.flush(timeout=2)
    assert store.keys == [log.object_key(e) for e in entries]
    assert len(audit_records(audit_caplog, logging.INFO)) == 5
