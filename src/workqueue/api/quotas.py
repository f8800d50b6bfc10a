"""What a submission route checks about its caller before any work: rate and project.

- The submission rate (`authorization.limits.submissions_per_minute_per_caller`)
  is counted in the database, in its own committed transaction, so every
  replica shares one count and refused or invalid attempts count too (an
  abusive caller cannot probe for free). Above it: 429 with `Retry-After`.
- A numeric project id is resolved to its path through the type's cached
  GitLab lookup, so `projects:` patterns, which are written over paths,
  decide about ids as well.
"""

from __future__ import annotations

from fastapi import HTTPException

from workqueue.api.deps import Caller, Runtime
from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.queue import ownership_repository
from workqueue.queue.audit import AuditEntry

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


def resolve_project_path(runtime: Runtime, item_type: str, project: str) -> str:
    """The path of `project`: itself when it is a path, else the type's GitLab lookup.

    A numeric id GitLab does not know (or will not show the service) is a
    422 on the field: there is nothing to authorize against.
    """
    if not (project.isascii() and project.isdigit()):
        return project
    resolver = runtime.registry.get(item_type).resolve_project_path
    if resolver is None:
        raise HTTPException(
            status_code=422,
            detail=[_project_error(f"{item_type} items need a project path, not an id")],
        )
    try:
        return resolver(project)
    except PermanentGitLabError as error:
        if error.status in {401, 403, 404}:
            raise HTTPException(
                status_code=422,
                detail=[_project_error(f"project {project} was not found on GitLab")],
            ) from None
        raise


def _project_error(message: str) -> dict[str, object]:
    return {"loc": ["body", "project"], "msg": message, "type": "value_error"}
