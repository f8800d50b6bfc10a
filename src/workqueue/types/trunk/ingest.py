"""Ingest: one `trunk` item per (queue, landed head), from Push Hooks or the API.

A head is identified by (queue, sha): a known one creates nothing. The queue
row is locked while a new head is numbered, so sequences are dense (1, 2, ...)
and `latest_item_id` is stamped only once the item exists (the seed: the
pointer never names a head that was never created). Flushes, never commits.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from workqueue.gitlab.hooks import ZERO_SHA, push_hook
from workqueue.queue import repository as queue_repository
from workqueue.queue.contract import Creator
from workqueue.queue.models import Phase
from workqueue.types.trunk import repository
from workqueue.types.trunk.config import TrunkQueueConfig, TrunkTypeConfig
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkState, TrunkWorkItem

SHA = re.compile(r"^[0-9a-f]{40}$")

# Who created items ingested from GitLab's Push Hooks: no caller, the service itself.
WEBHOOK_ISSUER = "workqueue"
WEBHOOK_IDENTITY = "system:gitlab-push-hook"


@dataclass(frozen=True, slots=True)
class Submitter:
    issuer: str
    identity: str


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
    queue_repository.notify_wake(session, TRUNK_ITEM_TYPE, item.id)
    # The head this one pushes out of the kept window may be waiting for a slot:
    # it supersedes itself now instead of at its next gate re-check.
    window = 1 if row.serial_until_green else queue.max_concurrent
    repository.wake_head_at(session, queue.name, sequence - window, cause=item.id)
    return IngestOutcome(item, created=True)


def pushed_head(
    config: TrunkTypeConfig, body: Mapping[str, Any]
) -> tuple[TrunkQueueConfig, str] | None:
    """(queue, sha) a Push Hook reports for a configured queue; None for anything else
    (another project or branch, a tag, a deleted branch, a malformed payload).

    The queue's `project` is compared exactly with the hook's project id and
    canonical path (`gitlab.hooks`)."""
    hook = push_hook(body)
    if hook is None or hook.branch is None:
        return None
    after = hook.after
    if after is None or after == ZERO_SHA or not SHA.fullmatch(after):
        return None
    for queue in config.queues:
        if queue.branch == hook.branch and hook.project.is_one_of(queue.project):
            return queue, after
    return None


def push_creator(config: TrunkTypeConfig) -> Creator:
    """The `push` creator registered for the type: a configured queue's new head → an item."""

    def create_from_push(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
        found = pushed_head(config, body)
        if found is None:
            return []
        queue, sha = found
        outcome = ingest_head(session, queue, sha, submitter=WEBHOOK_SUBMITTER)
        return [outcome.item.id] if outcome.created else []

    return create_from_push
