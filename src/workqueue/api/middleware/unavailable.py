"""A request that cannot reach the database is answered 503 with `Retry-After`.

While PostgreSQL restarts, fails over or the network to it is cut, every route that
needs it would otherwise end in the catch-all 500 with a traceback in the log. The
outage is not the caller's fault nor a bug: 503 tells callers (and GitLab, and load
balancers) to come back, and `Retry-After` says when. Any other database error is
still a 500.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from workqueue.db.errors import is_database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"  # a restart or failover usually takes a few seconds
UNAVAILABLE_DETAIL = "database unavailable"


def unavailable_answer() -> JSONResponse:
    return JSONResponse(
        {"detail": UNAVAILABLE_DETAIL},
        status_code=503,
        headers={"Retry-After": RETRY_AFTER_SECONDS},
    )


async def _database_error(request: Request, error: Exception) -> JSONResponse:
    if is_database_unavailable(error):
        # One line, no traceback: the outage is logged once per request, not as a bug.
        logger.warning(
            "database unavailable during %s %s: %s",
            request.method,
            request.url.path,
            type(error).__name__,
        )
        return unavailable_answer()
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
    return JSONResponse({"detail": "internal server error"}, status_code=500)


def answer_database_outages(app: FastAPI) -> None:
    """Register the 503 answer for SQLAlchemy errors that mean "database unreachable"."""
    app.add_exception_handler(sa.exc.SQLAlchemyError, _database_error)
