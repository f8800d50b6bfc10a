"""Requests, responses, the router and pagination.

Routes are GitLab's documented templates (`/projects/:id/repository/branches/:branch`)
matched segment by segment on the RAW path: a project path or branch name sent as
`acme%2Fwidgets` stays one segment and is percent-decoded only after matching,
exactly what GitLab's router requires of clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

from workqueue.testing.gitlab_simulator.errors import param_error
from workqueue.testing.gitlab_simulator.state import SimulatorState, User

DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100


@dataclass
class Request:
    method: str
    path: str  # raw (still percent-encoded) path after /api/v4
    query_string: str
    params: dict[str, Any]  # query and body merged, body winning (Rails/Grape semantics)
    body: Any
    headers: Mapping[str, str]
    base_url: str  # scheme://host as the client addressed us, for Link headers
    path_params: dict[str, str] = field(default_factory=dict)
    user: User | None = None

    @property
    def current_user(self) -> User:
        if self.user is None:
            raise RuntimeError("handler reached without authentication")
        return self.user


@dataclass
class Response:
    status: int
    body: Any = None  # JSON-serialisable value, raw bytes, or None for an empty body
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    disconnect: bool = False  # drop the connection without answering (fault injection)


Handler = Callable[[SimulatorState, Request], Response]


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    handler: Handler

    @property
    def segments(self) -> list[str]:
        return self.template.strip("/").split("/")

    def match(self, raw_path: str) -> dict[str, str] | None:
        parts = raw_path.strip("/").split("/")
        pattern = self.segments
        if len(parts) != len(pattern):
            return None
        captured: dict[str, str] = {}
        for expected, actual in zip(pattern, parts, strict=True):
            if expected.startswith(":"):
                if not actual:
                    return None
                captured[expected[1:]] = unquote(actual)
            elif expected != actual:
                return None
        return captured


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        self.routes.append(Route(method, template, handler))

    def resolve(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.method == method and (captured := route.match(raw_path)) is not None:
                return route, captured
        return None

    def path_exists(self, raw_path: str) -> bool:
        return any(route.match(raw_path) is not None for route in self.routes)

    @property
    def templates(self) -> list[str]:
        return [f"{route.method} {route.template}" for route in self.routes]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(status=status, body=body, headers=headers or {})


def _page_params(params: Mapping[str, Any]) -> tuple[int, int]:
    try:
        page = int(params.get("page") or 1)
        per_page = int(params.get("per_page") or DEFAULT_PER_PAGE)
    except (TypeError, ValueError):
        raise param_error("page is invalid") from None
    page = max(page, 1)
    per_page = DEFAULT_PER_PAGE if per_page < 1 else min(per_page, MAX_PER_PAGE)
    return page, per_page


def paginate(request: Request, items: Sequence[Any], *, include_totals: bool = True) -> Response:
    """One page of `items` with GitLab's offset-pagination headers and `Link`.

    `include_totals=False` mimics endpoints (like the commit list) that omit
    `X-Total` and `X-Total-Pages`.
    """
    page, per_page = _page_params(request.params)
    total = len(items)
    total_pages = max(1, -(-total // per_page))
    chunk = list(items[(page - 1) * per_page : page * per_page])
    next_page = page + 1 if page < total_pages else None
    prev_page = page - 1 if page > 1 else None
    headers = {
        "X-Page": str(page),
        "X-Per-Page": str(per_page),
        "X-Next-Page": str(next_page or ""),
        "X-Prev-Page": str(prev_page or ""),
    }
    if include_totals:
        headers["X-Total"] = str(total)
        headers["X-Total-Pages"] = str(total_pages)
    base_query = [
        (key, value)
        for key, value in parse_qsl(request.query_string, keep_blank_values=True)
        if key not in {"page", "per_page"}
    ]

    def link(target: int, rel: str) -> str:
        query = urlencode([*base_query, ("page", str(target)), ("per_page", str(per_page))])
        return f'<{request.base_url}/api/v4{request.path}?{query}>; rel="{rel}"'

    links = []
    if prev_page is not None:
        links.append(link(prev_page, "prev"))
    if next_page is not None:
        links.append(link(next_page, "next"))
    links.append(link(1, "first"))
    if include_totals:
        links.append(link(total_pages, "last"))
    headers["Link"] = ", ".join(links)
    return Response(status=200, body=chunk, headers=headers)
