"""Running one unit of work as a transaction, retried when PostgreSQL asks for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session, sessionmaker

Result = TypeVar("Result")


def run_in_transaction(
    sessions: sessionmaker[Session],
    work: Callable[[Session], Result],
    *,
    retry_on: tuple[type[Exception], ...] = (),
    attempts: int = 3,
) -> Result:
    """Run `work` in a fresh session and commit; on `retry_on` errors roll back and rerun.

    `work` must be safe to rerun from scratch (it only flushes; this commits).
    """
    for attempt in range(1, attempts + 1):
        with sessions() as session:
            try:
                result = work(session)
                session.commit()
            except retry_on:
                session.rollback()
                if attempt == attempts:
                    raise
                continue
            return result
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
