"""`POST /api/signals`: an outside system reports an external check on a commit.

The reporter needs `report` on the project (`mr` items: the checks gate their
merge and completion). The signal is stored (the newest per variant by its own
time wins) and the items of that commit are told; a resend with the same
`Idempotency-Key` is a `duplicate` and changes nothing. The rules a report
keeps are those of every way in (`signals.intake`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

from workqueue.api.deps import CallerDep, Runtime, RuntimeDep, require_on_project
from workqueue.api.schemas import error_responses
from workqueue.api.submissions import IDEMPOTENCY_KEY, KEY_PATTERN, MAX_KEY_LENGTH
from workqueue.signals.intake import (
    SIGNAL_ITEM_TYPE,
    SignalReport,
    TooFarAheadError,
    accept_signal,
    signal_of,
)
from workqueue.signals.repository import Recorded
from workqueue.signals.signal import Signal

router = APIRouter(prefix="/api/signals", tags=["external checks"])


class SignalAnswer(BaseModel):
    status: Literal["accepted", "duplicate"]


def _idempotency_key(
    request: Request,
    value: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY,
            min_length=1,
            max_length=MAX_KEY_LENGTH,
            pattern=KEY_PATTERN,
            description="the same reporter repeating a key: a duplicate, nothing changes",
        ),
    ] = None,
) -> str | None:
    if value is not None and len(request.headers.getlist(IDEMPOTENCY_KEY)) > 1:
        raise RequestValidationError(
            [
                {
                    "loc": ("header", IDEMPOTENCY_KEY),
                    "msg": "give one Idempotency-Key header, not several",
                    "type": "value_error",
                }
            ]
        )
    return value


@router.post(
    "",
    status_code=202,
    response_model=SignalAnswer,
    responses=error_responses(400, 401, 403, 413),
)
def report_signal(
    body: SignalReport,
    runtime: RuntimeDep,
    caller: CallerDep,
    key: Annotated[str | None, Depends(_idempotency_key)] = None,
) -> SignalAnswer:
    """Report check `name` of component `variant` as `status` on commit `sha`."""
    require_on_project(runtime, caller, "report", SIGNAL_ITEM_TYPE, body.project)
    try:
        signal = signal_of(body, datetime.now(UTC))
    except TooFarAheadError as error:
        raise invalid("timestamp", str(error)) from None
    recorded = store_signal(runtime, signal, source="api", reporter=caller.identity, key=key)
    return SignalAnswer(status=recorded.outcome.value)


def store_signal(
    runtime: Runtime, signal: Signal, *, source: str, reporter: str, key: str | None = None
) -> Recorded:
    """Store, audit and announce one authorised signal; wakes the intake on a change."""
    recorded = accept_signal(
        runtime.sessions,
        runtime.registry,
        runtime.audit,
        signal,
        source=source,
        reporter=reporter,
        key=key,
    )
    if recorded.changed:
        runtime.manager.intake.stored_here()
    return recorded


def invalid(field: str, message: str) -> RequestValidationError:
    """A 422 naming one field of the body."""
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])
