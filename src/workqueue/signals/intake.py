"""Reports in, signals stored: what every way in (`POST /api/signals`, Tekton, SQS) shares.

A report is held to one set of rules whichever way it came (`SignalReport`,
a 422 naming the field on the API, a deleted message over SQS), then stored,
audited and announced by `accept_signal`. Who may report on which project is
the caller's business: each way in authorises before it calls in here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import TypeRegistry
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.signals.config import CHECK_NAME_PATTERN, VARIANT_PATTERN
from workqueue.signals.repository import Recorded, record_signal
from workqueue.signals.signal import CheckStatus, Signal
from workqueue.signals.tekton import RunReport

# Signals gate `mr` items: `report` is granted on them, and their audit entries name it.
SIGNAL_ITEM_TYPE = "mr"
# A reporter's clock may run a little ahead; a time further ahead would pin its
# status against every real report until then.
MAX_CLOCK_SKEW = timedelta(minutes=5)
# No build reports from before this; a time before year 1 in UTC would be stored BC
# and break every read of the commit's checks.
EARLIEST_REPORT = datetime(2000, 1, 1, tzinfo=UTC)
SHA_PATTERN = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$"
# No blanks, no C0 or C1 controls (a terminal reads U+009B as a control sequence: the
# CLI prints links), no bidi or zero-width format characters (a link that reads
# otherwise than it goes).
URL_PATTERN = r"^https?://[^\s\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]+$"
PROJECT_PATTERN = r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$"
_PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f]*$"


class SignalReport(BaseModel):
    """One report as a reporter sends it (the body of `POST /api/signals`)."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(
        min_length=1, max_length=255, pattern=PROJECT_PATTERN, description="the project's full path"
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
    description: str | None = Field(None, max_length=1000, pattern=_PRINTABLE)
    timestamp: AwareDatetime | None = Field(
        None, description="when the status was true (RFC 3339); default: when received"
    )


class TooFarAheadError(ValueError):
    """The report's time is more than `MAX_CLOCK_SKEW` ahead of ours, or before
    `EARLIEST_REPORT`."""


def signal_of(report: SignalReport, now: datetime) -> Signal:
    """The signal a valid report makes; raises TooFarAheadError."""
    reported_at = report.timestamp or now
    if reported_at > now + MAX_CLOCK_SKEW:
        raise TooFarAheadError(f"more than {MAX_CLOCK_SKEW.seconds // 60} minutes in the future")
    if reported_at < EARLIEST_REPORT:
        raise TooFarAheadError(f"before {EARLIEST_REPORT.date().isoformat()}: no build reports so")
    return Signal(
        project=report.project,
        sha=report.sha,
        name=report.name,
        variant=report.variant,
        status=report.status,
        reported_at=reported_at,
        url=report.url,
        description=report.description,
    )


def run_signal(run: RunReport, now: datetime) -> Signal:
    """A PipelineRun's signal, held to the same rules; raises ValidationError (the
    fields named as a report names them) or TooFarAheadError."""
    report = SignalReport(
        project=run.project or "",
        sha=run.sha or "",
        name=run.name,
        variant=run.variant,
        status=run.status,
        url=run.url,
        timestamp=run.reported_at,
    )
    return signal_of(report, now)


def report_signal(body: Mapping[str, Any], now: datetime) -> Signal:
    """A signal from a JSON object shaped like a report; raises ValidationError or
    TooFarAheadError."""
    return signal_of(SignalReport.model_validate(body), now)


def accept_signal(
    sessions: sessionmaker[Session],
    registry: TypeRegistry,
    audit: AuditLog,
    signal: Signal,
    *,
    source: str,
    reporter: str,
    key: str | None = None,
) -> Recorded:
    """Store and audit one authorised signal. When the store changed, the commit's
    items were told (a `check_signal` delivery): the caller wakes the intake."""
    recorded = run_in_transaction(
        sessions,
        lambda session: record_signal(
            session, registry, signal, source=source, reporter=reporter, idempotency_key=key
        ),
    )
    audit.write(
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
    return recorded
