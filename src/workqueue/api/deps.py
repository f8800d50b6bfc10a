"""Dependencies of the routes: the runtime, the caller, and permission checks.

Authentication happens only from the `Authorization` header, once per
request, in `api.authentication` before the body is read; `get_caller` hands
the routes its result. `X-Forwarded-*` headers are never trusted on `/api` paths.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, NoReturn, Protocol

from fastapi import Depends, HTTPException, Path, Query, Request
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from workqueue.api.caller_state import Caller, remembered_caller
from workqueue.auth.config import CallerLimits, Permission
from workqueue.auth.limit_keys import LimitKey
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.read_repository import VisibilityGrant
from workqueue.queue.registry import TypeRegistry

# PostgreSQL text cannot hold NUL: refuse it at the edge (422), not in the database
# (500); the other control characters (C0, DEL, C1) have no place in a name either.
NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f-\x9f]*$"
MAX_QUERY_TEXT_LENGTH = 1024
MAX_PATH_TEXT_LENGTH = 255
FilterText = Annotated[
    str | None, Query(pattern=NO_CONTROL_CHARACTERS, max_length=MAX_QUERY_TEXT_LENGTH)
]
# The one type of every name in a path (`{name}`; ids are `ItemIdPath`): 422 on
# ["path", <parameter>] for a control character or an overlong value.
PathText = Annotated[
    str, Path(min_length=1, max_length=MAX_PATH_TEXT_LENGTH, pattern=NO_CONTROL_CHARACTERS)
]
ItemIdPath = Annotated[uuid.UUID, Path(description="the work item's id")]


class CallerAuthenticationError(Exception):
    """No valid credentials (401). The message is safe to show: it never holds a token.

    `unverifiable`: the credentials could not be checked (their issuer is
    unreachable), which is no failure of the caller's.
    """

    def __init__(self, message: str, *, unverifiable: bool = False) -> None:
        super().__init__(message)
        self.unverifiable = unverifiable


class Gatekeeper(Protocol):
    """Authentication and authorization as the routes need them."""

    def authenticate(self, authorization: str | None, *, offline: bool = False) -> Caller:
        """Raise `CallerAuthenticationError` when the header does not prove an identity;
        `offline`: also when proving it would need a call to an issuer or OpenShift."""

    def allowed(
        self, caller: Caller, permission: Permission, item_type: str, project_path: str | None
    ) -> bool:
        """Whether a rule grants `permission` on items of this type in this project."""

    def may_use(self, caller: Caller, permission: Permission, item_type: str) -> bool:
        """Whether a rule grants `permission` on this type in at least one project."""

    def readable_types(self, caller: Caller) -> set[str] | None:
        """The item types the caller may read (empty: none); None: every type."""

    def visibility(self, caller: Caller, permission: Permission) -> Sequence[VisibilityGrant]:
        """The (type, project) reach of `permission`, as a list query filters on it."""

    @property
    def limits(self) -> CallerLimits:
        """`authorization.limits`: per-caller and per-project quotas."""

    def limit_key(self, caller: Caller) -> LimitKey:
        """What the limits count `caller` as; `LimitKeyError` (403) when its rules cannot say."""

    def close(self) -> None:
        """Release connections to identity providers."""


@dataclass
class Runtime:
    """What the lifespan builds and the routes use."""

    engine: Engine
    sessions: sessionmaker[Session]
    registry: TypeRegistry
    manager: ProcessingManager
    audit: AuditLog
    gatekeeper: Gatekeeper


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_caller(request: Request, runtime: RuntimeDep) -> Caller:
    """The caller `AuthenticateFirst` proved for this request.

    An app built without that middleware authenticates here instead (in a worker
    thread: the gatekeeper may call an OIDC issuer).
    """
    caller = remembered_caller(request.scope)
    if caller is not None:
        return caller
    try:
        return await run_in_threadpool(
            runtime.gatekeeper.authenticate, request.headers.get("authorization")
        )
    except CallerAuthenticationError as error:
        raise HTTPException(
            status_code=401, detail=str(error), headers={"WWW-Authenticate": "Bearer"}
        ) from None


CallerDep = Annotated[Caller, Depends(get_caller)]


def require(runtime: Runtime, caller: Caller, permission: Permission, item_type: str) -> None:
    """403 (and an audit entry) unless a rule grants `permission` on `item_type` somewhere.

    For endpoints that then narrow what they show in SQL (lists); anything
    about one item or one project uses `require_on_project`.
    """
    if not runtime.gatekeeper.may_use(caller, permission, item_type):
        _deny(runtime, caller, permission, item_type, "")


def require_on_project(
    runtime: Runtime,
    caller: Caller,
    permission: Permission,
    item_type: str,
    project_path: str | None,
    *,
    shown_as: str | None = None,
) -> None:
    """403 (and an audit entry) unless a rule grants `permission` on `item_type` items
    of this project (None: an item without a project, which only unscoped rules reach).

    `shown_as` names the project in the answer instead of its path: a caller
    that gave a numeric id must not learn the path of a project it may not use.
    """
    if not runtime.gatekeeper.allowed(caller, permission, item_type, project_path):
        shown = shown_as or project_path
        where = " without a project" if shown is None else f" in project {shown}"
        _deny(runtime, caller, permission, item_type, where)


def _deny(
    runtime: Runtime, caller: Caller, permission: Permission, item_type: str, where: str
) -> NoReturn:
    runtime.audit.write(
        AuditEntry(
            event_type="authorization_denied",
            item_type=item_type,
            actor=caller.identity,
            reason=f"no rule grants {permission} on {item_type}{where}",
        )
    )
    raise HTTPException(
        status_code=403,
        detail=f"{caller.identity} may not {permission} {item_type} items{where}",
    )
