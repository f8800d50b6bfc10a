"""The `trunk` type's part in the generic cancel and retry routes.

Cancel: an accepted head simply ends; an admitted one also gives its slot
back and announces its end (its pipeline is left running: the service does
not cancel CI a person may want to watch). Retry (of a failed or cancelled
head): the head is accepted again with no strategy, so the process stage
decides afresh: superseded if a newer head is kept instead, else gated and
admitted, its strategy derived from the last green of now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from workqueue.queue import repository as queue_repository
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus
from workqueue.types.trunk import repository
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.executors import end_head
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
            # Failed by the engine while holding a slot: the slot goes back first.
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
            queue_repository.upsert_dimension(
                session, item.id, DimensionUpdate(dimension, DimensionStatus.TRUE)
            )
