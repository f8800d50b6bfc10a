"""The `agent` type's detail table: one row per note that called the agent.

The row is also the conversation's memory: the earlier turns of a discussion
(its `session_id`) are the notes and replies of the session's earlier tasks,
read from here, never from GitLab again.
"""

from __future__ import annotations

import enum
import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue import WorkItem, enum_by_value

AGENT_ITEM_TYPE = "agent"


class AgentState(enum.StrEnum):
    QUEUED = "queued"  # the note is taken; no placeholder yet
    CALLING = "calling"  # the placeholder is posted; the agent is being asked
    REPLIED = "replied"  # the reply is in the thread (phase completed)
    FAILED = "failed"  # the agent gave no usable answer (phase failed)
    RATE_LIMITED = "rate_limited"  # over a limit: the thread is told once, no agent call


class AgentDimension(enum.StrEnum):
    NEEDS_PLACEHOLDER = "needs_placeholder"  # post (or find) the placeholder reply
    NEEDS_AGENT = "needs_agent"  # call the agent
    NEEDS_CHANGES = "needs_changes"  # turn the agent's changes into an mr item
    NEEDS_REPLY = "needs_reply"  # edit the placeholder into the reply


class AgentWorkItem(WorkItem):
    """One note asking the agent, and what came of it."""

    __tablename__ = "agent_details"
    __mapper_args__ = {"polymorphic_identity": AGENT_ITEM_TYPE}

    id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), primary_key=True
    )
    project: Mapped[str] = mapped_column(sa.Text, nullable=False)
    project_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    noteable_type: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    noteable_iid: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    # GitLab's note ids are unique per instance: one item per note, whatever redelivers it.
    note_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, unique=True)
    discussion_id: Mapped[str | None] = mapped_column(sa.Text)
    # The note on GitLab (a link for people): the hook's, kept only when it points at
    # the configured instance.
    note_url: Mapped[str | None] = mapped_column(sa.Text)
    author: Mapped[str] = mapped_column(sa.Text, nullable=False)
    author_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    # The author's access level on the project when the note was taken (GitLab's
    # members API): it bounds what the agent's changes may do.
    author_access: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    # The note without the trigger: what the agent is asked.
    request: Mapped[str] = mapped_column(sa.Text, nullable=False)
    internal: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    session_id: Mapped[uuid.UUID] = mapped_column(sa.Uuid, nullable=False)
    state: Mapped[AgentState] = mapped_column(
        enum_by_value(AgentState, "agent_state"),
        nullable=False,
        server_default=AgentState.QUEUED.value,
    )
    # The service's note in the thread: the placeholder, edited into the reply.
    reply_note_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    # The agent's answer as it came (before neutralising), and its changes.
    reply: Mapped[str | None] = mapped_column(sa.Text)
    changes: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Why the changes were not applied (the mr rules), said in the reply.
    changes_refused: Mapped[str | None] = mapped_column(sa.Text)
    # Why the task ends without the agent's reply (it failed, or a rate limit), as the
    # thread is told; kept apart from the engine's `error`, which a later step clears.
    reason: Mapped[str | None] = mapped_column(sa.Text)
    mr_item_id: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    agent_calls: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")

    __table_args__ = (
        sa.Index("ix_agent_details_session_id", "session_id"),
        # Rate limits count a person's and a project's tasks of the last hour.
        sa.Index("ix_agent_details_author_id", "author_id"),
        sa.Index("ix_agent_details_project_id", "project_id"),
    )
