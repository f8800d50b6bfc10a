"""Telling database errors apart: "unavailable right now" versus everything else.

psycopg files statement timeouts, deadlocks and disk-full under
OperationalError too, so the class alone does not say "the server went away".
A connection-pool timeout counts as "unavailable" as well.
"""

from __future__ import annotations

import psycopg
import sqlalchemy as sa

# SQLSTATE classes: 08 connection exception, 57P operator intervention
# (admin shutdown, crash shutdown, cannot connect now).
_UNAVAILABLE_SQLSTATE_PREFIXES = ("08", "57P")
# Deadlock, serialization failure, unique violation: rerunning the whole
# transaction is the documented remedy.
_CONFLICT_SQLSTATES = frozenset({"40P01", "40001", "23505"})


def _driver_error(error: BaseException) -> BaseException:
    if isinstance(error, sa.exc.DBAPIError) and error.orig is not None:
        return error.orig
    return error


def is_database_unavailable(error: BaseException) -> bool:
    """The server cannot be reached or dropped the connection (retry without blame).

    So is a pool timeout ("QueuePool limit ... timed out"): every connection
    is busy, which says nothing about the work that was waiting for one.
    """
    if isinstance(error, sa.exc.TimeoutError):
        return True
    if isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated:
        return True
    driver_error = _driver_error(error)
    if isinstance(driver_error, psycopg.Error):
        if driver_error.sqlstate is None:
            return isinstance(driver_error, psycopg.OperationalError | psycopg.InterfaceError)
        return driver_error.sqlstate.startswith(_UNAVAILABLE_SQLSTATE_PREFIXES)
    return False


def is_statement_timeout(error: BaseException) -> bool:
    """A statement ran past `statement_timeout` (waiting for a lock counts)."""
    driver_error = _driver_error(error)
    return isinstance(driver_error, psycopg.Error) and driver_error.sqlstate == "57014"


def is_transaction_conflict(error: BaseException) -> bool:
    """Another transaction won a race; running this one again from scratch is correct."""
    driver_error = _driver_error(error)
    return isinstance(driver_error, psycopg.Error) and driver_error.sqlstate in _CONFLICT_SQLSTATES


# Deadlock and serialization failure only: a unique violation may be the
# action's own fault and must count as a failed attempt.
_LOCK_CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})


def is_lock_conflict(error: BaseException) -> bool:
    """The transaction lost a lock race (deadlock, serialization): nobody's fault, retry it."""
    driver_error = _driver_error(error)
    return (
        isinstance(driver_error, psycopg.Error)
        and driver_error.sqlstate in _LOCK_CONFLICT_SQLSTATES
    )
