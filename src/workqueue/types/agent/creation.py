"""Note Hooks → `agent` tasks: the creator the intake resolver runs for `note` events.

A note that asks (`routing.trigger_note`) becomes a task when its author has
at least `min_access_level` on the project, as GitLab's members API says now
(cached 5 minutes per project and person): a Guest's note creates nothing, and
neither does the same note delivered again (one task per note id, held by a
unique index whatever two replicas do at once).

Over a rate limit (tasks a person, or a project, started in the last hour)
the first refused note of the hour gets a task that only answers in the
thread, once, and never calls the agent; later ones create nothing.

When GitLab cannot be asked (who the service is, the author's access), the
hook is kept for a later intake round, a few times, never blocking the intake.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import GitLabError
from workqueue.queue import (
    Creator,
    DimensionStatus,
    DimensionUpdate,
    Phase,
    enqueue,
    store_for_later,
)
from workqueue.types.agent import repository
from workqueue.types.agent.config import AgentTypeConfig
from workqueue.types.agent.models import AGENT_ITEM_TYPE, AgentDimension, AgentState, AgentWorkItem
from workqueue.types.agent.routing import TriggerNote, after_trigger, trigger_note

logger = logging.getLogger(__name__)

ACCESS_CACHE_SECONDS = 300.0
MAX_ACCESS_ENTRIES = 4096
# A kept hook carries how often it was kept; after this many rounds it is dropped.
KEPT_KEY = "_workqueue_agent_kept"
MAX_KEPT = 10
NOTE_ISSUER = "gitlab-note"


class AccessLevels:
    """Members' access levels by (project id, user id), cached for 5 minutes."""

    def __init__(self, gitlab: GitLabClient, *, clock: Any = time.monotonic) -> None:
        self._gitlab = gitlab
        self._clock = clock
        self._cache: dict[tuple[int, int], tuple[int | None, float]] = {}
        self._lock = threading.Lock()

    def level(self, project_id: int, user_id: int) -> int | None:
        key = (project_id, user_id)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[1] < ACCESS_CACHE_SECONDS:
            return cached[0]
        level = self._gitlab.member_access_level(project_id, user_id)
        with self._lock:
            if len(self._cache) >= MAX_ACCESS_ENTRIES:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = (level, now)
        return level


def note_creator(config: AgentTypeConfig, gitlab: GitLabClient, access: AccessLevels) -> Creator:
    def create_from_note(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
        try:
            bot = gitlab.current_user().username
            note = trigger_note(
                body, trigger=config.trigger, projects=config.projects, bot_username=bot
            )
            if note is None or repository.task_of_note(session, note.note_id) is not None:
                return []
            # A hook is a hint: who wrote what, and where, is read back from GitLab.
            note = confirmed(gitlab, note, config.trigger)
            if note is None or note.author.lower() == bot.lower():
                return []
            level = access.level(note.project_id, note.author_id)
        except GitLabError as error:
            _keep(session, body, error)
            return []
        if level is None or level < config.min_access_level:
            logger.info(
                "note %s by %s (access %s) on %s: below min_access_level, nothing created",
                note.note_id,
                note.author,
                level,
                note.project,
            )
            return []
        created = _create(session, config, note, level)
        return [created] if created is not None else []

    return create_from_note


def confirmed(gitlab: GitLabClient, hinted: TriggerNote, trigger: str) -> TriggerNote | None:
    """The note as GitLab has it, in the thread and on the MR or issue the hook named:
    its author, text and visibility are GitLab's; None when GitLab has no such note
    there, a system note, or one that does not start with the trigger (anymore)."""
    kind, iid = hinted.noteable.value, hinted.noteable_iid
    if hinted.discussion_id is not None:
        thread = gitlab.thread_notes(hinted.project_id, kind, iid, hinted.discussion_id)
        found = next((note for note in thread if note.id == hinted.note_id), None)
    else:
        found = gitlab.note(hinted.project_id, kind, iid, hinted.note_id)
    if found is None or found.system or found.author_id is None or not found.author:
        return None
    text = after_trigger(found.body, trigger)
    if text is None:
        return None
    # Private whatever the hook says: an internal note, or any note on a confidential issue.
    internal = found.internal or (
        kind == "issue" and gitlab.issue_is_confidential(hinted.project_id, iid)
    )
    return replace(
        hinted,
        author=found.author,
        author_id=found.author_id,
        text=text,
        internal=hinted.internal or internal,
    )


def _create(
    session: Session, config: AgentTypeConfig, note: TriggerNote, level: int
) -> uuid.UUID | None:
    counts = repository.hour_counts(
        session, author_id=note.author_id, project_id=note.project_id, now=datetime.now(UTC)
    )
    limits = config.rate_limit
    over = None  # the limit reached, said once per hour in the thread
    if counts.by_author >= limits.per_user_per_hour:
        if counts.author_told:
            return None
        over = f"{note.author} asked {counts.by_author} times"
    elif counts.by_project >= limits.per_project_per_hour:
        if counts.project_told:
            return None
        over = f"{note.project} asked {counts.by_project} times"
    item = AgentWorkItem(
        item_type=AGENT_ITEM_TYPE,
        phase=Phase.ACTIVE,
        actionable=True,
        caller_identity=note.author,
        caller_issuer=NOTE_ISSUER,
        project_path=note.project,
        live_key=f"{AGENT_ITEM_TYPE}:note:{note.note_id}",
        idempotency_key=f"{AGENT_ITEM_TYPE}:note:{note.note_id}",
        project=note.project,
        project_id=note.project_id,
        noteable_type=note.noteable.value,
        noteable_iid=note.noteable_iid,
        note_id=note.note_id,
        discussion_id=note.discussion_id,
        note_url=_on_instance(note.url, config.gitlab_url),
        author=note.author,
        author_id=note.author_id,
        author_access=level,
        request=note.text,
        internal=note.internal,
        session_id=note.session_id,
        state=AgentState.RATE_LIMITED if over else AgentState.QUEUED,
        reason=f"rate limit: {over} in the last hour" if over else None,
    )
    try:
        with session.begin_nested():  # another replica may take the same note at once
            session.add(item)
            session.flush()
    except IntegrityError:
        return None
    if over:
        # Only the answer in the thread: no placeholder, no agent call.
        for dimension in (
            AgentDimension.NEEDS_PLACEHOLDER,
            AgentDimension.NEEDS_AGENT,
            AgentDimension.NEEDS_CHANGES,
        ):
            enqueue.upsert_dimension(
                session, item.id, DimensionUpdate(dimension, DimensionStatus.FALSE)
            )
    enqueue.notify_wake(session, AGENT_ITEM_TYPE, item.id)
    return item.id


def _on_instance(url: str | None, gitlab_url: str) -> str | None:
    """The hook's note URL when it is a plain https(s) link into the configured instance."""
    if url is None or len(url) > 2048 or any(ch.isspace() or ord(ch) < 32 for ch in url):
        return None
    return url if url.startswith(gitlab_url + "/") else None


def _keep(session: Session, body: Mapping[str, Any], error: Exception) -> None:
    kept = body.get(KEPT_KEY, 0)
    rounds = kept if isinstance(kept, int) and not isinstance(kept, bool) else MAX_KEPT
    if rounds >= MAX_KEPT:
        logger.warning("note hook dropped: GitLab could not be asked %d times (%s)", rounds, error)
        return
    logger.warning("note hook kept for later: GitLab cannot be asked now (%s)", error)
    store_for_later(session, source="agent", event_type="note", body={**body, KEPT_KEY: rounds + 1})
