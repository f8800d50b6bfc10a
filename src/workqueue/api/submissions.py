"""Submitting an item, once: the `Idempotency-Key` header and the commit both submission
routes (`POST /api/work-items/mr` and `/trunk`) share.

A type's submission route calls `submit_item`, which runs, in order:

1. `start_submission`: `submit` on the type (403), the caller's rate (429);
2. `replay`: when this caller sent the key before, within 24 hours, the
   first answer again (its status and `outcome`, the item as it is now) and
   nothing else: no GitLab call, no item, no audit entry, no notification.
   The same key with another request is a 422 on `["header",
   "Idempotency-Key"]`;
3. the project (`authorize_submission`, after the type's pure `validate`),
   then the type's own checks that need it (`prepare`: GitLab reads);
4. `commit_submission`: in one transaction the type's work, the answer with
   its `item_submitted` audit entry and the key's answer, then the wake-up
   and the audit log. A holding limit refused in the work is a 429.

Keys are per caller (issuer and identity): another caller's key of the same
text is another key, and its answer is never shown. A replay still passes
step 1 and `submit` on the item's project, so it counts against the caller's
rate and shows nothing a caller has since lost access to. Only answers that
stored an item are recorded: after a refusal (422, 409, 429) the same key
submits anew. "The same request" is the same item type and body as parsed
(`request_digest`), so a replay can never carry a body that skipped the
content rules or the limits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy.orm import Session

from workqueue.api.caller_state import Caller
from workqueue.api.deps import Runtime, require_on_project
from workqueue.api.quotas import admit_submission, authorize_submission, holding_limit_refusal
from workqueue.api.schemas import SubmitResponse, item_body
from workqueue.db.transactions import run_in_transaction
from workqueue.queue import read_repository
from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.holding_limits import HoldingLimitError
from workqueue.queue.models import WorkItem
from workqueue.queue.submission_keys import repository as keys

IDEMPOTENCY_KEY = "Idempotency-Key"
KEY_LIFETIME = timedelta(hours=24)
MAX_KEY_LENGTH = 255
# Printable ASCII, space included (HTTP strips it around the value).
KEY_PATTERN = r"^[\x20-\x7e]+$"
# Set on a replayed answer, as Stripe's API does: the client can tell it got the first one.
REPLAYED_HEADER = "Idempotent-Replayed"


def _idempotency_key(
    request: Request,
    value: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY,
            min_length=1,
            max_length=MAX_KEY_LENGTH,
            pattern=KEY_PATTERN,
            description="Makes a resend safe: the same caller repeating a key within 24 h "
            "gets the first answer again and nothing else happens; the same key with "
            "another body is a 422. 1 to 255 printable ASCII characters.",
        ),
    ] = None,
) -> str | None:
    if value is not None and len(request.headers.getlist(IDEMPOTENCY_KEY)) > 1:
        # Which one was meant? Taking either could replay an answer the caller never got.
        raise RequestValidationError([_key_error("give one Idempotency-Key header, not several")])
    return value


IdempotencyKeyHeader = Annotated[str | None, Depends(_idempotency_key)]


def _key_error(message: str) -> dict[str, object]:
    return {"loc": ("header", IDEMPOTENCY_KEY), "msg": message, "type": "value_error"}


@dataclass(frozen=True)
class Submission:
    """One submission request: who sends it, for which type, and its key if any."""

    caller: Caller
    item_type: str
    key: keys.CallerKey | None
    request_digest: str
    # The project as the caller named it: a refusal names it so (never a resolved path).
    project_shown: str


@dataclass(frozen=True)
class Submitted:
    """What a route's work did in the transaction: its answer and the audit entry."""

    answer: SubmitResponse
    entry: AuditEntry


@dataclass(frozen=True)
class Stored:
    """What a type's work stored: the item, the outcome (`created`, `unchanged`, ...),
    and what its `item_submitted` audit entry tells besides the outcome."""

    item: WorkItem
    outcome: str
    audit_details: Mapping[str, Any] = field(default_factory=dict)


def submit_item(
    runtime: Runtime,
    caller: Caller,
    response: Response,
    *,
    item_type: str,
    body: BaseModel,
    project: str,
    idempotency_key: str | None,
    prepare: Callable[[str], Callable[[Session], Stored]],
    validate: Callable[[], None] | None = None,
) -> SubmitResponse:
    """A submission route's whole flow (steps 1 to 4 above). `validate`: the type's pure
    rules, run before the project costs a GitLab call; `prepare(project_path)`: the
    type's checks that need the project, returning the work to run in the transaction."""
    submission = start_submission(
        runtime, caller, item_type, body, idempotency_key, project_shown=project
    )
    if (replayed := replay(runtime, submission, response)) is not None:
        return replayed
    project_path = authorize_submission(runtime, caller, item_type, project, validate=validate)
    store = prepare(project_path)

    def work(session: Session) -> Submitted:
        stored = store(session)
        dimensions = read_repository.dimensions_of(session, [stored.item.id])[stored.item.id]
        answer = SubmitResponse(
            **item_body(stored.item, dimensions).model_dump(), outcome=stored.outcome
        )
        entry = AuditEntry(
            event_type="item_submitted",
            work_item_id=answer.id,
            item_type=item_type,
            actor=caller.identity,
            after={"phase": answer.phase},
            details={"outcome": answer.outcome, **stored.audit_details},
        )
        return Submitted(answer, entry)

    try:
        return commit_submission(runtime, submission, response, work)
    except HoldingLimitError as limit:
        raise holding_limit_refusal(limit) from None


def start_submission(
    runtime: Runtime,
    caller: Caller,
    item_type: str,
    body: BaseModel,
    idempotency_key: str | None,
    *,
    project_shown: str,
) -> Submission:
    """Step 1 (403, 429), and the request as a key compares it."""
    admit_submission(runtime, caller, item_type)
    parsed = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{item_type}\n{parsed}".encode()).hexdigest()
    key = (
        None
        if idempotency_key is None
        else keys.CallerKey(caller.issuer_key, caller.identity, idempotency_key)
    )
    return Submission(caller, item_type, key, f"sha256:{digest}", project_shown)


def replay(runtime: Runtime, submission: Submission, response: Response) -> SubmitResponse | None:
    """The first answer to this caller's key (None: a new key, or none given); 422 when the
    key was used for another request."""
    key = submission.key
    if key is None:
        return None
    with runtime.sessions() as session:
        stored = keys.find_answer(session, key)
        replayed = None if stored is None else _replayed(runtime, session, submission, stored)
    if replayed is None:
        return None
    _answer_replayed(response, replayed)
    return replayed[0]


def commit_submission(
    runtime: Runtime,
    submission: Submission,
    response: Response,
    work: Callable[[Session], Submitted],
) -> SubmitResponse:
    """Run `work` with its audit entry and the key's answer in one transaction (rerun
    on a lost race); then wake the item unless nothing changed, and log the entry.

    A concurrent request with the same key waits for this one's commit on the
    key's lock and then gets this answer (`replay`'s), so both see one item.
    """

    def transaction(session: Session) -> tuple[SubmitResponse, int, AuditEntry | None, bool]:
        key = submission.key
        if key is not None:
            keys.lock_key(session, key)
            stored = keys.find_answer(session, key)
            replayed = None if stored is None else _replayed(runtime, session, submission, stored)
            if replayed is not None:
                return replayed[0], replayed[1], None, False
        submitted = work(session)
        status = 201 if submitted.answer.outcome == "created" else 200
        if key is not None:
            keys.record_answer(
                session,
                key,
                keys.StoredAnswer(
                    item_type=submission.item_type,
                    request_digest=submission.request_digest,
                    work_item_id=submitted.answer.id,
                    status_code=status,
                    outcome=submitted.answer.outcome,
                ),
                lifetime=KEY_LIFETIME,
            )
        # In the submission's own transaction: a replica killed right after the
        # commit must not leave an item without its first history entry.
        stored_in_history = runtime.audit.store_in(session, [submitted.entry])
        return submitted.answer, status, submitted.entry, stored_in_history

    answer, status, entry, stored_in_history = run_in_transaction(runtime.sessions, transaction)
    if entry is None:
        _answer_replayed(response, (answer, status))
        return answer
    response.status_code = status
    if answer.outcome != "unchanged":
        runtime.manager.notify(answer.id)
    runtime.audit.write(entry, stored=stored_in_history)
    return answer


def _replayed(
    runtime: Runtime, session: Session, submission: Submission, stored: keys.StoredAnswer
) -> tuple[SubmitResponse, int] | None:
    """The stored answer with the item as it is now; None when the item is gone."""
    if stored.request_digest != submission.request_digest:
        raise RequestValidationError(
            [
                _key_error(
                    "this Idempotency-Key was used for another request in the last 24 hours; "
                    "send a new key with a changed body"
                )
            ]
        )
    item = read_repository.get_item(session, stored.work_item_id)
    if item is None:
        return None
    # The caller may have lost the project since: it learns nothing more than a refusal.
    require_on_project(
        runtime,
        submission.caller,
        "submit",
        item.item_type,
        item.project_path,
        shown_as=submission.project_shown,
    )
    dimensions = read_repository.dimensions_of(session, [item.id])[item.id]
    body = SubmitResponse(**item_body(item, dimensions).model_dump(), outcome=stored.outcome)
    return body, stored.status_code


def _answer_replayed(response: Response, answer: tuple[SubmitResponse, int]) -> None:
    response.status_code = answer[1]
    response.headers[REPLAYED_HEADER] = "true"
