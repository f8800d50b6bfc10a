"""Issue 22's metrics on a real /metrics answer: drift checks and corrections (counters of
the mr type) and when GitLab last reached the service."""

from __future__ import annotations

import time

import sqlalchemy as sa
from api_harness import build_client
from prometheus_client.parser import text_string_to_metric_families

from workqueue.observability.backlog import LAST_RECEIVED_METRIC, LastDelivery
from workqueue.types.mr.executors.drift_check import CORRECTION_KINDS

LAST = LAST_RECEIVED_METRIC


def samples(client, name):
    text = client.get("/metrics").text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def received(engine, seconds_ago):
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO received_deliveries (delivery_key, source, event_type, received_at)"
                " VALUES (:key, 'webhook', 'pipeline', now() - make_interval(secs => :ago))"
            ),
            {"key": f"key-{seconds_ago}", "ago": seconds_ago},
        )


def test_an_app_exports_the_drift_counters(database_url, simulator):
    with build_client(database_url, simulator) as client:
        assert samples(client, "workqueue_drift_checks_total") == {(("item_type", "mr"),): 0.0}
        corrections = samples(client, "workqueue_drift_corrections_total")
        assert corrections == {
            (("item_type", "mr"), ("kind", kind)): 0.0 for kind in CORRECTION_KINDS
        }


def test_the_newest_delivery_time_is_exported_once_there_is_one(database_url, simulator, engine):
    with build_client(database_url, simulator, metrics_cache_seconds=0) as client:
        assert samples(client, LAST) == {}  # nothing received yet: no value, not 0
        received(engine, 3600)
        received(engine, 60)
        [(labels, value)] = samples(client, LAST).items()
        assert labels == ()
        assert time.time() - 120 < value < time.time() - 30


def test_the_collector_reads_the_newest_of_the_kept_deliveries(engine):
    collector = LastDelivery(engine)
    [family] = collector.collect()
    assert family.samples == []  # listed (HELP, TYPE), no value yet
    received(engine, 600)
    [family] = collector.collect()
    assert family.name == LAST
    assert time.time() - 700 < family.samples[0].value < time.time() - 500
