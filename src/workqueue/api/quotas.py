"""What a submission route checks about its caller before any work: rate and project.

- The submission rate (`authorization.limits.submissions_per_minute_per_caller`)
  is counted in the database, in its own committed transaction, so every
  replica shares one count and refused or invalid attempts count too (an
  abusive caller cannot probe for free). Above it: 429 with `Retry-After`.
- Every submitted project (a numeric id, or a path in any letter case) is
  resolved to GitLab's canonical path through the type's cached lookup, so
  `projects:` patterns and live keys see one name per project.
- Retries count against the same rate, and reviving a cancelled item
  against its owner's live-item limit.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException
from sqlalchemy.orm import Session

from workqueue.api.deps import Caller, Permission, Runtime, require, require_on_project
from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.queue import ownership_repository
from workqueue.queue.audit import AuditEntry
from workqueue.queue.models import WorkItem

# A live-item limit frees up when items finish, which takes minutes; a short
# hint would only invite a tight retry loop.
LIVE_LIMIT_RETRY_AFTER = "60"


def enforce_submission_rate(runtime: Runtime, caller: Caller) -> None:
    """Count this submission; 429 when the caller is over its per-minute limit."""
    limit = runtime.gatekeeper.limits.submissions_per_minute_per_caller
    window = run_in_transaction(
        runtime.sessions,
        lambda session: ownership_repository.count_submission(
            session, caller.issuer_key, caller.identity
        ),
    )
    if window.submissions <= limit:
        return
    runtime.audit.write(
        AuditEntry(
            event_type="submission_rate_limited",
            actor=caller.identity,
            reason=f"{window.submissions} submissions this minute (limit {limit})",
        )
    )
    raise HTTPException(
        status_code=429,
        detail=f"{caller.identity} made more than {limit} submissions this minute; "
        f"retry in {window.seconds_left()} s",
        headers={"Retry-After": str(window.seconds_left())},
    )


def authorize_submission(
    runtime: Runtime,
    caller: Caller,
    item_type: str,
    project: str,
    *,
    validate: Callable[[], None] | None = None,
) -> str:
    """Every check a submission passes before its transaction, in order; returns the
    project's canonical path.

    `submit` on the type (403), the caller's rate (429), `validate` (the type's
    pure content rules, so an invalid body costs no GitLab call), the project's
    canonical path (one cached lookup) and `submit` on that project (403).
    """
    require(runtime, caller, "submit", item_type)
    enforce_submission_rate(runtime, caller)
    if validate is not None:
        validate()
    project_path = resolve_project_path(runtime, item_type, project, caller=caller)
    require_on_project(runtime, caller, "submit", item_type, project_path, shown_as=project)
    return project_path


def enforce_live_item_limit(runtime: Runtime, session: Session, item: WorkItem) -> None:
    """429 when reviving `item` would take its owner over `max_live_items_per_caller`.

    Serialised per owner like item creation (`ownership_repository.lock_caller`).
    Items from before owners were recorded have no issuer and no quota.
    """
    if item.caller_issuer is None:
        return
    limit = runtime.gatekeeper.limits.max_live_items_per_caller
    ownership_repository.lock_caller(session, item.caller_issuer, item.caller_identity)
    held = ownership_repository.live_item_count(session, item.caller_issuer, item.caller_identity)
    if held >= limit:
        raise HTTPException(
            status_code=429,
            detail=f"its owner {item.caller_identity} already holds {held} live items "
            f"(limit {limit}); let some finish or cancel them first",
            headers={"Retry-After": LIVE_LIMIT_RETRY_AFTER},
        )


def resolve_project_path(
    runtime: Runtime,
    item_type: str,
    project: str,
    *,
    caller: Caller | None = None,
    permission: Permission = "submit",
) -> str:
    """The canonical path of `project` (a path in any letter case, or a numeric id),
    looked up through the type's cached GitLab client.

    Scopes match this path and live keys are built from it, so `42`, `team/app`
    and `Team/App` are one project for authorization and for ownership alike.
    A project GitLab does not know (or will not show the service) answers 422 on
    the field, but only to a `caller` whose rules would allow that name: to
    anyone else it is the same 403 as an existing project out of their scope,
    so the answer reveals nothing about which projects exist.
    """
    resolver = runtime.registry.get(item_type).resolve_project_path
    if resolver is None:
        return project
    try:
        return resolver(project)
    except PermanentGitLabError as error:
        if error.status not in {401, 403, 404}:
            raise
    if caller is not None and not runtime.gatekeeper.allowed(
        caller, permission, item_type, project
    ):
        require_on_project(runtime, caller, permission, item_type, project)
    raise HTTPException(
        status_code=422,
        detail=[_project_error(f"project {project} was not found on GitLab")],
    )


def _project_error(message: str) -> dict[str, object]:
    return {"loc": ["body", "project"], "msg": message, "type": "value_error"}
