"""Engine and session factories. Built by the application, never at import time."""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session, sessionmaker


def build_engine(url: URL, *, pool_size: int = 10, application_name: str = "workqueue") -> Engine:
    """A pooled engine; `pool_pre_ping` lets it recover from a database restart."""
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=30,
        connect_args={"application_name": application_name, "connect_timeout": 10},
    )


def build_sessions(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: objects stay readable after the boundary commits
    # (e.g. to render the API response).
    return sessionmaker(engine, expire_on_commit=False)
