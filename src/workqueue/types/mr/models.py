"""The `mr_details` table: an MR item's submitted content and what GitLab made of it (DDR-7)."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, Unmapped, mapped_column, unmapped_column

from workqueue.queue import WorkItem

MR_ITEM_TYPE = "mr"


class MRDimension(enum.StrEnum):
    """The `needs_*` dimensions of an MR item, in the decider's priority order."""

    NEEDS_MR = "needs_mr"  # the branch and MR must be brought to the submitted content
    NEEDS_RECONCILE = "needs_reconcile"  # look at the MR: merged/closed? mergeable now?
    NEEDS_CI_RETRY = "needs_ci_retry"  # variant = job name: a failed job may be retried
    NEEDS_EMPTY_CHECK = "needs_empty_check"  # periodic: has the MR's diff become empty?
    NEEDS_DRIFT_CHECK = "needs_drift_check"  # no GitLab news for a while: re-read the MR
    # Merged, with `checks.after_merge`: look at the checks of the merge commit. Only
    # exists as a row, written at the merge; from then on it is the item's only concern.
    NEEDS_POST_MERGE = "needs_post_merge"


class CompletionReason(enum.StrEnum):
    """Why an MR item ended `completed`."""

    MERGED = "merged"  # GitLab merged the MR
    EMPTY_DIFF = "empty_diff"  # the target already had the content; no MR left open


class MRWorkItem(WorkItem):
    __tablename__ = "mr_details"
    __mapper_args__ = {"polymorphic_identity": MR_ITEM_TYPE}

    id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), primary_key=True
    )
    # The submission, as given (the upsert identity is project + source_branch).
    project: Mapped[str] = mapped_column(sa.Text, nullable=False)
    source_branch: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # None until ensure_mr resolves the project's default branch.
    target_branch: Mapped[str | None] = mapped_column(sa.Text)
    package: Mapped[str | None] = mapped_column(sa.Text)
    change_kind: Mapped[str | None] = mapped_column(sa.Text)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    description: Mapped[str | None] = mapped_column(sa.Text)
    labels: Mapped[list[str]] = mapped_column(JSONB, nullable=False, server_default="[]")
    auto_merge: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.true())
    commit_message: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # Structured, inspectable actions (DDR-9); also the record of what was asked.
    file_actions: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, nullable=False)
    content_hash: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # What GitLab made of it.
    # The project's numeric id (hooks of some GitLab versions name only it); None
    # until the item's first drift check reads it (migration 0018).
    project_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    mr_iid: Mapped[int | None] = mapped_column(sa.Integer)
    mr_url: Mapped[str | None] = mapped_column(sa.Text)
    mr_sha: Mapped[str | None] = mapped_column(sa.Text)  # head after our last push
    head_pipeline_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    head_pipeline_sha: Mapped[str | None] = mapped_column(sa.Text)
    head_pipeline_status: Mapped[str | None] = mapped_column(sa.Text)
    detailed_merge_status: Mapped[str | None] = mapped_column(sa.Text)
    completion_reason: Mapped[str | None] = mapped_column(sa.Text)
    # Set when someone else pushed to the bot branch: the service stops
    # force-pushing over that work until the caller resubmits.
    foreign_head_sha: Mapped[str | None] = mapped_column(sa.Text)
    # Retries of failed CI jobs over the item's whole life, by job name.
    ci_retry_counts: Mapped[dict[str, int]] = mapped_column(
        JSONB, nullable=False, server_default="{}"
    )
    # Why reconcile_mr does not merge now: {"code", "message", "since"}; None
    # when nothing blocks, before the MR exists, and once it is merged.
    merge_blocker: Mapped[dict[str, str] | None] = mapped_column(JSONB)
    # What reconcile_mr tried for the current head: refusals and when to retry,
    # a rebase asked for, merge-train cars (`merge_attempts.MergeAttempts`;
    # migration 0019). None until the first attempt.
    merge_attempts: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Digests of the title, draft flag, description and labels the service last
    # set on the MR (`types.mr.mr_metadata.SetMetadata`): an update changes only
    # what GitLab still shows as the service set it. None before the MR exists,
    # and for MRs opened before migration 0017.
    mr_metadata_set: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The commit the merge put on the target (migration 0020): checks after the
    # merge report on it. None until merged.
    merge_commit_sha: Mapped[str | None] = mapped_column(sa.Text)
    # With `checks.after_merge`: the checks a merged item waits for
    # (`types.mr.post_merge`): {"merge_commit_sha", "waiting_since", "checks": [...]}.
    # None before the merge and without such checks.
    post_merge: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # With `checks.before_merge`: the MR head's checks as last read (migration
    # 0021), [{"name", "variant", "status", "url", "updated_at"}], awaited ones
    # `pending`. None without such checks.
    checks: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # `work_items.created_at`, copied by a trigger on insert (migration 0014),
    # so project and package lists walk one index newest first. Unmapped: a
    # list key, not a detail of the item.
    item_created_at: Unmapped[datetime] = unmapped_column(
        sa.DateTime(timezone=True), nullable=False
    )

    __table_args__ = (
        # Upsert lookups and list filters go by the natural identity.
        sa.Index("ix_mr_details_project_source_branch", "project", "source_branch"),
        # The source-branch list filter alone (migration 0011).
        sa.Index("ix_mr_details_source_branch", "source_branch"),
        # Project and package lists, newest first (migration 0014).
        sa.Index("ix_mr_details_project_item_created_at_id", "project", "item_created_at", "id"),
        sa.Index("ix_mr_details_package_item_created_at_id", "package", "item_created_at", "id"),
        # Webhook resolution by MR and by pipeline.
        sa.Index("ix_mr_details_project_mr_iid", "project", "mr_iid"),
        sa.Index(
            "ix_mr_details_head_pipeline_id",
            "head_pipeline_id",
            postgresql_where=sa.text("head_pipeline_id IS NOT NULL"),
        ),
        # ... and by project id, for hooks that carry no path (migration 0018).
        sa.Index(
            "ix_mr_details_project_id",
            "project_id",
            postgresql_where=sa.text("project_id IS NOT NULL"),
        ),
        # ... and signals about a merge commit (migration 0020).
        sa.Index(
            "ix_mr_details_merge_commit_sha",
            "merge_commit_sha",
            postgresql_where=sa.text("merge_commit_sha IS NOT NULL"),
        ),
    )
