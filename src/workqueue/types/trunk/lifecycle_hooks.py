"""The `trunk` type's part in the generic cancel and retry routes, and in the engine's
failures.

Cancel: an accepted head simply ends; an admitted one also gives its slot
back and announces its end (its pipeline is left running: the service does
not cancel CI a person may want to watch). Retry (of a failed or cancelled
head): the head is accepted again with no strategy, so the process stage
decides afresh: superseded if a newer head is kept instead, else gated and
admitted, its strategy derived from the last green of now. Failure (the engine
gave up on the head: an unexpected error until max_attempts, or a
PermanentError): the head ends `failed` and an admitted one gives its slot back,
last green untouched, in the transaction that fails it.

Each hook moves the head's state with a conditional update and releases the
slot only when it is the one that moved the head out of `processing`, so the
slot comes back exactly once whatever ends the head, in whatever order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from workqueue.queue import DimensionStatus, DimensionUpdate, enqueue
from workqueue.types.trunk import repository
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.executors.process_and_record import end_head
from workqueue.types.trunk.models import TrunkDimension, TrunkState, TrunkWorkItem


class TrunkHooks:
    def __init__(self, config: TrunkTypeConfig) -> None:
        self._config = config

    def cancel(self, session: Session, item: Any, options: Mapping[str, Any]) -> None:
        del options  # nothing to close on GitLab
        if not isinstance(item, TrunkWorkItem):  # pragma: no cover - registered for trunk
            return
        left = repository.move_state(
            session,
            item,
            from_states=[TrunkState.ACCEPTED, TrunkState.PROCESSING],
            to=TrunkState.CANCELLED,
        )
        if left is TrunkState.PROCESSING:
            end_head(session, item, TrunkState.CANCELLED, self._config)

    def failed(self, session: Session, item: Any, error: str) -> None:
        del error  # the engine records it as the item's error
        if not isinstance(item, TrunkWorkItem):  # pragma: no cover - registered for trunk
            return
        left = repository.move_state(
            session,
            item,
            from_states=[TrunkState.ACCEPTED, TrunkState.PROCESSING],
            to=TrunkState.FAILED,
        )
        if left is TrunkState.PROCESSING:
            end_head(session, item, TrunkState.FAILED, self._config)

    def retry(self, session: Session, item: Any) -> None:
        if not isinstance(item, TrunkWorkItem):  # pragma: no cover - registered for trunk
            return
        left = repository.move_state(
            session,
            item,
            from_states=[s for s in TrunkState if s is not TrunkState.ACCEPTED],
            to=TrunkState.ACCEPTED,
        )
        if left is TrunkState.PROCESSING:
            # Failed by the engine while holding a slot before the failure hook
            # existed (its row is still processing): the slot goes back first.
            end_head(session, item, TrunkState.FAILED, self._config)
        if item.pipeline_id is not None:
            item.retired_pipeline_id = max(item.pipeline_id, item.retired_pipeline_id or 0)
        item.build_strategy = None
        item.base_sha = None
        item.admitted_at = None
        item.pipeline_id = None
        item.pipeline_url = None
        item.pipeline_status = None
        item.completion_reason = None
        session.flush()
        for dimension in (TrunkDimension.NEEDS_PROCESS, TrunkDimension.NEEDS_RECORD):
            enqueue.upsert_dimension(
                session, item.id, DimensionUpdate(dimension, DimensionStatus.TRUE)
            )
