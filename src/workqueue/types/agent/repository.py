"""SQL of the `agent` type: one task per note, the hour's counts, a thread's history.
Flushes nothing it does not need; the caller commits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.types.agent.models import AgentState, AgentWorkItem

HOUR = timedelta(hours=1)


def task_of_note(session: Session, note_id: int) -> uuid.UUID | None:
    return session.scalar(sa.select(AgentWorkItem.id).where(AgentWorkItem.note_id == note_id))


@dataclass(frozen=True, slots=True)
class HourCounts:
    """Tasks (not refusals) started in the last hour, and whether a refusal was said."""

    by_author: int
    by_project: int
    author_told: bool
    project_told: bool


def hour_counts(session: Session, *, author_id: int, project_id: int, now: datetime) -> HourCounts:
    since = now - HOUR
    recent = sa.select(
        AgentWorkItem.author_id, AgentWorkItem.project_id, AgentWorkItem.state
    ).where(
        AgentWorkItem.created_at >= since,
        sa.or_(AgentWorkItem.author_id == author_id, AgentWorkItem.project_id == project_id),
    )
    rows = session.execute(recent).all()
    told = AgentState.RATE_LIMITED
    return HourCounts(
        by_author=sum(1 for row in rows if row.author_id == author_id and row.state != told),
        by_project=sum(1 for row in rows if row.project_id == project_id and row.state != told),
        author_told=any(row.author_id == author_id and row.state == told for row in rows),
        project_told=any(row.project_id == project_id and row.state == told for row in rows),
    )


@dataclass(frozen=True, slots=True)
class Turn:
    note_id: int
    author: str
    request: str
    reply: str


def history(session: Session, item: AgentWorkItem, *, limit: int) -> list[Turn]:
    """The earlier answered turns of the item's session, oldest first (at most `limit`)."""
    if limit <= 0:
        return []
    rows = session.execute(
        sa.select(
            AgentWorkItem.note_id, AgentWorkItem.author, AgentWorkItem.request, AgentWorkItem.reply
        )
        .where(
            AgentWorkItem.session_id == item.session_id,
            AgentWorkItem.id != item.id,
            AgentWorkItem.note_id < item.note_id,
            AgentWorkItem.reply.is_not(None),
        )
        .order_by(AgentWorkItem.note_id.desc())
        .limit(limit)
    ).all()
    return [Turn(row.note_id, row.author, row.request, row.reply) for row in reversed(rows)]
