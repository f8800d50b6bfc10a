"""Which database a server-side command uses: DATABASE_URL, or the embedded cluster."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from workqueue.db.embedded import EmbeddedPostgres, EmbeddedPostgresError, default_data_dir
from workqueue.db.engine import build_engine
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import mask_password, normalize_database_url
from workqueue.settings import Settings

logger = logging.getLogger(__name__)


class StartupError(Exception):
    """A one-line reason the command cannot start (printed without a traceback)."""


@contextmanager
def service_database(settings: Settings, data_dir: Path | None) -> Iterator[URL]:
    """Yield the database URL; with the embedded cluster, stop it on the way out."""
    if settings.database_url:
        with _signals_exit_cleanly():
            yield normalize_database_url(settings.database_url)
        return
    directory = data_dir or settings.data_dir or default_data_dir()
    cluster = EmbeddedPostgres(directory)
    logger.info("DATABASE_URL is unset: using the embedded PostgreSQL in %s", directory)
    with _signals_exit_cleanly():
        try:
            try:
                url = cluster.start()
            except (EmbeddedPostgresError, OSError) as error:
                raise StartupError(
                    f"cannot start the embedded PostgreSQL in {directory}: {error}"
                ) from None
            yield url
        finally:
            cluster.stop()


def check_and_migrate(url: URL, *, migrate: bool) -> None:
    engine = build_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
        if migrate:
            upgrade_to_head(engine)
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise StartupError(
            f"cannot connect to the database at {mask_password(url)}: {reason}"
        ) from None
    finally:
        engine.dispose()


class ShutdownRequested(Exception):  # noqa: N818 - a request, not an error
    """SIGTERM or SIGINT arrived outside uvicorn's own handling: stop cleanly."""


@contextmanager
def _signals_exit_cleanly() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into an exception so `finally` blocks stop the cluster.

    While serving, uvicorn handles SIGTERM/SIGINT itself (graceful shutdown,
    lifespan) and re-raises the signal afterwards; it then lands here.
    """

    def _stop(signum: int, _frame: FrameType | None) -> None:
        raise ShutdownRequested(signal.Signals(signum).name)

    def _hangup(_signum: int, _frame: FrameType | None) -> None:
        # Re-sent as SIGTERM so that, while uvicorn serves, its graceful
        # shutdown (and our lifespan) runs rather than an abrupt exit.
        signal.raise_signal(signal.SIGTERM)

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, _stop),
        signal.SIGINT: signal.signal(signal.SIGINT, _stop),
        signal.SIGHUP: signal.signal(signal.SIGHUP, _hangup),
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
