"""Where a request's authenticated caller is kept between the middleware and the routes.

`AuthenticateFirst` proves the caller before the body is read and stores it in
the ASGI scope's per-request `state`; the routes' `get_caller` dependency
takes it from there, so each request is authenticated exactly once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import Scope

if TYPE_CHECKING:
    from workqueue.api.deps import Caller

_CALLER_KEY = "workqueue.caller"


def remember_caller(scope: Scope, caller: Caller) -> None:
    scope.setdefault("state", {})[_CALLER_KEY] = caller


def remembered_caller(scope: Scope) -> Caller | None:
    caller: Caller | None = scope.get("state", {}).get(_CALLER_KEY)
    return caller
