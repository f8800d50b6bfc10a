"""What a submission route checks about its caller before any work: rates, project, limits.

- A caller is counted as its limit key (`auth.limit_keys`): its identity, or
  the claim its rule names in `limit_key` (403 when the token lacks it).
- The submission rates (`submissions_per_minute_per_caller` and
  `_per_project`) are counted in the database, each in its own committed
  transaction, so every replica shares one count. The caller's counts
  refused and invalid attempts too (an abusive caller cannot probe for
  free); the project's counts only callers allowed on the project, so a
  caller refused there cannot spend another project's rate. Above either:
  429 with `Retry-After`, the detail naming the limit.
- Every submitted project (a numeric id, or a path in any letter case) is
  resolved to GitLab's canonical path through the type's cached lookup, so
  `projects:` patterns, live keys and the per-project limits see one name
  per project.
- Retries count against the same rates, and reviving a cancelled item
  against its owner's and its project's live-item limits.
- What callers and projects may hold (live items, stored bytes) is checked
  by `queue.holding_limits` in the submission's own transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from fastapi import HTTPException
from sqlalchemy.orm import Session

from workqueue.api.caller_state import Caller
from workqueue.api.deps import Runtime, require, require_on_project
from workqueue.auth.config import Permission
from workqueue.auth.limit_keys import LimitKeyError
from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.queue import holding_limits, ownership_repository, read_repository
from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.holding_limits import HoldingLimitError, HoldingLimits, Owner
from workqueue.queue.models import WorkItem
from workqueue.queue.ownership_repository import RateWindow

# A live-item or stored-bytes limit frees up when items finish (or their
# contents are dropped), which takes minutes; a short hint would only invite
# a tight retry loop.
LIVE_LIMIT_RETRY_AFTER = "60"


def owner_of(runtime: Runtime, caller: Caller) -> Owner:
    """What the limits count `caller` as; 403 (audited) when its rules cannot say."""
    try:
        key = runtime.gatekeeper.limit_key(caller)
    except LimitKeyError as error:
        runtime.audit.write(
            AuditEntry(event_type="authorization_denied", actor=caller.identity, reason=str(error))
        )
        raise HTTPException(status_code=403, detail=str(error)) from None
    return Owner(issuer=caller.issuer_key, limit_key=key.key, shown_as=key.shown_as)


def holding_limits_of(runtime: Runtime) -> HoldingLimits:
    limits = runtime.gatekeeper.limits
    return HoldingLimits(
        max_live_items_per_caller=limits.max_live_items_per_caller,
        max_live_items_per_project=limits.max_live_items_per_project,
        max_stored_bytes_per_caller=limits.max_stored_bytes_per_caller,
    )


def holding_limit_refusal(error: HoldingLimitError) -> HTTPException:
    """The 429 of a live-item or stored-bytes limit."""
    return HTTPException(
        status_code=429, detail=str(error), headers={"Retry-After": LIVE_LIMIT_RETRY_AFTER}
    )


def enforce_submission_rate(runtime: Runtime, caller: Caller) -> None:
    """Count this submission; 429 when the caller is over its per-minute limit."""
    owner = owner_of(runtime, caller)
    limit = runtime.gatekeeper.limits.submissions_per_minute_per_caller
    window = run_in_transaction(
        runtime.sessions,
        lambda session: ownership_repository.count_submission(
            session, owner.issuer, owner.limit_key
        ),
    )
    _refuse_over_rate(
        runtime, caller, window, "submissions_per_minute_per_caller", limit, owner.shown_as
    )


def enforce_project_rate(runtime: Runtime, caller: Caller, project_path: str) -> None:
    """Count this submission to `project_path`; 429 when the project is over its
    per-minute limit. Call it only once the caller is allowed on the project."""
    limit = runtime.gatekeeper.limits.submissions_per_minute_per_project
    window = run_in_transaction(
        runtime.sessions,
        lambda session: ownership_repository.count_project_submission(session, project_path),
    )
    _refuse_over_rate(
        runtime, caller, window, "submissions_per_minute_per_project", limit, project_path
    )


def _refuse_over_rate(
    runtime: Runtime, caller: Caller, window: RateWindow, limit_name: str, limit: int, whom: str
) -> None:
    if window.submissions <= limit:
        return
    runtime.audit.write(
        AuditEntry(
            event_type="submission_rate_limited",
            actor=caller.identity,
            reason=f"{window.submissions} submissions this minute for {whom} "
            f"({limit_name} {limit})",
        )
    )
    raise HTTPException(
        status_code=429,
        detail=f"{limit_name} ({limit}) reached for {whom}: {window.submissions - 1} "
        f"submissions this minute; retry in {window.seconds_left()} s",
        headers={"Retry-After": str(window.seconds_left())},
    )


def admit_submission(runtime: Runtime, caller: Caller, item_type: str) -> None:
    """What every submission passes first, a replayed one (`api.submissions`) too:
    `submit` on the type (403), the caller's limit key (403) and rate (429)."""
    require(runtime, caller, "submit", item_type)
    enforce_submission_rate(runtime, caller)


def authorize_submission(
    runtime: Runtime,
    caller: Caller,
    item_type: str,
    project: str,
    *,
    validate: Callable[[], None] | None = None,
) -> str:
    """Every check a new submission passes after `admit_submission`, before its
    transaction, in order; returns the project's canonical path.

    `validate` (the type's pure content rules, so an invalid body costs no
    GitLab call), the project's canonical path (one cached lookup), `submit`
    on that project (403) and the project's rate (429).
    """
    if validate is not None:
        validate()
    project_path = resolve_project_path(runtime, item_type, project, caller=caller)
    require_on_project(runtime, caller, "submit", item_type, project_path, shown_as=project)
    enforce_project_rate(runtime, caller, project_path)
    return project_path


def enforce_retry_project_rate(runtime: Runtime, caller: Caller, item_id: uuid.UUID) -> None:
    """Count a retry of `item_id` against its project's rate, when the caller may retry
    it (otherwise the retry itself answers 404 or 403 and spends nothing)."""
    with runtime.sessions() as session:
        item = read_repository.get_item(session, item_id)
        item_type, project_path = (
            (None, None) if item is None else (item.item_type, item.project_path)
        )
    if item_type is None or project_path is None:
        return
    if runtime.gatekeeper.allowed(caller, "retry", item_type, project_path):
        enforce_project_rate(runtime, caller, project_path)


def enforce_live_item_limit(runtime: Runtime, session: Session, item: WorkItem) -> None:
    """429 when reviving `item` would take its owner over `max_live_items_per_caller` or
    its project over `max_live_items_per_project` (its contents are counted already).

    Serialised like item creation (`queue.holding_limits`). Items from before
    owners were recorded have no issuer and no quota.
    """
    if item.caller_issuer is None:
        return
    owner = (
        holding_limits.identity_owner(item.caller_issuer, item.caller_identity)
        if item.limit_key is None
        else holding_limits.owner_of_key(item.caller_issuer, item.limit_key)
    )
    try:
        holding_limits.check_new_live_item(
            session,
            owner,
            item.project_path,
            holding_limits_of(runtime),
            content_bytes=0,
            other_than=item.id,
        )
    except HoldingLimitError as error:
        raise holding_limit_refusal(error) from None


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
