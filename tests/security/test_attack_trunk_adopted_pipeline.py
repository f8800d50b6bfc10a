"""Attack: a pipeline someone else triggered for a waiting head, with the head's four
service variables but one more of its own (or a queue variable changed), was adopted
as the head's validation, so its green made the head green and last green.

The build adopts a pipeline "found again" when its `WORKQUEUE_TRUNK_REQUEST`,
`WORKQUEUE_TRUNK_SHA`, `WORKQUEUE_BUILD_STRATEGY` and `WORKQUEUE_BASE_SHA` are the
head's (5155d60). Anyone allowed to run pipelines on the protected branch can read a
waiting head's id and trigger one on `main` with those four and, beside them,
whatever the project's CI reads to skip its work (`SKIP_TESTS=true`) or a queue
variable set otherwise (`VALIDATION=none`): a pipeline that validates nothing,
adopted once the head is admitted. Now a found pipeline's variables must be exactly
the ones the service triggers with.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_harness import build_client
from harness import wait_until
from mr_harness import TOKEN
from scoping_support import OWN, ci_job

from workqueue.gitlab.client import GitLabClient
from workqueue.testing.gitlab_simulator import GitLabSimulator

SECRET = "attack-webhook-secret"
QUEUE_VARIABLES = {"VALIDATION": "full"}


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    rules = (
        {
            "issuer": issuer.issuer,
            "claims": {"aud": "workqueue-service"},
            "permissions": ["read", "submit"],
            "item_types": ["trunk"],
            "projects": ["{project_path}"],
        },
    )
    handled = {
        "trunk": {
            "gitlab_url": simulator.url,
            "queues": [
                {
                    "project": OWN,
                    "branch": "main",
                    "max_concurrent": 1,
                    "variables": QUEUE_VARIABLES,
                }
            ],
            "gate_recheck_seconds": 0.3,
            "pipeline_check_seconds": 30,
        },
    }
    with build_client(
        database_url,
        simulator,
        local_user=None,
        webhook_secret=SECRET,
        rules=rules,
        handled_types=handled,
    ) as test_client:
        yield test_client


def details(client: httpx.Client, item_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/api/work-items/{item_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["details"]
    return found


def building(client: httpx.Client, item_id: str, headers: dict[str, str]) -> bool:
    found = details(client, item_id, headers)
    return found["state"] == "processing" and found["pipeline_id"] is not None


def ingest_landed(client: httpx.Client, simulator: GitLabSimulator, job: dict[str, str]) -> str:
    sha = simulator.push(OWN, "main", {f"landed-{uuid.uuid4().hex[:8]}.txt": "x\n"})
    answer = client.post(
        "/api/work-items/trunk", json={"project": OWN, "branch": "main", "sha": sha}, headers=job
    )
    assert answer.status_code == 201, answer.text
    item_id: str = answer.json()["id"]
    return item_id


def finish_green(client: httpx.Client, simulator: GitLabSimulator, pipeline_id: int) -> None:
    simulator.set_pipeline_status(pipeline_id, "success")
    answer = simulator.send_webhook(
        str(client.base_url) + "/api/webhooks/gitlab",
        simulator.pipeline_hook(pipeline_id),
        secret_token=SECRET,
        idempotency_key=str(uuid.uuid4()),
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "extra",
    [{"SKIP_TESTS": "true"}, {"VALIDATION": "none"}],
    ids=["one-more-variable", "a-queue-variable-changed"],
)
def test_a_pipeline_with_other_variables_is_not_adopted_for_a_waiting_head(
    client, simulator, issuer, key, extra
):
    job = ci_job(issuer, key)
    first_id = ingest_landed(client, simulator, job)
    wait_until(lambda: building(client, first_id, job), what="the first head building")
    waiting_id = ingest_landed(client, simulator, job)  # waits: the only slot is taken
    waiting = details(client, waiting_id, job)
    assert waiting["state"] == "accepted"
    # Predictable: once the first head is green, the waiting one builds incrementally
    # from it.
    ours = {
        **QUEUE_VARIABLES,
        "WORKQUEUE_TRUNK_REQUEST": waiting_id,
        "WORKQUEUE_TRUNK_SHA": waiting["sha"],
        "WORKQUEUE_BUILD_STRATEGY": "incremental",
        "WORKQUEUE_BASE_SHA": details(client, first_id, job)["sha"],
    }

    # Someone allowed to run pipelines on main triggers one "for" the waiting head.
    with GitLabClient(simulator.url, TOKEN, timeout=5) as gitlab:
        forged = gitlab.trigger_pipeline(
            OWN,
            ref="main",
            variables={**ours, **extra},
        )
    simulator.set_pipeline_status(forged.id, "success")  # it validated nothing

    finish_green(client, simulator, details(client, first_id, job)["pipeline_id"])
    wait_until(lambda: building(client, waiting_id, job), what="the waiting head building")
    own = details(client, waiting_id, job)["pipeline_id"]
    assert own != forged.id
    assert simulator.pipeline_variables(own) == ours
    assert details(client, waiting_id, job)["state"] == "processing"
