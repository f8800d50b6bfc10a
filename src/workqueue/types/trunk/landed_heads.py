"""Ingest: one `trunk` item per (queue, landed head), from Push Hooks or the API.

A head is identified by (queue, sha): a known one creates nothing. The queue
row is locked while a new head is numbered, so sequences are dense (1, 2, ...)
and `latest_item_id` is stamped only once the item exists (the seed: the
pointer never names a head that was never created). Flushes, never commits.

A Push Hook is a hint, never proof (`branch_heads`): it only names the queue
whose branch moved. The creator reads that branch's head from GitLab and
ingests it; the body's `after` is not used. A hint GitLab cannot answer now is
kept for a later intake round as a `trunk.read_head` delivery of the queue's
name (itself only a hint), so neither is the hint lost nor does the intake wait
on a failing GitLab; a deleted branch creates nothing.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from workqueue.gitlab.webhook_bodies import ZERO_SHA, push_hook
from workqueue.queue import Creator, Phase, Submitter, enqueue, store_for_later
from workqueue.types.trunk import repository
from workqueue.types.trunk.branch_heads import NoHead, PushHeadReads
from workqueue.types.trunk.config import TrunkQueueConfig, TrunkTypeConfig
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkState, TrunkWorkItem

logger = logging.getLogger(__name__)

SHA = re.compile(r"^[0-9a-f]{40}$")

READ_HEAD_EVENT = "trunk.read_head"
"""A push hint kept for a later round: `{"queue": name}`, "read that branch's head"."""

# Who created items ingested from GitLab's Push Hooks: no caller, the service itself.
WEBHOOK_ISSUER = "workqueue"
WEBHOOK_IDENTITY = "system:gitlab-push-hook"


WEBHOOK_SUBMITTER = Submitter(WEBHOOK_ISSUER, WEBHOOK_IDENTITY)


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    item: TrunkWorkItem
    created: bool


def live_key(queue: str, sha: str) -> str:
    return f"{TRUNK_ITEM_TYPE}:{queue}:{sha}"


def ingest_head(
    session: Session, queue: TrunkQueueConfig, sha: str, *, submitter: Submitter
) -> IngestOutcome:
    """The item of `sha` in `queue`, created (and woken) if it is new."""
    if not SHA.fullmatch(sha):
        raise ValueError(f"not a full commit sha: {sha!r}")
    repository.ensure_queue(session, queue)
    row = repository.lock_queue(session, queue.name)
    existing = repository.find_head(session, queue.name, sha)
    if existing is not None:
        return IngestOutcome(existing, created=False)
    sequence = row.latest_sequence + 1
    item = TrunkWorkItem(
        item_type=TRUNK_ITEM_TYPE,
        phase=Phase.ACTIVE,
        actionable=True,
        caller_identity=submitter.identity,
        caller_issuer=submitter.issuer,
        project_path=queue.project,
        live_key=live_key(queue.name, sha),
        idempotency_key=live_key(queue.name, sha),
        queue=queue.name,
        sequence=sequence,
        sha=sha,
        state=TrunkState.ACCEPTED,
    )
    session.add(item)
    session.flush()
    row.latest_sequence = sequence
    row.latest_item_id = item.id
    session.flush()
    enqueue.notify_wake(session, TRUNK_ITEM_TYPE, item.id)
    # The head this one pushes out of the kept window may be waiting for a slot:
    # it supersedes itself now instead of at its next gate re-check.
    window = 1 if row.serial_until_green else queue.max_concurrent
    repository.wake_head_at(session, queue.name, sequence - window, cause=item.id)
    return IngestOutcome(item, created=True)


def hinted_queue(config: TrunkTypeConfig, body: Mapping[str, Any]) -> TrunkQueueConfig | None:
    """The configured queue a Push Hook says moved; None for anything else (another
    project or branch, a tag, a deleted branch, a malformed payload).

    The queue's `project` is compared exactly with the hook's project id and
    canonical path (`gitlab.hooks`). Only the queue is taken from the body: its
    head is read from GitLab, for the queue's own project."""
    hook = push_hook(body)
    if hook is None or hook.branch is None:
        return None
    if hook.after is None or hook.after == ZERO_SHA:
        return None
    for queue in config.queues:
        if queue.branch == hook.branch and hook.project.is_one_of(queue.project):
            return queue
    return None


def kept_queue(config: TrunkTypeConfig, body: Mapping[str, Any]) -> TrunkQueueConfig | None:
    """The configured queue a kept hint (`READ_HEAD_EVENT`) names; None otherwise."""
    name = body.get("queue")
    return config.queue_named(name) if isinstance(name, str) else None


def push_creator(config: TrunkTypeConfig, reads: PushHeadReads) -> Creator:
    """The `push` creator registered for the type: a hinted queue's branch head → an item."""

    def create_from_push(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
        queue = hinted_queue(config, body)
        return [] if queue is None else ingest_branch_head(session, queue, reads)

    return create_from_push


def kept_hint_creator(config: TrunkTypeConfig, reads: PushHeadReads) -> Creator:
    """The `READ_HEAD_EVENT` creator: a kept hint, tried again."""

    def create_from_kept_hint(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
        queue = kept_queue(config, body)
        return [] if queue is None else ingest_branch_head(session, queue, reads)

    return create_from_kept_hint


def ingest_branch_head(
    session: Session, queue: TrunkQueueConfig, reads: PushHeadReads
) -> list[uuid.UUID]:
    """Ingest the queue's branch head as GitLab reports it now; the new item's id, if any."""
    head = reads.head(session, queue)
    if head is NoHead.NOT_NOW:
        if reads.keep_once(session, queue):
            store_for_later(
                session, source="trunk", event_type=READ_HEAD_EVENT, body={"queue": queue.name}
            )
            logger.warning("trunk %s: branch head unreadable now; the hint is kept", queue.name)
        return []
    if head is NoHead.REFUSED:
        logger.warning("trunk %s: GitLab refuses to show the branch; hint dropped", queue.name)
        return []
    if head is NoHead.BRANCH_GONE:
        return []
    outcome = ingest_head(session, queue, head, submitter=WEBHOOK_SUBMITTER)
    return [outcome.item.id] if outcome.created else []
