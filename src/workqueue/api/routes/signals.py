"""`POST /api/signals`: an outside system reports an external check on a commit.

The reporter needs `report` on the project (`mr` items: the checks gate their
merge and completion). The signal is stored (the newest per variant by its own
time wins) and the items of that commit are told; a resend with the same
`Idempotency-Key` is a `duplicate` and changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Request
from fastapi.exceptions import RequestValidationError
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from workqueue.api.deps import (
    NO_CONTROL_CHARACTERS,
    CallerDep,
    Runtime,
    RuntimeDep,
    require_on_project,
)
from workqueue.api.schemas import error_responses
from workqueue.api.submissions import IDEMPOTENCY_KEY, KEY_PATTERN, MAX_KEY_LENGTH
from workqueue.db.transactions import run_in_transaction
from workqueue.queue.audit.log import AuditEntry
from workqueue.signals.config import CHECK_NAME_PATTERN, VARIANT_PATTERN
from workqueue.signals.repository import Recorded, record_signal
from workqueue.signals.signal import CheckStatus, Signal

router = APIRouter(prefix="/api/signals", tags=["external checks"])

# Signals gate `mr` items: `report` is granted on them.
SIGNAL_ITEM_TYPE = "mr"
# A reporter's clock may run a little ahead; a time further ahead would pin its
# status against every real report until then.
MAX_CLOCK_SKEW = timedelta(minutes=5)
SHA_PATTERN = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$"
URL_PATTERN = r"^https?://[^\s\x00-\x1f\x7f]+$"


class SignalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$",
        description="the GitLab project's full path",
    )
    sha: str = Field(pattern=SHA_PATTERN, description="the full commit sha, lower case")
    name: str = Field(pattern=CHECK_NAME_PATTERN, max_length=64, description="the check")
    variant: str = Field(
        "",
        max_length=128,
        pattern=f"^(?:{VARIANT_PATTERN[1:-1]})?$",
        description="the component; empty for a check with one result",
    )
    status: CheckStatus
    url: str | None = Field(
        None, max_length=2048, pattern=URL_PATTERN, description="where people see the run"
    )
    description: str | None = Field(None, max_length=1000, pattern=NO_CONTROL_CHARACTERS)
    timestamp: AwareDatetime | None = Field(
        None, description="when the status was true (RFC 3339); default: when received"
    )


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
    body: SignalRequest,
    runtime: RuntimeDep,
    caller: CallerDep,
    key: Annotated[str | None, Depends(_idempotency_key)] = None,
) -> SignalAnswer:
    """Report check `name` of component `variant` as `status` on commit `sha`."""
    require_on_project(runtime, caller, "report", SIGNAL_ITEM_TYPE, body.project)
    now = datetime.now(UTC)
    reported_at = body.timestamp or now
    if reported_at > now + MAX_CLOCK_SKEW:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "timestamp"),
                    "msg": f"more than {MAX_CLOCK_SKEW.seconds // 60} minutes in the future",
                    "type": "value_error",
                }
            ]
        )
    signal = Signal(
        project=body.project,
        sha=body.sha,
        name=body.name,
        variant=body.variant,
        status=body.status,
        reported_at=reported_at,
        url=body.url,
        description=body.description,
    )
    recorded = accept_signal(runtime, signal, source="api", reporter=caller.identity, key=key)
    return SignalAnswer(status=recorded.outcome.value)


def accept_signal(
    runtime: Runtime, signal: Signal, *, source: str, reporter: str, key: str | None = None
) -> Recorded:
    """Store and announce one authorised signal (`api`, `tekton`), audited; wakes the items."""
    recorded = run_in_transaction(
        runtime.sessions,
        lambda session: record_signal(
            session,
            runtime.registry,
            signal,
            source=source,
            reporter=reporter,
            idempotency_key=key,
        ),
    )
    runtime.audit.write(
        AuditEntry(
            event_type="check_signal",
            item_type=SIGNAL_ITEM_TYPE,
            actor=reporter,
            reason=f"{recorded.outcome}{'' if recorded.changed else ' (no change)'}",
            details={
                "project": signal.project,
                "sha": signal.sha,
                "name": signal.name,
                "variant": signal.variant,
                "status": signal.status.value,
                "source": source,
            },
        )
    )
    if recorded.changed:
        runtime.manager.intake.stored_here()
    return recorded
