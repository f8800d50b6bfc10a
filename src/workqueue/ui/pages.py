"""The dashboard's pages: items, one item, attention queues, the types' pages; retry, cancel.

Every page calls what the JSON API calls: `readable_scope` and the
read repository for lists, the work-item, history and queue route
functions for the rest. Permissions, scoping, 403s and their audit entries
are therefore the API's, whoever renders them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from workqueue.api.caller_state import Caller
from workqueue.api.deps import NO_CONTROL_CHARACTERS, PathText, Runtime, RuntimeDep
from workqueue.api.routes.attention import list_queues as list_attention_queues
from workqueue.api.routes.item_history import item_history
from workqueue.api.routes.work_items import (
    CANCELLABLE_PHASES,
    RETRYABLE_PHASES,
    cancel_work_item,
    get_work_item,
    readable_scope,
    retry_work_item,
)
from workqueue.api.schemas import CancelRequest, listed_item_body
from workqueue.attention import repository as attention_repository
from workqueue.gitlab.errors import GitLabError
from workqueue.queue import read_repository
from workqueue.queue.audit import repository as audit_repository
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.read_repository import InvalidCursorError
from workqueue.types.catalog import catalog
from workqueue.types.plugin import DashboardPage
from workqueue.ui import repository as ui_repository
from workqueue.ui.browser_guard import refuse_cross_site
from workqueue.ui.rendering import NavLink, render, type_template
from workqueue.ui.sign_in import SignInNeededError, dashboard_caller

router = APIRouter(prefix="/ui", include_in_schema=False)

PAGE_SIZE = 50
MAX_FILTER_LENGTH = 1024

Built = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class ItemFilters:
    item_type: str | None
    phase: Phase | None
    project: str | None
    queue: str | None
    cursor: str | None

    @classmethod
    def from_request(cls, request: Request) -> ItemFilters:
        """The filter form's values; an empty field means no filter."""
        values = {
            name: _query_text(request, name) for name in ("type", "phase", "project", "queue")
        }
        phase = values["phase"]
        if phase is not None and phase not in set(Phase):
            raise HTTPException(status_code=422, detail=f"unknown phase {phase!r}")
        return cls(
            item_type=values["type"],
            phase=None if phase is None else Phase(phase),
            project=values["project"],
            queue=values["queue"],
            cursor=_query_text(request, "cursor"),
        )

    def query(self, **changes: str | None) -> str:
        """The query string of these filters, with some changed (e.g. the cursor)."""
        fields = {
            "type": self.item_type,
            "phase": None if self.phase is None else str(self.phase),
            "project": self.project,
            "queue": self.queue,
            "cursor": self.cursor,
        } | changes
        return urlencode({name: value for name, value in fields.items() if value})


def _query_text(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    if not value:
        return None
    if len(value) > MAX_FILTER_LENGTH or re.fullmatch(NO_CONTROL_CHARACTERS, value) is None:
        detail = f"{name}: at most {MAX_FILTER_LENGTH} characters, no control characters"
        raise HTTPException(status_code=422, detail=detail)
    return value


@router.get("/", response_class=HTMLResponse)
def items_page(request: Request, runtime: RuntimeDep) -> HTMLResponse:
    return _respond(request, runtime, lambda caller: _items(request, runtime, caller))


@router.get("/items/{item_id}", response_class=HTMLResponse)
def item_page(item_id: PathText, request: Request, runtime: RuntimeDep) -> HTMLResponse:
    return _respond(request, runtime, lambda caller: _item(runtime, caller, _item_id(item_id)))


@router.get("/queues", response_class=HTMLResponse)
def attention_page(request: Request, runtime: RuntimeDep) -> HTMLResponse:
    def build(caller: Caller) -> Built:
        queues = list_attention_queues(runtime, caller).items
        return "queues.html", {"queues": queues}

    return _respond(request, runtime, build)


def type_page_route(
    item_type: str, page: DashboardPage
) -> Callable[[Request, Runtime], HTMLResponse]:
    """The route of one type's page (`ui.mount` adds one per page in the catalog): 404
    on a replica that does not handle the type, like the type's API."""

    def type_page(request: Request, runtime: RuntimeDep) -> HTMLResponse:
        def build(caller: Caller) -> Built:
            if item_type not in runtime.registry:
                raise HTTPException(404, f"This service does not handle {item_type} items")
            return type_template(page), dict(page.context(runtime, caller))

        return _respond(request, runtime, build)

    return type_page


@router.post("/items/{item_id}/retry", response_class=HTMLResponse)
def retry(item_id: PathText, request: Request, runtime: RuntimeDep) -> HTMLResponse:
    def build(caller: Caller) -> Built:
        body = retry_work_item(_item_id(item_id), runtime, caller)
        return _item(runtime, caller, body.id, notice=f"Retried: the item is {body.phase} again.")

    return _respond(request, runtime, build, mutation=True)


@router.post("/items/{item_id}/cancel", response_class=HTMLResponse)
def cancel(item_id: PathText, request: Request, runtime: RuntimeDep) -> HTMLResponse:
    return _respond(request, runtime, _canceller(runtime, item_id, close_mr=False), mutation=True)


@router.post("/items/{item_id}/cancel-and-close", response_class=HTMLResponse)
def cancel_and_close(item_id: PathText, request: Request, runtime: RuntimeDep) -> HTMLResponse:
    return _respond(request, runtime, _canceller(runtime, item_id, close_mr=True), mutation=True)


def _canceller(runtime: Runtime, item_id: str, *, close_mr: bool) -> Callable[[Caller], Built]:
    def build(caller: Caller) -> Built:
        options = CancelRequest(close_mr=close_mr)
        body = cancel_work_item(_item_id(item_id), runtime, caller, request=options)
        closed = " and its MR closed" if close_mr else ""
        return _item(runtime, caller, body.id, notice=f"Cancelled{closed}.")

    return build


def _respond(
    request: Request,
    runtime: Runtime,
    build: Callable[[Caller], Built],
    *,
    mutation: bool = False,
) -> HTMLResponse:
    """Authenticate, build the page, and turn refusals into pages with their status."""
    # Pages of the types this replica handles (the others answer 404, like their API).
    nav = [
        NavLink(page.path, page.title)
        for plugin in catalog()
        if plugin.name in runtime.registry
        for page in plugin.dashboard_pages
    ]
    caller: Caller | None = None
    try:
        if mutation:
            refuse_cross_site(request)
        caller = dashboard_caller(request, runtime)
        template, context = build(caller)
    except SignInNeededError as error:
        # A browser opening a page sends no token (a pasted one lives in the tab's
        # script): it gets the page's frame with 200, whose script then loads the
        # content with the token or asks for one. Refused tokens and the page's
        # own requests without one are 401.
        opening = not error.rejected and not mutation and "hx-request" not in request.headers
        context = {"message": str(error), "rejected": error.rejected}
        status = 200 if opening else 401
        return render(request, "sign_in.html", context, caller=None, status_code=status, nav=nav)
    except HTTPException as error:
        context = {"status": error.status_code, "detail": _detail_text(error.detail)}
        page = render(
            request, "error.html", context, caller=caller, status_code=error.status_code, nav=nav
        )
        page.headers.update(error.headers or {})  # Retry-After of a 429
        return page
    except GitLabError as error:
        context = {"status": 502, "detail": f"GitLab failed: {error}"}
        return render(request, "error.html", context, caller=caller, status_code=502, nav=nav)
    return render(request, template, context, caller=caller, nav=nav)


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(str(part.get("msg", part)) for part in detail if isinstance(part, dict))
    return str(detail)


def _item_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise HTTPException(status_code=404, detail=f"no work item {text}") from None


def _items(request: Request, runtime: Runtime, caller: Caller) -> Built:
    filters = ItemFilters.from_request(request)
    readable, conditions = readable_scope(runtime, caller, filters.item_type)
    if filters.phase is not None:
        conditions.append(WorkItem.phase == filters.phase)
    if filters.project is not None:
        conditions.append(WorkItem.project_path == filters.project)
    with runtime.sessions() as session:
        if filters.queue is not None:
            queue = attention_repository.queue_by_name(session, filters.queue)
            if queue is None:
                raise HTTPException(status_code=404, detail=f"no queue {filters.queue}")
            conditions.append(attention_repository.current_members(queue.id))
        try:
            page = read_repository.list_items(
                session,
                item_types=readable,
                filters=conditions,
                limit=PAGE_SIZE,
                cursor=filters.cursor,
            )
        except InvalidCursorError as error:
            raise HTTPException(status_code=422, detail=str(error)) from None
        dimensions = read_repository.dimensions_of(session, [item.id for item in page.items])
        rows = [
            (listed_item_body(item, dimensions[item.id]), item.project_path) for item in page.items
        ]
    types = sorted(runtime.registry.item_types)
    visible_types = types if readable is None else [name for name in types if name in readable]
    queues = [queue.name for queue in list_attention_queues(runtime, caller).items]
    return "items.html", {
        "rows": rows,
        "filters": filters,
        "phases": [str(phase) for phase in Phase],
        "types": sorted(set(visible_types) | ({filters.item_type} - {None})),
        "queues": queues,
        "next_query": None if page.next_cursor is None else filters.query(cursor=page.next_cursor),
    }


def _item(runtime: Runtime, caller: Caller, item_id: uuid.UUID, notice: str | None = None) -> Built:
    body = get_work_item(item_id, runtime, caller)  # 404 / 403 as the API answers them
    history = item_history(
        item_id, runtime, caller, limit=audit_repository.MAX_HISTORY_PAGE, cursor=None
    )
    with runtime.sessions() as session:
        item = read_repository.get_item(session, item_id)
        project_path = None if item is None else item.project_path
        pending = ui_repository.pending_event_summaries(session, item_id)
        names = {queue.id: queue.name for queue in attention_repository.served_queues(session)}
        memberships = attention_repository.memberships_of_items(session, [item_id])
        queues = sorted(
            names[queue_id]
            for (queue_id, _), member in memberships.items()
            if member.current and queue_id in names
        )
    may_act = runtime.gatekeeper.allowed(caller, "retry", body.item_type, project_path)
    return "item.html", {
        "item": body,
        "project": project_path,
        "history": history.items,
        "history_truncated": history.next_cursor is not None,
        "pending_events": pending,
        "queues": queues,
        "may_retry": may_act and Phase(body.phase) in RETRYABLE_PHASES,
        "may_cancel": may_act and Phase(body.phase) in CANCELLABLE_PHASES,
        "notice": notice,
    }
