"""Who a request's caller is (`Caller`), and where it waits between middleware and routes.

`AuthenticateFirst` proves the caller before the body is read and stores it in
the ASGI scope's per-request `state`; the routes' `get_caller` dependency
takes it from there, so each request is authenticated exactly once.
"""

from __future__ import annotations

from typing import Protocol

from starlette.types import Scope

_CALLER_KEY = "workqueue.caller"


class Caller(Protocol):
    """Who is calling; `identity` becomes `caller_identity` on submitted items.

    `issuer_key` says where the identity comes from: two callers are the same
    only when both parts are equal.
    """

    @property
    def identity(self) -> str: ...

    @property
    def issuer_key(self) -> str: ...


def remember_caller(scope: Scope, caller: Caller) -> None:
    scope.setdefault("state", {})[_CALLER_KEY] = caller


def remembered_caller(scope: Scope) -> Caller | None:
    caller: Caller | None = scope.get("state", {}).get(_CALLER_KEY)
    return caller
