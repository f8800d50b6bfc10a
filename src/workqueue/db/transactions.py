"""Running one unit of work as a transaction, retried when PostgreSQL asks for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_transaction_conflict

Result = TypeVar("Result")


def run_in_transaction(
    sessions: sessionmaker[Session],
    work: Callable[[Session], Result],
    *,
    retry_if: Callable[[Exception], bool] = is_transaction_conflict,
    attempts: int = 3,
) -> Result:
    """Run `work` in a fresh session and commit; when `retry_if(error)`, roll back and rerun.

    `work` must be safe to rerun from scratch (it only flushes; this commits).
    By default deadlocks, serialization failures and unique violations are rerun.
    """
    for attempt in range(1, attempts + 1):
        with sessions() as session:
            try:
                result = work(session)
                session.commit()
            except Exception as error:
                session.rollback()
                if attempt == attempts or not retry_if(error):
                    raise
                continue
            return result
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
