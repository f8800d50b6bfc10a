"""The two outbound events of trunk validation, written in the transaction of the change.

`validation.repository.started` is written with the admission (the CAS that
records strategy and base), so a subscriber that reloads the item never finds
it still accepted. `validation.repository.finished` is written with the
terminal transition of an admitted head. Both go through the outbox: they are
sent exactly when their transaction commits, so the process stage has no
separate "re-announce" to do on a redelivery (the seed needs one only because
its announce is a separate publish that can fail after the state write).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from workqueue.queue import emit
from workqueue.types.trunk.models import TrunkWorkItem

STARTED = "validation.repository.started"
FINISHED = "validation.repository.finished"


def _data(item: TrunkWorkItem) -> dict[str, Any]:
    return {
        "queue": item.queue,
        "sequence": item.sequence,
        "sha": item.sha,
        "state": str(item.state),
        "build_strategy": None if item.build_strategy is None else str(item.build_strategy),
        "base_sha": item.base_sha,
    }


def announce_started(session: Session, item: TrunkWorkItem) -> None:
    emit(session, STARTED, item=item, data=_data(item))


def announce_finished(session: Session, item: TrunkWorkItem) -> None:
    data = _data(item)
    data.update(
        result=str(item.state),
        pipeline_id=item.pipeline_id,
        pipeline_url=item.pipeline_url,
    )
    emit(session, FINISHED, item=item, data=data)
