"""Request dispatch, independent of sockets: parse, route, inject faults, authenticate,
run the handler under the state lock, log.

Order matters and follows GitLab: an unknown route is a Grape 404 before any
authentication; an injected fault stands for trouble in front of the application
(proxy, overload) and so fires before authentication too.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping
from typing import Any

from workqueue.testing.gitlab_simulator import (
    handlers_ci,
    handlers_discussions,
    handlers_issues,
    handlers_members,
    handlers_merge_requests,
    handlers_merge_trains,
    handlers_notes,
    handlers_repository,
    handlers_trunk,
    handlers_users,
)
from workqueue.testing.gitlab_simulator.errors import ApiError, unauthorized
from workqueue.testing.gitlab_simulator.faults import (
    FaultInjector,
    RequestLog,
    RequestRecord,
)
from workqueue.testing.gitlab_simulator.params import parse_form
from workqueue.testing.gitlab_simulator.routing import Request, Response, Route, Router
from workqueue.testing.gitlab_simulator.state import SimulatorState, User

API_PREFIX = "/api/v4"


def _grape_error(status: int) -> Response:
    text = "404 Not Found" if status == 404 else "405 Not Allowed"
    return Response(status=status, body={"error": text})


def _parse_body(headers: Mapping[str, str], raw: bytes) -> Any:
    if not raw:
        return None
    content_type = headers.get("content-type", "").lower()
    if "json" in content_type:
        return json.loads(raw)
    if "x-www-form-urlencoded" in content_type:
        return parse_form(raw.decode("utf-8", errors="replace"))
    return raw.decode("utf-8", errors="replace")


def _token(headers: Mapping[str, str]) -> str | None:
    token = headers.get("private-token")
    if token is None:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else None
    return token


class Application:
    def __init__(self, state: SimulatorState) -> None:
        self.state = state
        self.router = Router()
        for module in (
            handlers_repository,
            handlers_merge_requests,
            handlers_merge_trains,
            handlers_notes,
            handlers_discussions,
            handlers_issues,
            handlers_members,
            handlers_ci,
            handlers_trunk,
            handlers_users,
        ):
            module.register(self.router)
        self.faults = FaultInjector(set(self.router.templates))
        self.log = RequestLog()
        # Tracebacks of handler crashes (answered as 500); tests should expect none.
        self.errors: list[str] = []

    def authenticate(self, headers: Mapping[str, str]) -> User | None:
        token = _token(headers)
        if not token:
            return None
        with self.state.lock:
            return self.state.tokens.get(token)

    def caller(self, headers: Mapping[str, str]) -> str | None:
        token = _token(headers)
        if not token:
            return None
        with self.state.lock:
            return self.state.token_labels.get(token)

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], raw_body: bytes, base_url: str
    ) -> Response:
        """Answer one HTTP request; `headers` keys must be lower-case."""
        raw_path, _, query_string = target.partition("?")
        query = parse_form(query_string)
        path = raw_path[len(API_PREFIX) :] if raw_path.startswith(API_PREFIX + "/") else None
        record: dict[str, Any] = {
            "started_at": time.time(),
            "caller": self.caller(headers),
            "method": method,
            "path": path or raw_path,
            "query": query,
            "body": None,
        }
        try:
            record["body"] = body = _parse_body(headers, raw_body)
        except ValueError:
            return self._logged(Response(400, {"error": "Invalid JSON"}), record)
        resolved = self.router.resolve(method, path) if path is not None else None
        if path is None or resolved is None:
            status = 405 if path is not None and self.router.path_exists(path) else 404
            return self._logged(_grape_error(status), record)
        route, captured = resolved
        record["route"] = route.template
        request = Request(
            method=method,
            path=path,
            query_string=query_string,
            params={**query, **body} if isinstance(body, dict) else dict(query),
            body=body,
            headers=headers,
            base_url=base_url,
            path_params=captured,
        )
        ticket = self.log.begin(_record(record, status=0))
        try:
            return self._routed(route, request, record)
        finally:
            self.log.end(ticket)

    def _routed(self, route: Route, request: Request, record: dict[str, Any]) -> Response:
        """Faults first (they stand for trouble in front of GitLab), then the handler."""
        rule = self.faults.take(request.method, route.template)
        if rule is not None and rule.latency > 0:
            time.sleep(rule.latency)
        if rule is None or (rule.status is None and not rule.disconnect):
            response = self._run(route, request)
            if rule is not None and rule.latency_after > 0:
                time.sleep(rule.latency_after)  # applied, but the answer is late
            return self._logged(response, record)
        record["fault"] = True
        if rule.after_apply:
            self._run(route, request)
        return self._logged(rule.response(), record)

    def _run(self, route: Route, request: Request) -> Response:
        request.user = self.authenticate(request.headers)
        if request.user is None:
            error = unauthorized()
            return Response(status=error.status, body=error.body)
        try:
            with self.state.lock:
                return route.handler(self.state, request)
        except ApiError as error:
            return Response(status=error.status, body=error.body, headers=error.headers)
        except Exception:
            self.errors.append(traceback.format_exc())
            return Response(status=500, body={"message": "500 Internal Server Error"})

    def _logged(self, response: Response, record: dict[str, Any]) -> Response:
        self.log.append(_record(record, status=response.status))
        return response


def _record(record: dict[str, Any], *, status: int) -> RequestRecord:
    return RequestRecord(
        method=record["method"],
        path=record["path"],
        route=record.get("route"),
        query=record["query"],
        body=record["body"],
        status=status,
        fault=record.get("fault", False),
        started_at=record["started_at"],
        caller=record["caller"],
    )
