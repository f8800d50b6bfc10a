"""How long the oldest item has been waiting for a worker, per item type.

An item waits from the moment it is due: actionable, past its backoff
(`next_attempt_at`) and not leased, or since its lease ran out. Normally
this stays near zero, since NOTIFY wakes a replica at once. It grows when no
replica claims the type (none handles it, all are down, the database
refuses claims) or when workers cannot keep up. The query
(`metrics_repository.oldest_due_age_seconds`) reads only actionable rows
through their partial index, so a scrape costs what the pending work costs,
not the table size.

Deliveries wait before that, in the intake (`incoming_deliveries`): a
webhook is answered once stored, and turned into item events behind the
answer. `WaitingDeliveries` shows that queue: its length and its oldest
delivery's age stay near zero unless resolution falls behind or stops.

`LastDelivery` shows when GitLab last reached the service at all: a webhook
secret rotated on one side only, or GitLab disabling a hook that kept failing,
stops deliveries without any error on this side (drift checks keep items
moving meanwhile, but slowly).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from workqueue.observability import metrics_repository

logger = logging.getLogger(__name__)

METRIC = "workqueue_oldest_due_item_age_seconds"
WAITING_METRIC = "workqueue_incoming_deliveries_waiting"
WAITING_AGE_METRIC = "workqueue_oldest_incoming_delivery_age_seconds"
LAST_RECEIVED_METRIC = "workqueue_webhook_last_received_timestamp_seconds"


class OldestDueItem(Collector):
    """`workqueue_oldest_due_item_age_seconds{item_type}`; 0 for handled types with none due."""

    def __init__(self, engine: Engine, handled_types: Callable[[], Collection[str]]) -> None:
        self._engine = engine
        self._handled_types = handled_types

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            METRIC,
            "Seconds the oldest due, unleased actionable item has waited for a worker",
            labels=["item_type"],
        )
        try:
            with self._engine.connect() as connection:
                found = metrics_repository.oldest_due_age_seconds(connection)
        except SQLAlchemyError as error:
            logger.warning("metrics: cannot read the oldest due item: %s", error)
            return
        ages = {item_type: max(age, 0.0) for item_type, age in found.items()}
        for item_type in self._handled_types():
            ages.setdefault(item_type, 0.0)
        for item_type, age in sorted(ages.items()):
            family.add_metric([item_type], age)
        yield family


class WaitingDeliveries(Collector):
    """`workqueue_incoming_deliveries_waiting` and the oldest waiting delivery's age."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        try:
            with self._engine.connect() as connection:
                count, age = metrics_repository.waiting_deliveries(connection)
        except SQLAlchemyError as error:
            logger.warning("metrics: cannot read the intake: %s", error)
            return
        waiting = GaugeMetricFamily(
            WAITING_METRIC, "Accepted deliveries not yet turned into item events"
        )
        waiting.add_metric([], count)
        yield waiting
        oldest = GaugeMetricFamily(
            WAITING_AGE_METRIC, "Seconds the oldest accepted, unresolved delivery has waited"
        )
        oldest.add_metric([], age)
        yield oldest


class LastDelivery(Collector):
    """`workqueue_webhook_last_received_timestamp_seconds`: when the newest delivery (a
    webhook or an SQS message) any replica accepted arrived; no sample while none is kept."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        try:
            with self._engine.connect() as connection:
                newest = metrics_repository.newest_delivery_epoch(connection)
        except SQLAlchemyError as error:
            logger.warning("metrics: cannot read the newest delivery: %s", error)
            return
        family = GaugeMetricFamily(
            LAST_RECEIVED_METRIC,
            "Unix time the newest accepted GitLab delivery (webhook or SQS) was received",
        )
        if newest is not None:  # none kept: the family is listed without a sample
            family.add_metric([], newest)
        yield family
