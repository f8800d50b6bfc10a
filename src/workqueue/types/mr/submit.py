"""Submitting an MR item: validate, then create or update by branch (DDR-39/40).

Callers submit the state they want; the service works out whether that is a
new item, nothing new, new content for a live item, or a retry of a failed one.
The function flushes; the boundary (HTTP request, CLI command) commits, and
reruns it when PostgreSQL reports a lost race (`db.transactions.run_in_transaction`
does): a concurrent insert hitting the live-item unique index (DDR-39), or a
deadlock with a worker writing the same item.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sqlalchemy.orm import Session

from workqueue.queue import (
    DimensionStatus,
    DimensionUpdate,
    HoldingLimits,
    Phase,
    Submitter,
    check_content_growth,
    check_new_live_item,
    enqueue,
)
from workqueue.types.mr import repository
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.models import MR_ITEM_TYPE, MRDimension, MRWorkItem
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.policy import check_submission, content_hash
from workqueue.types.mr.validation.stored_bytes import stored_bytes
from workqueue.types.mr.validation.violations import Violation


class SubmitOutcome(enum.StrEnum):
    """What a submission did (the `outcome` field of the response)."""

    CREATED = "created"  # a new item (first, or a new generation after a terminal one)
    UNCHANGED = "unchanged"  # the live item already has exactly this content
    UPDATED = "updated"  # the live item takes the new content; the MR will follow
    RETRIED = "retried"  # a failed item is reactivated with the submitted content


@dataclass(frozen=True)
class SubmitResult:
    item: MRWorkItem
    outcome: SubmitOutcome

    @property
    def created(self) -> bool:
        return self.outcome is SubmitOutcome.CREATED


class OwnershipConflictError(Exception):
    """Another caller's live item holds this branch (HTTP 409); nothing was written."""


class SubmissionRejectedError(Exception):
    """The submission breaks the validation policy; nothing was written."""

    def __init__(self, violations: list[Violation]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, v.loc))}: {v.message}" for v in violations))
        self.violations = violations


def submit_mr(
    session: Session,
    submission: MRWorkItemCreate,
    *,
    submitter: Submitter,
    config: MRTypeConfig,
    project_path: str | None = None,
    limits: HoldingLimits | None = None,
) -> SubmitResult:
    """Create or update the live item of `(project, source_branch)` for `submitter`.

    `project_path` is the project's canonical path as GitLab reported it
    (what authorization matched, and the live key: every spelling of one
    project names one live item); it defaults to `project`. A live item created by another
    caller is never touched (`OwnershipConflictError`); a new item, or new content,
    beyond `limits` is refused (`HoldingLimitError`).
    """
    violations = check_submission(
        submission, config, project_path=project_path or submission.project
    )
    if violations:
        raise SubmissionRejectedError(violations)
    digest = content_hash(submission)
    project, branch = submission.project, submission.source_branch

    canonical_path = project_path or project
    key = repository.live_key(canonical_path, branch)
    repository.lock_identity(session, key)
    existing = repository.find_live_item(session, project, branch, key)
    if existing is not None and existing.phase == Phase.FAILED:
        # A failed item is finished for retention: the safety sweep may be
        # dropping its contents right now. Locked, this submission sees the
        # drop or keeps the sweep off the row until it commits new contents.
        session.refresh(existing, with_for_update=True)
        if existing.phase not in (Phase.ACTIVE, Phase.FAILED):
            existing = None  # cancelled meanwhile: a new generation follows
    # Every text the item will hold counts, whatever its file actions (`stored_bytes`).
    new_bytes = stored_bytes(submission)
    owner = submitter.counted_as
    if existing is None:
        if limits is not None:
            check_new_live_item(session, owner, canonical_path, limits, content_bytes=new_bytes)
        item = _create(session, submission, digest, submitter, canonical_path)
        return SubmitResult(item, SubmitOutcome.CREATED)
    if (existing.caller_issuer, existing.caller_identity) != (submitter.issuer, submitter.identity):
        # No item id in the message: the caller may not be allowed to read it.
        raise OwnershipConflictError(
            f"the live item for {project} branch {branch} belongs to another caller; only "
            "its creator may update it (it can be cancelled by someone with the retry "
            "permission on the project)"
        )
    # The same content is nothing new, unless the target moved so that it no longer
    # applies: then it is built anew on the target (`_needs_new_commit`).
    unchanged = existing.phase == Phase.ACTIVE and existing.content_hash == digest
    if unchanged and not _needs_new_commit(existing):
        return SubmitResult(existing, SubmitOutcome.UNCHANGED)

    outcome = SubmitOutcome.RETRIED if existing.phase == Phase.FAILED else SubmitOutcome.UPDATED
    if limits is not None:
        same_key = existing.limit_key == owner.limit_key
        check_content_growth(
            session,
            owner,
            limits,
            item_id=existing.id,
            old_bytes=existing.content_bytes if same_key else 0,
            new_bytes=new_bytes,
        )
    existing.limit_key = owner.limit_key
    _apply_content(existing, submission, digest)
    # `foreign_head_sha` is deliberately kept: new content does not entitle
    # the service to overwrite a human's commits. ensure_mr clears it only
    # when the branch head is the service's own again, or the branch is gone.
    session.flush()
    enqueue.upsert_dimension(
        session, existing.id, DimensionUpdate(MRDimension.NEEDS_MR, DimensionStatus.TRUE)
    )
    enqueue.mark_actionable(
        session, existing.id, MR_ITEM_TYPE, reactivate=outcome is SubmitOutcome.RETRIED
    )
    session.refresh(existing)
    return SubmitResult(existing, outcome)


# merge_blocker codes that only a new commit on the current target clears: the
# caller's resubmission is how that commit is asked for (GitLab could not rebase).
_RESUBMIT_CLEARS = frozenset({"conflict", "need_rebase"})


def _needs_new_commit(item: MRWorkItem) -> bool:
    blocker = item.merge_blocker or {}
    return item.mr_sha is not None and blocker.get("code") in _RESUBMIT_CLEARS


def _create(
    session: Session,
    submission: MRWorkItemCreate,
    digest: str,
    submitter: Submitter,
    project_path: str,
) -> MRWorkItem:
    project, branch = submission.project, submission.source_branch
    generation = repository.next_generation(session, project, branch)
    item = MRWorkItem(
        item_type=MR_ITEM_TYPE,
        phase=Phase.ACTIVE,
        actionable=True,
        caller_identity=submitter.identity,
        caller_issuer=submitter.issuer,
        limit_key=submitter.counted_as.limit_key,
        project_path=project_path,
        live_key=repository.live_key(project_path, branch),
        generation=generation,
        idempotency_key=repository.idempotency_key(project, branch, generation),
        project=submission.project,
        source_branch=submission.source_branch,
    )
    _apply_content(item, submission, digest)
    session.add(item)
    session.flush()
    enqueue.notify_wake(session, MR_ITEM_TYPE, item.id)
    session.refresh(item)
    return item


def _apply_content(item: MRWorkItem, submission: MRWorkItemCreate, digest: str) -> None:
    item.target_branch = submission.target_branch
    item.title = submission.title
    item.description = submission.description
    item.commit_message = submission.commit_message
    item.package = submission.package
    item.change_kind = submission.change_kind
    item.labels = list(submission.labels)
    item.auto_merge = submission.auto_merge
    item.file_actions = [action.model_dump(mode="json") for action in submission.file_actions]
    item.content_hash = digest
    item.content_bytes = stored_bytes(submission)
    item.contents_dropped_at = None
