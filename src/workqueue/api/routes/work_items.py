"""Generic item routes: list, get, retry, cancel, and the OAuth-cookie bridge `/me`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated, Any

import pydantic_core
import sqlalchemy as sa
from fastapi import APIRouter, Body, Header, HTTPException, Query, Response
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from workqueue.api.caller_state import Caller
from workqueue.api.deps import (
    MAX_QUERY_TEXT_LENGTH,
    NO_CONTROL_CHARACTERS,
    CallerDep,
    FilterText,
    ItemIdPath,
    Runtime,
    RuntimeDep,
    require,
    require_on_project,
)
from workqueue.api.quotas import (
    enforce_live_item_limit,
    enforce_retry_project_rate,
    enforce_submission_rate,
)
from workqueue.api.schemas import (
    CancelRequest,
    TokenBody,
    WorkItemBody,
    WorkItemPage,
    error_responses,
    item_body,
    listed_item_json,
)
from workqueue.db.transactions import run_in_transaction
from workqueue.queue import enqueue, ownership_repository, read_repository
from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.read_repository import MAX_PAGE_SIZE, InvalidCursorError, RowPage

router = APIRouter(prefix="/api/work-items", tags=["work items"])

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="page size")]
Cursor = Annotated[
    str | None,
    Query(
        description="next_cursor of the previous page",
        pattern=NO_CONTROL_CHARACTERS,
        max_length=MAX_QUERY_TEXT_LENGTH,
    ),
]

RETRYABLE_PHASES = frozenset({Phase.FAILED, Phase.CANCELLED})
CANCELLABLE_PHASES = frozenset({Phase.ACTIVE, Phase.FAILED})


@router.get(
    "/me",
    response_model=TokenBody,
    tags=["auth"],
    responses=error_responses(401, descriptions={401: "No X-Forwarded-Access-Token"}),
)
def me(
    x_forwarded_access_token: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> TokenBody:
    """Hand a cookie-session user the access token the OAuth proxy holds for them (DDR-27).

    Only this path sits behind the proxy, which sets the header from its session.
    """
    if not x_forwarded_access_token:
        raise HTTPException(status_code=401, detail="no proxy session: sign in through the proxy")
    return TokenBody(token=x_forwarded_access_token)


# The start of an id: hex digits, with its dashes or without (at least 4 digits).
ID_PREFIX_PATTERN = r"^(?:[0-9a-fA-F]-?){3}[0-9a-fA-F](?:-?[0-9a-fA-F]){0,28}-?$"


def id_range(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest ids that start with `prefix`: a range the primary key's
    index answers (a LIKE on the id's text would read every row)."""
    digits = prefix.replace("-", "").lower()
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


@router.get("", response_model=WorkItemPage, responses=error_responses(401, 403))
def list_work_items(
    runtime: RuntimeDep,
    caller: CallerDep,
    item_type: FilterText = None,
    phase: Phase | None = None,
    id_prefix: Annotated[
        str | None,
        Query(
            pattern=ID_PREFIX_PATTERN,
            description="only items whose id starts with this (at least 4 hex digits; "
            "dashes as in the id may be given or left out)",
        ),
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    """Items of every type the caller may read, newest first."""
    readable, filters = readable_scope(runtime, caller, item_type)
    if phase is not None:
        filters.append(WorkItem.phase == phase)
    if id_prefix is not None:
        filters.append(WorkItem.id.between(*id_range(id_prefix)))
    return page_body(
        runtime,
        lambda session: read_repository.list_rows(
            session, item_types=readable, filters=filters, limit=limit, cursor=cursor
        ),
    )


@router.get("/{item_id}", response_model=WorkItemBody, responses=error_responses(401, 403, 404))
def get_work_item(item_id: ItemIdPath, runtime: RuntimeDep, caller: CallerDep) -> WorkItemBody:
    with runtime.sessions() as session:
        item = _existing(session, item_id)
        require_on_project(runtime, caller, "read", item.item_type, item.project_path)
        return item_body(item, read_repository.dimensions_of(session, [item.id])[item.id])


@router.post(
    "/{item_id}/retry",
    response_model=WorkItemBody,
    responses=error_responses(
        401,
        403,
        404,
        408,
        409,
        413,
        descriptions={
            409: "The item is not failed or cancelled, its contents were dropped after "
            "retention, or another is live for it"
        },
    ),
)
def retry_work_item(item_id: ItemIdPath, runtime: RuntimeDep, caller: CallerDep) -> WorkItemBody:
    """Reactivate a failed or cancelled item: active, attempts 0, processed again.

    A retry makes the service write to GitLab again, so it counts against the
    caller's submission rate; reviving a cancelled item counts against its
    owner's live-item limit (cancel-then-retry cycles cannot bypass either).
    """
    enforce_submission_rate(runtime, caller)
    enforce_retry_project_rate(runtime, caller, item_id)

    def work(session: Session) -> WorkItemBody:
        item = _existing(session, item_id)
        require_on_project(runtime, caller, "retry", item.item_type, item.project_path)
        _refuse_unless_retryable(item)
        # Locked, then checked again: the safety sweep drops a finished item's
        # contents under the same row lock, so a retry sees the drop or keeps
        # the sweep away until it commits.
        session.refresh(item, with_for_update=True)
        _refuse_unless_retryable(item)
        _refuse_second_live_item(session, item)
        if item.phase == Phase.CANCELLED:
            enforce_live_item_limit(runtime, session, item)
        hook = _registration_hook(runtime, item.item_type, "retry_hook")
        if hook is not None:
            hook(session, item)
        enqueue.mark_actionable(session, item.id, item.item_type, reactivate=True)
        session.refresh(item)
        return item_body(item, read_repository.dimensions_of(session, [item.id])[item.id])

    try:
        body = run_in_transaction(runtime.sessions, work)
    except IntegrityError:
        raise HTTPException(
            status_code=409,
            detail="a newer item for the same identity is live; retry that one instead",
        ) from None
    _audit(runtime, caller.identity, body, "retried")
    runtime.manager.notify(body.id)
    return body


@router.post(
    "/{item_id}/cancel",
    response_model=WorkItemBody,
    responses=error_responses(
        401,
        403,
        404,
        408,
        409,
        413,
        502,
        descriptions={
            409: "The item is completed or cancelled already",
            502: "GitLab failed while closing the MR (`close_mr`); nothing was changed",
        },
    ),
)
def cancel_work_item(
    item_id: ItemIdPath,
    runtime: RuntimeDep,
    caller: CallerDep,
    request: Annotated[CancelRequest | None, Body()] = None,
) -> WorkItemBody:
    """Stop an active or failed item. Nothing changes on GitLab unless `close_mr` is true."""
    options = request or CancelRequest()
    project_of_item: list[str | None] = []

    def work(session: Session) -> WorkItemBody:
        item = _existing(session, item_id)
        require_on_project(runtime, caller, "retry", item.item_type, item.project_path)
        project_of_item[:] = [item.project_path]
        if item.phase not in CANCELLABLE_PHASES:
            raise HTTPException(
                status_code=409, detail=f"item is {item.phase}: it cannot be cancelled"
            )
        hook = _registration_hook(runtime, item.item_type, "cancel_hook")
        if hook is not None:
            hook(session, item, options.model_dump())
        enqueue.cancel_item(session, item.id)
        session.refresh(item)
        return item_body(item, read_repository.dimensions_of(session, [item.id])[item.id])

    body = run_in_transaction(runtime.sessions, work)
    _audit(runtime, caller.identity, body, "cancelled", close_mr=options.close_mr)
    # No engine step follows a cancel: tell the change listeners (attention
    # queues) ourselves.
    runtime.manager.report_change(body.id, project_of_item[0] if project_of_item else None)
    return body


def readable_scope(
    runtime: Runtime, caller: Caller, item_type: str | None
) -> tuple[set[str] | None, list[sa.ColumnElement[bool]]]:
    """What a list may show this caller: the item types (None: all) and the SQL conditions.

    403 when `item_type` is not readable or the caller may read nothing; the
    dashboard lists through this too, so its scoping is the API's.
    """
    readable = runtime.gatekeeper.readable_types(caller)
    if item_type is not None:
        require(runtime, caller, "read", item_type)
        readable = {item_type}
    elif readable is not None and not readable:
        raise HTTPException(status_code=403, detail=f"{caller.identity} may not read any items")
    return readable, [read_repository.visible_to(runtime.gatekeeper.visibility(caller, "read"))]


def page_body(runtime: Runtime, query: Callable[[Session], RowPage]) -> Response:
    """Run a page query and answer the page, serialised straight from its rows.

    Routes keep `response_model=WorkItemPage` for the schema; the body is
    built by `listed_item_json` and `pydantic_core.to_json` instead of
    validating a model per item, which cost a page as much as its query.
    """
    with runtime.sessions() as session:
        # The page is one statement, hence one snapshot: no BEGIN/ROLLBACK round trips.
        session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        try:
            page = query(session)
        except InvalidCursorError as error:
            raise HTTPException(
                status_code=422,
                detail=[{"loc": ["query", "cursor"], "msg": str(error), "type": "value_error"}],
            ) from None
    body = {"items": [listed_item_json(row) for row in page.items], "next_cursor": page.next_cursor}
    return Response(content=pydantic_core.to_json(body), media_type="application/json")


def _registration_hook(runtime: Runtime, item_type: str, name: str) -> Any:
    """A type's hook, or None when this replica does not handle the type (shared database)."""
    if item_type not in runtime.registry:
        return None
    return getattr(runtime.registry.get(item_type), name)


def _refuse_unless_retryable(item: WorkItem) -> None:
    """409 for an item in a phase retry does not leave, or without its contents: a retry
    of an item whose file contents retention dropped would push empty files."""
    if item.phase not in RETRYABLE_PHASES:
        raise HTTPException(
            status_code=409,
            detail=f"item is {item.phase}: only failed or cancelled items can be retried",
        )
    if item.contents_dropped_at is not None:
        raise HTTPException(
            status_code=409,
            detail=f"item's file contents were dropped on {item.contents_dropped_at:%Y-%m-%d} "
            "after retention.content_days; submit its contents again instead",
        )


def _refuse_second_live_item(session: Session, item: WorkItem) -> None:
    """409 when another live item holds the same identity (e.g. a newer generation).

    The partial unique index on `live_key` guarantees it as well; checking
    first gives the caller the holder's id instead of a bare conflict.
    """
    if item.live_key is None or item.phase != Phase.CANCELLED:
        return  # a failed item is live itself: nobody else can hold its key
    holder = ownership_repository.live_key_holder(session, item.live_key, other_than=item.id)
    if holder is not None:
        raise HTTPException(
            status_code=409,
            detail=f"item {holder} (a newer generation) is live for the same identity; "
            "retry or update that one instead",
        )


def _existing(session: Session, item_id: uuid.UUID) -> WorkItem:
    item = read_repository.get_item(session, item_id)
    if item is None:
        raise HTTPException(status_code=404, detail=f"no work item {item_id}")
    return item


def _audit(runtime: Runtime, actor: str, body: WorkItemBody, what: str, **details: object) -> None:
    runtime.audit.write(
        AuditEntry(
            event_type=f"item_{what}",
            work_item_id=body.id,
            item_type=body.item_type,
            actor=actor,
            after={"phase": body.phase},
            details=details,
        )
    )
