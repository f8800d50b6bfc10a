"""The metrics this package adds, read from a real /metrics answer of a real app."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT
from prometheus_client.parser import text_string_to_metric_families

from workqueue.observability.backlog import WaitingDeliveries
from workqueue.observability.composite import CompositeObserver, combine
from workqueue.queue.observer import EngineObserver

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/backlog",
    "title": "Waiting change",
    "commit_message": "Waiting change",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 4\n"}],
}


def _samples(client, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = client.get("/metrics").text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _requests(client, **labels: str) -> float:
    key = tuple(sorted(labels.items()))
    return _samples(client, "workqueue_http_requests_total").get(key, 0.0)


def test_requests_are_counted_by_route_template_and_status(database_url, simulator):
    with build_client(database_url, simulator, local_user=None, webhook_secret="right") as client:
        for _ in range(2):
            refused = client.post(
                "/api/webhooks/gitlab",
                content=b"{}",
                headers={"X-Gitlab-Token": "wrong", "X-Gitlab-Event": "Push Hook"},
            )
            assert refused.status_code == 401
        # Refused by the authentication middleware, before routing: still its template.
        assert client.get(f"/api/work-items/{uuid.uuid4()}").status_code == 401
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/healthz").status_code == 200

        webhook = {"method": "POST", "route": "/api/webhooks/gitlab", "status": "401"}
        assert _requests(client, **webhook) == 2
        item = {"method": "GET", "route": "/api/work-items/{item_id}", "status": "401"}
        assert _requests(client, **item) == 1
        assert _requests(client, method="GET", route="(unmatched)", status="404") == 1
        assert _requests(client, method="GET", route="/healthz", status="200") == 1
        durations = _samples(client, "workqueue_http_request_duration_seconds_count")
        assert durations[(("method", "POST"), ("route", "/api/webhooks/gitlab"))] == 2
        # No raw path ever becomes a label value.
        routes = {dict(key)["route"] for key in _samples(client, "workqueue_http_requests_total")}
        assert not [route for route in routes if "-" in route and "{" not in route]


def test_oldest_due_item_age_grows_while_nothing_claims_it(database_url, simulator):
    with build_client(database_url, simulator, process_items=False) as client:
        ages = _samples(client, "workqueue_oldest_due_item_age_seconds")
        assert ages == {(("item_type", "mr"),): 0.0}  # a handled type with nothing due
        assert client.post("/api/work-items/mr", json=SUBMIT).status_code == 201
        first: list[float] = []

        def waiting() -> bool:
            first[:] = list(_samples(client, "workqueue_oldest_due_item_age_seconds").values())
            return bool(first) and first[0] > 0.05

        wait_until(waiting, what="the item's age to grow")
        later: list[float] = []
        wait_until(
            lambda: (
                later.append(
                    _samples(client, "workqueue_oldest_due_item_age_seconds")[
                        (("item_type", "mr"),)
                    ]
                )
                or later[-1] > first[0] + 0.1
            ),
            what="the age to keep growing",
        )


def test_a_processed_item_is_no_longer_waiting(database_url, simulator):
    with build_client(database_url, simulator) as client:
        created = client.post("/api/work-items/mr", json=SUBMIT)
        assert created.status_code == 201
        item_id = created.json()["id"]
        wait_until(lambda: client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"])
        wait_until(
            lambda: not client.get(f"/api/work-items/{item_id}").json()["actionable"],
            what="the item to go idle",
        )
        ages = _samples(client, "workqueue_oldest_due_item_age_seconds")
        assert ages == {(("item_type", "mr"),): 0.0}


class _Recorder(EngineObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def action_started(self, item_type: str, action: str, item_id: uuid.UUID) -> None:
        self.calls.append(("started", item_type, action, item_id))

    def lease_lost(self, item_type: str) -> None:
        self.calls.append(("lost", item_type))


class _Broken(EngineObserver):
    def action_started(self, *_report: object) -> None:
        raise RuntimeError("observer bug")


def test_composite_reaches_every_observer_even_past_a_failing_one(caplog):
    first, last = _Recorder(), _Recorder()
    composite = combine([first, _Broken(), last])
    assert isinstance(composite, CompositeObserver)
    item_id = uuid.uuid4()
    composite.action_started("mr", "ensure_mr", item_id)
    composite.lease_lost("mr")
    expected = [("started", "mr", "ensure_mr", item_id), ("lost", "mr")]
    assert first.calls == last.calls == expected
    assert "engine observer _Broken failed" in caplog.text


def test_a_single_observer_is_used_as_it_is():
    only = _Recorder()
    assert combine([only]) is only


def test_waiting_deliveries_are_counted_with_the_oldest_age(engine):
    """The intake gauges read `incoming_deliveries` (nothing resolves here: no app runs)."""
    collector = WaitingDeliveries(engine)

    def gauges() -> dict[str, float]:
        return {family.name: family.samples[0].value for family in collector.collect()}

    assert gauges() == {
        "workqueue_incoming_deliveries_waiting": 0,
        "workqueue_oldest_incoming_delivery_age_seconds": 0.0,
    }
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO incoming_deliveries (delivery_key, source, event_type, body,"
                " received_at) VALUES"
                " ('a', 'webhook', 'Pipeline Hook', '{}', now() - interval '90 seconds'),"
                " (NULL, 'sqs', 'Merge Request Hook', '{}', now() - interval '5 seconds')"
            )
        )
    found = gauges()
    assert found["workqueue_incoming_deliveries_waiting"] == 2
    assert 90 <= found["workqueue_oldest_incoming_delivery_age_seconds"] < 120


def test_an_app_exports_the_intake_gauges(database_url, simulator):
    with build_client(database_url, simulator) as client:
        assert _samples(client, "workqueue_incoming_deliveries_waiting") == {(): 0.0}
        assert _samples(client, "workqueue_oldest_incoming_delivery_age_seconds") == {(): 0.0}
