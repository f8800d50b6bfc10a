"""`workqueue-service prune`: delete finished items older than a cutoff, batch by batch.

Each batch is its own short transaction (see `queue.retention_repository`), so
a prune of a million rows never holds one long transaction or a lock on a
live item, and an interrupted run keeps every batch it finished.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from pathlib import Path

import typer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from workqueue.cli.database import ShutdownRequested, StartupError, service_database
from workqueue.cli.logging_setup import configure_logging
from workqueue.cli.server import EXIT_USAGE, _fail, _settings
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import current_revision, head_revision
from workqueue.db.transactions import run_in_transaction
from workqueue.db.url import mask_password
from workqueue.queue.retention.repository import (
    PruneCounts,
    count_finished,
    cutoff_before,
    delete_finished_batch,
)

MAX_BATCH_SIZE = 100_000
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE = re.compile(r"([1-9][0-9]{0,5})([mhdw])")


class InvalidAgeError(ValueError):
    pass


def parse_age(text: str) -> timedelta:
    """`90d`, `12h`, `2w`, `30m` (minutes) → a timedelta; InvalidAgeError for anything else."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise InvalidAgeError(
            f"--older-than must be a whole number and a unit (m, h, d or w), such as 90d; "
            f"got {text!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def prune(*, older_than: str, batch_size: int, dry_run: bool, data_dir: Path | None) -> None:
    configure_logging("warning")
    try:
        age = parse_age(older_than)
    except InvalidAgeError as error:
        raise _fail(str(error), EXIT_USAGE) from None
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise _fail(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}", EXIT_USAGE)
    settings = _settings()
    try:
        with service_database(settings, data_dir) as url:
            engine = build_engine(url, pool_size=1)
            try:
                with engine.connect() as connection:
                    if current_revision(connection) != head_revision():
                        raise StartupError(
                            "the database schema is not at head: run `workqueue-service migrate`"
                        )
                _run(build_sessions(engine), age, batch_size=batch_size, dry_run=dry_run)
            except SQLAlchemyError as error:
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                raise StartupError(f"database error at {mask_password(url)}: {reason}") from None
            finally:
                engine.dispose()
    except StartupError as error:
        raise _fail(str(error)) from None
    except ShutdownRequested:
        raise _fail("interrupted; the batches counted above are deleted") from None


def _run(
    sessions: sessionmaker[Session], age: timedelta, *, batch_size: int, dry_run: bool
) -> None:
    cutoff: datetime = run_in_transaction(sessions, lambda session: cutoff_before(session, age))
    finished_before = f"finished before {cutoff:%Y-%m-%dT%H:%M:%S%z}"
    if dry_run:
        counts = run_in_transaction(
            sessions, lambda session: count_finished(session, cutoff=cutoff)
        )
        typer.echo(f"dry run: would prune {_describe(counts)} ({finished_before})")
        return
    total = PruneCounts()
    batches = 0
    started = time.monotonic()
    try:
        while True:
            counts = run_in_transaction(
                sessions,
                lambda session: delete_finished_batch(
                    session, cutoff=cutoff, batch_size=batch_size
                ),
            )
            if counts.items == 0:
                break
            batches += 1
            total.add(counts)
    finally:
        # Printed on an interruption too: those batches are committed.
        seconds = time.monotonic() - started
        typer.echo(
            f"pruned {_describe(total)} in {batches} batches, {seconds:.1f} s ({finished_before})"
        )


def _describe(counts: PruneCounts) -> str:
    return (
        f"{counts.items} items, {counts.dimension_rows} dimension rows, "
        f"{counts.pending_events} pending events, {counts.audit_entries} audit entries, "
        f"{counts.outbox_deliveries} outbox deliveries"
    )
