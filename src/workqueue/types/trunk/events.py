"""What GitLab's Pipeline Hooks mean for a `trunk` head, and which heads they concern.

A hook is only a hint, never proof: it raises `needs_record`, and `record`
reads the pipeline from GitLab before ending anything (a forged or replayed
hook must not turn a head green and make it the base of incremental builds).
So every redelivery, at every state, is harmless: a terminal head ignores
events (DDR-37), and a processing one re-reads a pipeline that has not
changed.

The resolver finds processing heads by the hook's pipeline id, or by the
`WORKQUEUE_TRUNK_REQUEST` variable for a head whose pipeline is not recorded
yet (a worker died after triggering it): that raises `needs_process`, whose
build step then adopts the pipeline instead of triggering another.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy.orm import Session

from workqueue.gitlab.webhook_bodies import pipeline_hook
from workqueue.queue import (
    DimensionStatus,
    DimensionUpdate,
    EventContext,
    EventResult,
    ItemTypeRegistration,
)
from workqueue.types.trunk import repository
from workqueue.types.trunk.executors.build import REQUEST_VARIABLE
from workqueue.types.trunk.models import TrunkDimension, TrunkState, TrunkWorkItem


def on_pipeline(context: EventContext) -> EventResult | None:
    item = cast("TrunkWorkItem", context.item)
    pipeline_id, request = hook_pipeline(context.body)
    if item.pipeline_id is not None and pipeline_id == item.pipeline_id:
        return EventResult(
            dimensions=(DimensionUpdate(TrunkDimension.NEEDS_RECORD, DimensionStatus.TRUE),),
            reason=f"pipeline {pipeline_id} reported by hook; reading it",
        )
    if item.pipeline_id is None and request == item.id:
        return EventResult(
            dimensions=(DimensionUpdate(TrunkDimension.NEEDS_PROCESS, DimensionStatus.TRUE),),
            reason=(
                f"pipeline {pipeline_id} was triggered for this head; adopting it"
                if pipeline_id is not None
                else "a pipeline was triggered for this head; adopting it"
            ),
        )
    return None


def on_look_again(context: EventContext) -> EventResult | None:
    """Another head freed a slot or outnumbered this one: decide again now."""
    item = cast("TrunkWorkItem", context.item)
    if item.state is not TrunkState.ACCEPTED:
        return None
    return EventResult(
        dimensions=(DimensionUpdate(TrunkDimension.NEEDS_PROCESS, DimensionStatus.TRUE),),
        reason="the queue changed: deciding again",
    )


def resolve_pipeline(session: Session, body: Mapping[str, Any]) -> list[uuid.UUID]:
    pipeline_id, request = hook_pipeline(body)
    return repository.active_heads_for_pipeline(session, pipeline_id, request)


def hook_pipeline(body: Mapping[str, Any]) -> tuple[int | None, uuid.UUID | None]:
    """(pipeline id, the head it was triggered for) from a Pipeline Hook (`gitlab.hooks`)."""
    hook = pipeline_hook(body)
    if hook is None:
        return None, None
    return hook.id, _uuid(hook.variable(REQUEST_VARIABLE))


def _uuid(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def register_trunk_events(registration: ItemTypeRegistration) -> None:
    registration.add_event_handler("pipeline", on_pipeline)
    registration.add_event_handler(repository.WAKE_EVENT, on_look_again)
    registration.add_resolver("pipeline", resolve_pipeline)
