"""An agent's `changes` become an `mr` item, through the `mr` type's own rules.

The agent never writes to GitLab: what it wants on a branch is submitted as
any caller's submission would be, with the `mr` type's `submit_mr` (its
prefix, path blocklist, content and text rules, limits), for the note's
project only, as caller `agent:<note author>`.

* On an MR the service opened, the changes update that MR's item (its own
  branch, its own caller): a Developer could push to that branch anyway.
* Elsewhere, one new branch per discussion (`<prefix>agent-<session>`), so a
  follow-up in the thread updates the same MR.
* The author's access bounds what the changes may do: below Developer (who
  may push) there are no changes at all, whatever `min_access_level` lets
  talk to the agent; the item merges when green only if the author may merge
  into its target branch as GitLab protects it (`merge_level`: Developer for
  an unprotected branch or one that lets Developers merge, else Maintainer);
  otherwise the MR waits for a person. An update keeps the item's own
  `auto_merge` only under the same rule.
* Changes asked for in an internal note, or on a confidential issue, are
  refused: the MR would publish what the thread keeps private.

A refusal (the `mr` rules, another caller's live branch, no `mr` type on
this replica) is a `ChangesRefused` whose message the reply quotes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from pydantic import ValidationError
from sqlalchemy.orm import Session

from workqueue.queue import Phase, Submitter, TypeRegistry
from workqueue.types.agent.config import DEVELOPER
from workqueue.types.agent.models import AgentWorkItem
from workqueue.types.mr import repository as mr_repository
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import (
    OwnershipConflictError,
    SubmissionRejectedError,
    SubmitResult,
    submit_mr,
)

AGENT_ISSUER = "agent"


class ChangesRefused(Exception):  # noqa: N818 - a verdict, said in the thread
    """The agent's changes were not submitted; the message says why."""


MergeLevel = Callable[[str | None], int]
"""The access a person needs to merge into a target branch (None: the default branch)."""


def submit_changes(
    session: Session, registry: TypeRegistry, item: AgentWorkItem, merge_level: MergeLevel
) -> SubmitResult:
    if MR_ITEM_TYPE not in registry.item_types:
        raise ChangesRefused("this service does not handle mr items")
    if item.author_access < DEVELOPER:
        # Whoever may talk to the agent may not push: changes need push rights.
        raise ChangesRefused(f"changes need Developer access; {item.author} has less")
    if item.internal:
        # An MR is as public as the project: it would publish the private thread.
        raise ChangesRefused("changes asked for in an internal or confidential thread")
    registration = registry.get(MR_ITEM_TYPE)
    config = cast("MRTypeConfig", registration.config)
    changes = item.changes or {}
    own = _own_mr_item(session, item)
    if own is not None:
        submitter = Submitter(own.caller_issuer or "", own.caller_identity)
        branch, target = own.source_branch, own.target_branch
        auto_merge = own.auto_merge and item.author_access >= merge_level(target)
    else:
        submitter = Submitter(AGENT_ISSUER, f"agent:{item.author}")
        branch = f"{config.source_branch_prefix}agent-{str(item.session_id)[:8]}"
        target, auto_merge = None, item.author_access >= merge_level(None)
    where = (
        f"!{item.noteable_iid}"
        if item.noteable_type == "merge_request"
        else f"#{item.noteable_iid}"
    )
    try:
        submission = MRWorkItemCreate(
            project=item.project,
            source_branch=branch,
            target_branch=target,
            title=changes.get("title", ""),
            description=changes.get("description")
            or f"Requested by {item.author} in {where} (note {item.note_id}).",
            commit_message=changes.get("commit_message", ""),
            auto_merge=auto_merge,
            file_actions=changes.get("file_actions", []),
        )
    except ValidationError as error:
        problem = error.errors()[0]
        raise ChangesRefused(
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
        ) from None
    # The rules that need the project's own settings (its CI configuration file), as a
    # submission through the API meets them.
    check = registration.project_submission_check
    if check is not None and (errors := check(item.project, submission)):
        first = errors[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise ChangesRefused(f"{where}: {first.get('msg', 'refused')}")
    try:
        return submit_mr(
            session, submission, submitter=submitter, config=config, project_path=item.project
        )
    except SubmissionRejectedError as rejection:
        raise ChangesRefused(str(rejection)[:500]) from None
    except OwnershipConflictError as conflict:
        raise ChangesRefused(str(conflict)) from None


def _own_mr_item(session: Session, item: AgentWorkItem) -> MRWorkItem | None:
    """The live `mr` item of the MR the note is on, if the service opened that MR."""
    if item.noteable_type != "merge_request":
        return None
    found = mr_repository.live_item_of_mr(session, item.project, item.noteable_iid)
    if found is None or found.phase not in (Phase.ACTIVE, Phase.FAILED):
        return None
    return found
