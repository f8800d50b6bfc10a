"""Webhook payloads match GitLab's shapes (the fixtures captured from real hooks) and are
POSTed with GitLab's headers."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hook_shapes import assert_shape

from workqueue.testing.gitlab_simulator import ZERO_SHA, JobSpec

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE = "bot/bump-requests"


def fixture(name):
    return json.loads((FIXTURES / f"hook_{name}.json").read_text())


@pytest.fixture
def world(sim, project_id, project, bot_branch):
    """An MR with a failed MR pipeline, a human comment and a later push to its branch."""
    iid = project.mergerequests.create(
        {
            "source_branch": SOURCE,
            "target_branch": "main",
            "title": "Bump requests",
            "description": "Automated dependency update.",
            "remove_source_branch": True,
        }
    ).iid
    pipeline_id = sim.create_pipeline(
        project_id,
        merge_request_iid=iid,
        jobs=[
            JobSpec("ruff", stage="lint", status="success"),
            JobSpec("unit-tests", status="failed", trace="boom\n"),
            JobSpec(
                "deploy-preview",
                stage="deploy",
                status="skipped",
                when="manual",
                allow_failure=True,
            ),
        ],
    )
    failed_job = next(j["id"] for j in sim.jobs(pipeline_id) if j["name"] == "unit-tests")
    note_id = sim.add_note(project_id, iid, "@workqueue-bot retry please")
    before = sim.branch_head(project_id, SOURCE)
    after = sim.push(
        project_id, SOURCE, {"README.md": "pushed\n"}, message="Fix tests\n", user="workqueue-bot"
    )
    return {
        "iid": iid,
        "pipeline_id": pipeline_id,
        "job_id": failed_job,
        "note_id": note_id,
        "before": before,
        "after": after,
    }


def test_merge_request_hook_shape(sim, project_id, world):
    payload = sim.merge_request_hook(
        project_id, world["iid"], action="update", oldrev=world["before"]
    )
    assert_shape(payload, fixture("merge_request"))
    attributes = payload["object_attributes"]
    assert (attributes["action"], attributes["oldrev"]) == ("update", world["before"])
    assert attributes["last_commit"]["id"] == world["after"]
    assert attributes["merge_params"] == {"force_remove_source_branch": "1"}
    assert attributes["url"].endswith(f"/-/merge_requests/{world['iid']}")


def test_pipeline_hook_shape(sim, world):
    payload = sim.pipeline_hook(world["pipeline_id"])
    assert_shape(payload, fixture("pipeline"))
    attributes = payload["object_attributes"]
    assert attributes["status"] == "failed"
    assert attributes["ref"] == SOURCE  # MR pipelines report the source branch
    assert attributes["stages"] == ["lint", "test", "deploy"]
    assert payload["merge_request"]["iid"] == world["iid"]
    assert [b["name"] for b in payload["builds"]] == ["deploy-preview", "unit-tests", "ruff"]
    failed = payload["builds"][1]
    assert (failed["status"], failed["failure_reason"]) == ("failed", "script_failure")


def test_job_hook_shape(sim, world):
    payload = sim.job_hook(world["job_id"])
    assert_shape(payload, fixture("job"))
    assert payload["object_kind"] == "build"
    assert payload["build_failure_reason"] == "script_failure"
    assert payload["commit"]["id"] == world["pipeline_id"]  # GitLab puts the pipeline id here
    assert payload["ref"] == f"refs/merge-requests/{world['iid']}/head"


def test_note_hook_shape(sim, world):
    payload = sim.note_hook(world["note_id"])
    assert_shape(payload, fixture("note"))
    assert payload["object_attributes"]["note"] == "@workqueue-bot retry please"
    assert payload["object_attributes"]["noteable_type"] == "MergeRequest"
    assert payload["merge_request"]["iid"] == world["iid"]
    assert payload["user"]["username"] == "ada"


def test_push_hook_shape(sim, project_id, world):
    payload = sim.push_hook(project_id, SOURCE, before=world["before"], user="workqueue-bot")
    assert_shape(payload, fixture("push"))
    assert (payload["before"], payload["after"]) == (world["before"], world["after"])
    [commit] = payload["commits"]
    assert (commit["modified"], commit["added"], commit["removed"]) == (["README.md"], [], [])
    assert payload["total_commits_count"] == 1

    sim.delete_branch(project_id, SOURCE)
    deleted = sim.push_hook(project_id, SOURCE, before=world["after"])
    assert (deleted["after"], deleted["checkout_sha"], deleted["commits"]) == (ZERO_SHA, None, [])


def test_webhooks_are_posted_with_gitlab_headers(sim, project_id, world, receiver):
    payloads = {
        "Merge Request Hook": sim.merge_request_hook(project_id, world["iid"], action="open"),
        "Pipeline Hook": sim.pipeline_hook(world["pipeline_id"]),
        "Job Hook": sim.job_hook(world["job_id"]),
        "Note Hook": sim.note_hook(world["note_id"]),
        "Push Hook": sim.push_hook(project_id, SOURCE, before=world["before"]),
    }
    event_uuid = str(uuid.uuid4())
    for payload in payloads.values():
        response = sim.send_webhook(
            receiver.url,
            payload,
            secret_token="s3cret",
            event_uuid=event_uuid,
        )
        assert response.status_code == 200

    assert [d.headers["X-Gitlab-Event"] for d in receiver.deliveries] == list(payloads)
    for delivery, payload in zip(receiver.deliveries, payloads.values(), strict=True):
        assert delivery.path == "/hooks"
        assert delivery.payload == payload
        assert delivery.headers["X-Gitlab-Token"] == "s3cret"
        assert delivery.headers["X-Gitlab-Event-UUID"] == event_uuid
        assert delivery.headers["Content-Type"] == "application/json"
        assert delivery.headers["X-Gitlab-Instance"] == sim.url
        uuid.UUID(delivery.headers["X-Gitlab-Webhook-UUID"])
        uuid.UUID(delivery.headers["Idempotency-Key"])

    anonymous = sim.send_webhook(receiver.url, payloads["Push Hook"])
    assert anonymous.status_code == 200
    assert "X-Gitlab-Token" not in receiver.deliveries[-1].headers
