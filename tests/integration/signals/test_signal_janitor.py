"""Old signals and reporters' keys go after `signals.keep_days`; newer ones stay. Two
janitors (two replicas) sweeping the same rows at once delete each row once and
neither fails. Real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from workqueue.db.engine import build_engine, build_sessions
from workqueue.signals.janitor import SignalJanitor

NOW = datetime.now(UTC)
KEEP = timedelta(days=30)


def seed(sessions, *, old: int, new: int) -> None:
    with sessions() as session:
        for index in range(old + new):
            received = NOW - (KEEP + timedelta(hours=1) if index < old else timedelta(days=1))
            values = {"sha": f"{index:040x}", "at": received, "key": f"key-{index}"}
            session.execute(
                sa.text(
                    "INSERT INTO check_signals (project, sha, name, variant, status, "
                    "reported_at, received_at, source, reporter) VALUES "
                    "('team/app', :sha, 'build', 'api', 'success', :at, :at, 'api', 'ci')"
                ),
                values,
            )
            session.execute(
                sa.text(
                    "INSERT INTO signal_keys (reporter, idempotency_key, received_at) "
                    "VALUES ('ci', :key, :at)"
                ),
                values,
            )
        session.commit()


def counts(sessions) -> tuple[int, int]:
    with sessions() as session:
        return (
            session.scalar(sa.text("SELECT count(*) FROM check_signals")),
            session.scalar(sa.text("SELECT count(*) FROM signal_keys")),
        )


def test_signals_past_keep_go_and_newer_stay(sessions):
    seed(sessions, old=25, new=5)
    janitor = SignalJanitor(sessions, keep=KEEP, batch=10, now=lambda: NOW)
    assert janitor.sweep() == 50  # 25 signals and 25 keys, in batches of 10
    assert counts(sessions) == (5, 5)
    assert janitor.sweep() == 0


def test_two_replicas_sweeping_at_once_delete_each_row_once(database_url, sessions):
    seed(sessions, old=400, new=3)
    engines = [build_engine(database_url, pool_size=1) for _ in range(2)]
    try:
        janitors = [
            SignalJanitor(build_sessions(engine), keep=KEEP, batch=7, now=lambda: NOW)
            for engine in engines
        ]
        deleted: list[int] = []
        start = threading.Barrier(2)

        def sweep(janitor: SignalJanitor) -> None:
            start.wait()
            deleted.append(janitor.sweep())

        threads = [threading.Thread(target=sweep, args=(janitor,)) for janitor in janitors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(deleted) == 2  # neither raised
        assert sum(deleted) == 800
        assert counts(sessions) == (3, 3)
    finally:
        for engine in engines:
            engine.dispose()


def test_the_janitor_thread_sweeps_on_its_own_and_stops(sessions):
    seed(sessions, old=3, new=1)
    janitor = SignalJanitor(sessions, keep=KEEP, sweep_seconds=0.05, now=lambda: NOW)
    janitor.start()
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while counts(sessions) != (1, 1) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
        assert counts(sessions) == (1, 1)
    finally:
        assert janitor.stop(timeout=10)
