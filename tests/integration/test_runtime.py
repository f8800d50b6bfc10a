"""The composition root runs without HTTP: built, started, stopped in order, every part."""

from __future__ import annotations

import threading

import pytest
from harness import wait_until

from workqueue.config import ServiceConfig
from workqueue.runtime import ServiceRuntime
from workqueue.settings import Settings


def background_threads() -> set[str]:
    return {
        thread.name
        for thread in threading.enumerate()
        if thread.name.startswith(("workqueue-", "attention-", "outbox-"))
    }


def test_a_runtime_starts_and_stops_its_owners_without_any_app(database_url):
    before = background_threads()
    runtime = ServiceRuntime(Settings(), ServiceConfig(), database_url=database_url)
    with pytest.raises(RuntimeError, match="not started"):
        _ = runtime.manager
    runtime.start()
    try:
        # No handled_types: the manager starts no dispatcher (a replica for reads only).
        assert "workqueue-attention" in background_threads() - before
        assert runtime.attention is not None
    finally:
        runtime.stop()
    wait_until(lambda: background_threads() <= before, what="every owner's thread ended")
    with pytest.raises(RuntimeError, match="not started"):
        _ = runtime.attention


def test_a_stop_that_fails_does_not_keep_the_others_from_stopping(database_url, monkeypatch):
    before = background_threads()
    runtime = ServiceRuntime(Settings(), ServiceConfig(), database_url=database_url)
    runtime.start()

    def broken_close() -> None:
        raise OSError("the audit archive is gone")

    monkeypatch.setattr(runtime.audit, "close", broken_close)
    runtime.stop()  # logs the failure, stops the rest
    wait_until(lambda: background_threads() <= before, what="every owner's thread ended")
    assert runtime.engine.pool.checkedout() == 0
