"""The audit archive against a real S3 API: moto in server mode over HTTP (DDR-17/28).

Objects are gzipped JSON under `YYYY/MM/DD/HH/MM/` keys (UTC) with
`ContentEncoding: gzip`; a failing upload never raises and never logs credentials.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

from workqueue.queue.audit.log import AuditEntry, AuditLog

AUDIT_LOGGER = "workqueue.audit"
REGION = "us-east-1"
ACCESS_KEY = "AKIAAUDITTESTDUMMY01"
SECRET_KEY = "audit-test-dummy-secret-2d1f0c9e7b"
KEY_PATTERN = re.compile(r"^audit/\d{4}/\d{2}/\d{2}/\d{2}/\d{2}/[0-9a-f-]{36}\.json\.gz$")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3(s3_endpoint: str) -> Iterator[Any]:
    # Credentials and region go to the session explicitly, so nothing from the
    # environment or ~/.aws is used, and nothing leaks into it.
    session = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    )
    client = session.client(
        "s3",
        endpoint_url=s3_endpoint,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=2,
            read_timeout=5,
        ),
    )
    yield client
    client.close()


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"audit-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def audit_caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=AUDIT_LOGGER)
    return caplog


def entry(event_type: str, **fields: Any) -> AuditEntry:
    return AuditEntry(event_type=event_type, work_item_id=uuid.uuid4(), item_type="mr", **fields)


def utc_key(item: AuditEntry) -> str:
    """The expected key, built independently of AuditLog.object_key."""
    moment = item.timestamp.astimezone(UTC)
    return f"audit/{moment:%Y/%m/%d/%H/%M}/{item.entry_id}.json.gz"


def archived_keys(s3: Any, bucket: str) -> list[str]:
    listing = s3.list_objects_v2(Bucket=bucket)
    return sorted(obj["Key"] for obj in listing.get("Contents", []))


def test_entries_are_archived_as_gzipped_json_in_minute_partitions(s3, bucket) -> None:
    log = AuditLog(object_store=s3, bucket=bucket, key_prefix="audit/")
    fixed = entry(
        "phase_change",
        before={"phase": "active"},
        after={"phase": "done"},
        # 00:30 on 1 Jan at +02:00 is 22:30 UTC on 31 Dec the year before.
        timestamp=datetime(2025, 1, 1, 0, 30, 15, tzinfo=timezone(timedelta(hours=2))),
    )
    entries = [
        fixed,
        entry("dimension_change", after={"dimension": "ci", "status": "true"}),
        entry("action_outcome", reason="pushed", details={"action": "push", "sha": "abc123"}),
        AuditEntry(event_type="auth_denied", actor="mallory", details={"path": "/items"}),
    ]
    try:
        log.write(entries[0])
        log.write_all(entries[1:])
        assert log.flush(timeout=5)
    finally:
        log.close(timeout=5)

    keys = archived_keys(s3, bucket)
    assert keys == sorted(utc_key(e) for e in entries)
    assert all(KEY_PATTERN.match(key) for key in keys), keys
    assert utc_key(fixed) == f"audit/2024/12/31/22/30/{fixed.entry_id}.json.gz"

    for item in entries:
        obj = s3.get_object(Bucket=bucket, Key=utc_key(item))
        assert obj["ContentEncoding"] == "gzip"
        assert obj["ContentType"] == "application/json"
        raw = obj["Body"].read()
        assert raw[:2] == b"\x1f\x8b", "the stored object is not gzip data"
        document = json.loads(gzip.decompress(raw))
        assert document == json.loads(item.to_json())
        assert document["entry_id"] == str(item.entry_id)
        assert document["event_type"] == item.event_type
        expected_item_id = str(item.work_item_id) if item.work_item_id else None
        assert document["work_item_id"] == expected_item_id


def test_missing_bucket_logs_the_failure_and_never_raises(s3, audit_caplog) -> None:
    missing = f"audit-missing-{uuid.uuid4().hex[:12]}"
    log = AuditLog(object_store=s3, bucket=missing)
    item = entry("phase_change", reason="merged")
    try:
        log.write(item)  # must not raise
        assert log.flush(timeout=5)
    finally:
        log.close(timeout=5)

    audit_records = [r for r in audit_caplog.records if r.name == AUDIT_LOGGER]
    errors = [r.getMessage() for r in audit_records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert str(item.entry_id) in errors[0]
    assert "NoSuchBucket" in errors[0]
    # The entry itself is in the log at INFO, whatever happened to the upload.
    infos = [r.getMessage() for r in audit_records if r.levelno == logging.INFO]
    assert infos == [f"audit {item.to_json()}"]
    # No credentials anywhere in what was logged.
    assert SECRET_KEY not in audit_caplog.text
    assert ACCESS_KEY not in audit_caplog.text
    bucket_names = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    assert missing not in bucket_names


class GatedStore:
    """The real client, but the first upload waits for `gate`: the rest stay queued."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.started = threading.Event()
        self.gate = threading.Event()

    def put_object(self, **kwargs: Any) -> Any:
        self.started.set()
        self.gate.wait(5)
        return self._client.put_object(**kwargs)


def test_close_uploads_what_is_queued_before_returning(s3, bucket) -> None:
    store = GatedStore(s3)
    log = AuditLog(object_store=store, bucket=bucket, key_prefix="audit/")
    uploader = log._uploader
    assert uploader is not None
    entries = [entry("event_applied", details={"n": n}) for n in range(6)]

    log.write_all(entries)
    assert store.started.wait(2)
    assert log._queue.qsize() == len(entries) - 1  # one uploading, the rest queued
    assert archived_keys(s3, bucket) == []
    opener = threading.Timer(0.1, store.gate.set)
    opener.start()
    try:
        log.close(timeout=5)
        # Observed right after close() returns, before anything else can drain the queue.
        uploader_alive = uploader.is_alive()
        keys = archived_keys(s3, bucket)
    finally:
        opener.cancel()
        store.gate.set()
        opener.join()

    assert not uploader_alive
    assert keys == sorted(utc_key(e) for e in entries)
