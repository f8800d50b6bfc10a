"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from workqueue.db.migrate import current_revision, head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up (no dependency is checked)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(request: Request) -> dict[str, str] | JSONResponse:
    """The database answers and its schema is at the revision this build expects.

    Through the probe pool: a saturated work pool does not make the replica unready.
    """
    engine = request.app.state.probe_engine
    try:
        with engine.connect() as connection:
            revision = current_revision(connection)
    except SQLAlchemyError:
        return JSONResponse({"detail": "database unreachable"}, status_code=503)
    expected = head_revision()
    if revision != expected:
        return JSONResponse(
            {"detail": f"database schema at {revision}, this build needs {expected}"},
            status_code=503,
        )
    return {"status": "ready"}
