"""The whole MR life driven by real webhooks from the simulator to the running service."""

from __future__ import annotations

import uuid

import httpx
import pytest
from harness import wait_until
from mr_harness import FILES, PROJECT
from webhook_support import NEW_SECRET, pending, webhook_app

from workqueue.testing.gitlab_simulator import JobSpec

pytestmark = pytest.mark.slow

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/sync-kernel",
    "title": "Sync kernel sources",
    "commit_message": "Sync sources from upstream",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}
RETRY_ROUTE = "/projects/:id/jobs/:job_id/retry"


@pytest.fixture
def project(simulator):
    simulator.create_project(PROJECT, FILES)
    simulator.configure_project(PROJECT, only_allow_merge_if_pipeline_succeeds=True)
    return PROJECT


def send(simulator, url, payload):
    answer = simulator.send_webhook(
        url, payload, secret_token=NEW_SECRET, event_uuid=str(uuid.uuid4())
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["status"]


def item(base_url, item_id):
    return httpx.get(f"{base_url}/api/work-items/{item_id}", timeout=10).json()


def submit_and_wait_for_mr(service):
    created = httpx.post(f"{service.base_url}/api/work-items/mr", json=SUBMIT, timeout=30)
    assert created.status_code == 201, created.text
    item_id = created.json()["id"]
    wait_until(
        lambda: item(service.base_url, item_id)["details"]["mr_iid"] is not None,
        timeout=30,
        what="the MR",
    )
    return item_id, item(service.base_url, item_id)["details"]["mr_iid"]


def test_infrastructure_failure_is_retried_then_green_pipeline_merges(
    database_url, simulator, project
):
    with webhook_app(database_url, simulator.url, process_items=True) as service:
        item_id, iid = submit_and_wait_for_mr(service)
        pipeline_id = simulator.create_pipeline(
            project,
            merge_request_iid=iid,
            jobs=[
                JobSpec("lint", status="success"),
                JobSpec("unit", status="failed", failure_reason="runner_system_failure"),
            ],
        )
        assert send(simulator, service.url, simulator.pipeline_hook(pipeline_id)) == "accepted"
        wait_until(
            lambda: simulator.request_count("POST", RETRY_ROUTE) == 1, timeout=30, what="retry"
        )
        (retried,) = [job for job in simulator.jobs(pipeline_id) if job["name"] == "unit"]
        assert retried["status"] == "pending"
        assert item(service.base_url, item_id)["phase"] == "active"  # not merged on red

        simulator.set_job_status(retried["id"], "success")
        assert send(simulator, service.url, simulator.pipeline_hook(pipeline_id)) == "accepted"
        wait_until(
            lambda: item(service.base_url, item_id)["phase"] == "completed",
            timeout=30,
            what="the merge",
        )
    (merge_request,) = simulator.merge_requests(project)
    assert merge_request["state"] == "merged"
    assert simulator.files(project, "main")["kernel.spec"] == b"Version: 2\n"


def test_script_failure_is_never_retried_and_nothing_merges(database_url, simulator, project):
    with webhook_app(database_url, simulator.url, process_items=True) as service:
        item_id, iid = submit_and_wait_for_mr(service)
        pipeline_id = simulator.create_pipeline(
            project,
            merge_request_iid=iid,
            jobs=[JobSpec("unit", status="failed", failure_reason="script_failure")],
        )
        assert send(simulator, service.url, simulator.pipeline_hook(pipeline_id)) == "accepted"
        # The answer comes once the hook is stored, before the item hears of it: wait
        # for what the hook says, then for the item to be idle.
        wait_until(
            lambda: item(service.base_url, item_id)["details"]["head_pipeline_id"] == pipeline_id,
            timeout=30,
            what="the event to be handled",
        )
        wait_until(
            lambda: not item(service.base_url, item_id)["actionable"],
            timeout=30,
            what="the item idle",
        )
        current = item(service.base_url, item_id)
        assert current["phase"] == "active"
        assert current["details"]["head_pipeline_id"] == pipeline_id
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert simulator.merge_requests(project)[0]["state"] == "opened"


def test_mr_merged_by_a_human_completes_the_item(database_url, simulator, project):
    with webhook_app(database_url, simulator.url, process_items=True) as service:
        item_id, iid = submit_and_wait_for_mr(service)
        simulator.merge(project, iid)
        hook = simulator.merge_request_hook(project, iid, action="merge")
        assert send(simulator, service.url, hook) == "accepted"
        wait_until(
            lambda: item(service.base_url, item_id)["phase"] == "completed",
            timeout=30,
            what="completion",
        )
        assert item(service.base_url, item_id)["details"]["completion_reason"] == "merged"
        # A later event for the finished item is stored, then resolved to nothing.
        assert send(simulator, service.url, hook) == "accepted"
        assert item_id not in {event[0] for event in pending(service.runtime.sessions)}
        assert item(service.base_url, item_id)["phase"] == "completed"


def test_reconcile_finds_failed_jobs_whose_webhooks_never_arrived(database_url, simulator, project):
    with webhook_app(database_url, simulator.url, process_items=True) as service:
        item_id, iid = submit_and_wait_for_mr(service)
        pipeline_id = simulator.create_pipeline(
            project,
            merge_request_iid=iid,
            jobs=[JobSpec("unit", status="failed", failure_reason="runner_system_failure")],
        )
        # Only the MR hook arrives (an approval, say); the pipeline hook was lost.
        hook = simulator.merge_request_hook(project, iid, action="approved")
        assert send(simulator, service.url, hook) == "accepted"
        wait_until(
            lambda: simulator.request_count("POST", RETRY_ROUTE) == 1,
            timeout=30,
            what="the reconcile to find and retry the failed job",
        )
        assert item(service.base_url, item_id)["details"]["head_pipeline_id"] == pipeline_id
