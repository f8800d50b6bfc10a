"""GitLab disables the project's hook (or loses deliveries) while items wait: the service,
receiving nothing, still converges every item through its drift checks, at a bounded
number of GitLab calls.

The simulator delivers to the service's real receiver as GitLab would
(`add_project_hook` + `emit`). An hour is simulated by drift periods: with the
default `drift_check_seconds` of 300 an hour is 12 periods, so the test waits
out 12 drift checks per item at a short period and counts the GitLab calls per
check. The cost scales with the period alone: N checks per item per hour
(3600 / drift_check_seconds) plus the reconciles their corrections start.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from harness import wait_until
from live_app import serve_in_thread
from mr_harness import FILES
from webhook_support import NEW_SECRET, SECRETS, WebhookApp, install_context, wire_webhooks

from workqueue.api.app import create_app
from workqueue.api.webhooks import route as webhooks
from workqueue.config import ServiceConfig
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import JobSpec

PROJECT = "acme/drifting"
ITEMS = 3
PERIOD = 0.1  # stands for drift_check_seconds = 300 s
PERIODS_PER_HOUR = 12  # 3600 / 300


@contextmanager
def drifting_service(database_url: Any, gitlab_url: str) -> Iterator[WebhookApp]:
    """The service with the receiver, processing items, drift checks every PERIOD."""
    settings = Settings(
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user",
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRETS,
    )
    config = ServiceConfig.model_validate(
        {
            "processing": {
                "workers": 2,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.2,
            },
            "handled_types": {"mr": {"gitlab_url": gitlab_url, "drift_check_seconds": PERIOD}},
        }
    )
    app = create_app(settings, config, database_url=database_url, type_context=install_context())
    wire_webhooks(app, settings)
    with serve_in_thread(app) as base_url:
        yield WebhookApp(base_url + webhooks.WEBHOOK_PATH, base_url, app, app.state.runtime)


def counters(service: WebhookApp, name: str) -> dict[tuple[str, ...], float]:
    return dict(service.runtime.registry.get("mr").counters[name].read())


def item(service: WebhookApp, item_id: str) -> dict[str, Any]:
    return httpx.get(f"{service.base_url}/api/work-items/{item_id}", timeout=10).json()


def submit(service: WebhookApp, n: int) -> str:
    answer = httpx.post(
        f"{service.base_url}/api/work-items/mr",
        json={
            "project": PROJECT,
            "source_branch": f"workqueue/drift-{n}",
            "title": f"Change {n}",
            "commit_message": f"Change {n}",
            "file_actions": [
                {"action": "create", "file_path": f"drift/{n}.txt", "content": f"{n}\n"}
            ],
        },
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_an_hour_of_disabled_hooks_every_item_converges_at_a_bounded_cost(database_url, simulator):
    simulator.create_project(PROJECT, FILES)
    with drifting_service(database_url, simulator.url) as service:
        simulator.add_project_hook(PROJECT, service.url, secret_token=NEW_SECRET)
        ids = [submit(service, n) for n in range(ITEMS)]
        wait_until(
            lambda: all(item(service, i)["details"]["mr_iid"] for i in ids),
            what="the MRs opened",
        )
        iids = [item(service, i)["details"]["mr_iid"] for i in ids]

        # GitLab disables the hook (after four failed deliveries, say); CI starts.
        simulator.disable_project_hooks(PROJECT)
        pipelines = [
            simulator.create_pipeline(
                PROJECT, merge_request_iid=iid, jobs=[JobSpec("test", status="running")]
            )
            for iid in iids
        ]
        for pipeline in pipelines:
            assert [d.outcome for d in simulator.emit(simulator.pipeline_hook(pipeline))] == [
                "disabled"
            ]

        # An hour of waiting: 12 drift checks per item.
        simulator.reset_requests()
        start = counters(service, "drift_checks")[()]
        before = sum(counters(service, "drift_corrections").values())
        wait_until(
            lambda: counters(service, "drift_checks")[()] >= start + ITEMS * PERIODS_PER_HOUR,
            what="an hour of drift checks",
        )
        checks = counters(service, "drift_checks")[()] - start
        corrected = sum(counters(service, "drift_corrections").values()) - before
        calls = simulator.request_count()
        # Each check is one MR read, each correction (the pipeline found running) one
        # reconcile read; a check in flight may have read without being counted yet.
        assert calls <= checks + corrected + ITEMS
        assert simulator.request_count(
            "GET", "/projects/:id/merge_requests/:merge_request_iid"
        ) == (calls)
        # Every item is checked once per period: an item's hour costs 12 checks' calls.
        per_item_per_hour = calls / checks * PERIODS_PER_HOUR
        assert per_item_per_hour <= PERIODS_PER_HOUR + 2  # 12 reads, 1-2 reconciles
        assert corrected >= ITEMS  # each running pipeline was found without its hook
        assert all(item(service, i)["phase"] == "active" for i in ids)

        # CI passes; its hooks are not delivered either. Every item still merges.
        for pipeline in pipelines:
            for job in simulator.jobs(pipeline):
                simulator.set_job_status(job["id"], "success")
            assert [d.outcome for d in simulator.emit(simulator.pipeline_hook(pipeline))] == [
                "disabled"
            ]
        wait_until(
            lambda: all(item(service, i)["phase"] == "completed" for i in ids),
            what="every item merged",
        )
        simulator.enable_project_hooks(PROJECT)
    assert [mr["state"] for mr in simulator.merge_requests(PROJECT)] == ["merged"] * ITEMS
    assert {d.outcome for d in simulator.hook_deliveries()} == {"disabled"}


def test_lost_pipeline_hooks_of_one_project_leave_the_others_untouched(database_url, simulator):
    simulator.create_project(PROJECT, FILES)
    with drifting_service(database_url, simulator.url) as service:
        simulator.add_project_hook(PROJECT, service.url, secret_token=NEW_SECRET)
        item_id = submit(service, 0)
        wait_until(lambda: item(service, item_id)["details"]["mr_iid"], what="the MR")
        iid = item(service, item_id)["details"]["mr_iid"]
        simulator.lose_hooks(project=PROJECT, kinds=["pipeline"], count=1)
        pipeline = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("test", status="success")]
        )
        assert [d.outcome for d in simulator.emit(simulator.pipeline_hook(pipeline))] == ["lost"]
        wait_until(lambda: item(service, item_id)["phase"] == "completed", what="the merge")
        assert counters(service, "drift_corrections")[("pipeline",)] >= 1
