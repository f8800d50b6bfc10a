"""Engine and session factories. Built by the application, never at import time."""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session, sessionmaker


def build_engine(url: URL, *, pool_size: int = 10, application_name: str = "workqueue") -> Engine:
    """A pooled engine.

    No `pool_pre_ping`: it would cost a round trip per transaction. After a
    database restart the first statement on a stale connection fails, SQLAlchemy
    invalidates the pool, and callers retry (the processing loop does).
    """
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=30,
        connect_args={"application_name": application_name, "connect_timeout": 10},
    )


def build_probe_engine(url: URL, *, application_name: str = "workqueue-probes") -> Engine:
    """A small pool of its own for readiness and scrape-time metrics.

    Probes must answer while the work pool is saturated, and must never take
    connections the workers need: two connections at most, a short wait for
    one, and short connect and statement timeouts.
    """
    return create_engine(
        url,
        pool_size=1,
        max_overflow=1,
        pool_timeout=2,
        connect_args={
            "application_name": application_name,
            "connect_timeout": 5,
            "options": "-c statement_timeout=5000",
        },
    )


def build_intake_engine(
    url: URL,
    *,
    connections: int,
    statement_timeout_seconds: float,
    application_name: str = "workqueue-intake",
) -> Engine:
    """The webhook batcher's own pool: one connection per transaction it runs at
    once, so a burst of webhooks never waits for the workers' connections nor
    takes theirs, and a statement timeout set once per connection (no round
    trip per transaction)."""
    return create_engine(
        url,
        pool_size=connections,
        max_overflow=0,
        pool_timeout=30,
        connect_args={
            "application_name": application_name,
            "connect_timeout": 10,
            "options": f"-c statement_timeout={int(statement_timeout_seconds * 1000)}",
        },
    )


def build_sessions(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: objects stay readable after the boundary commits
    # (e.g. to render the API response).
    return sessionmaker(engine, expire_on_commit=False)
