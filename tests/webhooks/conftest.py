"""Fixtures for the webhook and SQS ingestion tests: a simulated GitLab world and the service."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from mr_harness import FILES, TOKEN
from webhook_support import WebhookApp, webhook_app

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

PROJECT_PATH = "acme/widgets"
BOT_BRANCH = "workqueue/sync-kernel"


@dataclass(frozen=True)
class World:
    """One bot MR in the simulator, with a failed MR pipeline and a human comment."""

    project_id: int
    project_path: str
    branch: str
    iid: int
    sha: str
    pipeline_id: int
    job_id: int
    note_id: int


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.close_webhook_client()
        simulator.stop()
    assert simulator.errors == []


@pytest.fixture
def world(simulator: GitLabSimulator) -> World:
    project_id = simulator.create_project(PROJECT_PATH, FILES)
    sha = simulator.push(
        project_id, BOT_BRANCH, {"kernel.spec": "Version: 2\n"}, user="workqueue-bot"
    )
    iid = simulator.create_merge_request(project_id, BOT_BRANCH, "Sync", user="workqueue-bot")
    pipeline_id = simulator.create_pipeline(
        project_id,
        merge_request_iid=iid,
        jobs=[
            JobSpec("ruff", stage="lint", status="success"),
            JobSpec("unit-tests", status="failed", failure_reason="script_failure"),
        ],
    )
    job_id = next(j["id"] for j in simulator.jobs(pipeline_id) if j["name"] == "unit-tests")
    note_id = simulator.add_note(project_id, iid, "looks good")
    return World(project_id, PROJECT_PATH, BOT_BRANCH, iid, sha, pipeline_id, job_id, note_id)


@pytest.fixture
def service(database_url, simulator) -> Iterator[WebhookApp]:
    with webhook_app(database_url, simulator.url) as app:
        yield app
