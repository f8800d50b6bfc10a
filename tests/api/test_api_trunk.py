"""`POST /api/work-items/trunk` and `GET /api/trunk/queues` over HTTP, with real tokens.

A GitLab-CI-style caller may submit heads of its own project only; out of scope
is a 403 with no GitLab write. The body is strict; a head of no configured
queue is a 422.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_harness import build_client
from auth_support import LocalIssuer, claims_for, sign

from workqueue.testing.gitlab_simulator import GitLabSimulator

APP, LIB = "team/app", "other/lib"
WRITES = ("POST", "PUT", "DELETE")


def token(issuer: LocalIssuer, key, sub: str, **claims: Any) -> dict[str, str]:
    signed = sign(claims_for(issuer.issuer, sub=sub, aud="workqueue-service", **claims), key)
    return {"Authorization": f"Bearer {signed}"}


def ci_job(issuer, key, project_path: str = APP) -> dict[str, str]:
    return token(
        issuer,
        key,
        f"project_path:{project_path}:ref_type:branch:ref:main",
        project_path=project_path,
    )


@pytest.fixture
def client(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    for path in (APP, LIB):
        simulator.create_project(path, {"README.md": "# hi\n"})
    rules = (
        {
            "issuer": issuer.issuer,
            "claims": {"aud": "workqueue-service"},
            "permissions": ["read", "submit"],
            "item_types": ["trunk"],
            "projects": ["{project_path}"],
        },
    )
    section = {
        "gitlab_url": simulator.url,
        "queues": [
            {"project": APP, "branch": "main"},
            {"project": LIB, "branch": "main", "max_concurrent": 2},
        ],
    }
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=rules,
        handled_types={"trunk": section},
        process_items=False,  # what is stored is under test here
    ) as test_client:
        yield test_client


def writes(simulator: GitLabSimulator) -> int:
    return sum(simulator.request_count(method) for method in WRITES)


def test_a_new_head_is_201_and_the_same_head_again_is_200(client, simulator, issuer, key):
    sha = simulator.branch_head(APP, "main")
    body = {"project": APP, "branch": "main", "sha": sha}
    created = client.post("/api/work-items/trunk", json=body, headers=ci_job(issuer, key))
    assert created.status_code == 201, created.text
    answer = created.json()
    assert (answer["item_type"], answer["phase"], answer["outcome"]) == (
        "trunk",
        "active",
        "created",
    )
    details = answer["details"]
    assert (details["queue"], details["sequence"], details["sha"], details["state"]) == (
        f"{APP}:main",
        1,
        sha,
        "accepted",
    )
    assert details["build_strategy"] is None
    assert details["pipeline_id"] is None
    assert answer["caller_issuer"] == issuer.issuer
    again = client.post("/api/work-items/trunk", json=body, headers=ci_job(issuer, key))
    assert again.status_code == 200
    assert (again.json()["id"], again.json()["outcome"]) == (answer["id"], "unchanged")


def test_out_of_scope_project_is_403_with_no_gitlab_write(client, simulator, issuer, key):
    before = writes(simulator)
    sha = simulator.branch_head(LIB, "main")
    answer = client.post(
        "/api/work-items/trunk",
        json={"project": LIB, "branch": "main", "sha": sha},
        headers=ci_job(issuer, key),
    )
    assert answer.status_code == 403
    assert writes(simulator) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"project": APP, "branch": "develop", "sha": "a" * 40}, "branch"),  # no such queue
        ({"project": APP, "branch": "main", "sha": "a" * 39}, "sha"),
        ({"project": APP, "branch": "main", "sha": "A" * 40}, "sha"),
        ({"project": APP, "branch": "main", "sha": "a" * 40, "extra": 1}, "extra"),
        ({"project": APP, "branch": "main"}, "sha"),
        ({"project": 7, "branch": "main", "sha": "a" * 40}, "project"),
    ],
)
def test_invalid_bodies_are_422_at_the_field(client, simulator, issuer, key, body, field):
    before = writes(simulator)
    answer = client.post("/api/work-items/trunk", json=body, headers=ci_job(issuer, key))
    assert answer.status_code == 422, answer.text
    assert field in {str(part) for error in answer.json()["detail"] for part in error["loc"]}
    assert writes(simulator) == before


def test_queues_are_listed_within_the_callers_read_scope(client, simulator, issuer, key):
    sha = simulator.branch_head(APP, "main")
    client.post(
        "/api/work-items/trunk",
        json={"project": APP, "branch": "main", "sha": sha},
        headers=ci_job(issuer, key),
    )
    listed = client.get("/api/trunk/queues", headers=ci_job(issuer, key))
    assert listed.status_code == 200
    (queue,) = listed.json()["items"]
    assert queue["name"] == f"{APP}:main"
    assert (queue["in_flight"], queue["max_concurrent"], queue["last_green_sha"]) == (0, 1, None)
    assert queue["latest_item_id"] is not None
    assert listed.json()["next_cursor"] is None
    lib = client.get("/api/trunk/queues", headers=ci_job(issuer, key, LIB)).json()["items"]
    assert [q["name"] for q in lib] == [f"{LIB}:main"]
    assert lib[0]["latest_item_id"] is None  # no head yet: no row, zeros
    filtered = client.get(
        "/api/trunk/queues", params={"branch": "develop"}, headers=ci_job(issuer, key)
    )
    assert filtered.json()["items"] == []
    assert client.get("/api/trunk/queues").status_code == 401


def test_a_sha_that_is_not_the_branch_head_now_is_422_on_sha(client, simulator, issuer, key):
    """An ancestor of the head (it landed, newer commits followed), a commit of another
    branch and a branch that is gone: each a 422 on `sha`, and nothing is stored."""
    older = simulator.branch_head(APP, "main")
    simulator.push(APP, "main", {"newer.txt": "x\n"})
    side = simulator.push(APP, "workqueue/side", {"side.txt": "x\n"})
    for sha in (older, side):
        answer = client.post(
            "/api/work-items/trunk",
            json={"project": APP, "branch": "main", "sha": sha},
            headers=ci_job(issuer, key),
        )
        assert answer.status_code == 422, answer.text
        (error,) = answer.json()["detail"]
        assert (error["loc"], error["type"]) == (["body", "sha"], "not_branch_head")
        assert "is not the current head of main" in error["msg"]
    simulator.delete_branch(APP, "main")
    gone = client.post(
        "/api/work-items/trunk",
        json={"project": APP, "branch": "main", "sha": older},
        headers=ci_job(issuer, key),
    )
    assert gone.status_code == 422, gone.text
    assert gone.json()["detail"][0]["loc"] == ["body", "sha"]
    assert "does not exist" in gone.json()["detail"][0]["msg"]
    listed = client.get(
        "/api/work-items", params={"item_type": "trunk"}, headers=ci_job(issuer, key)
    )
    assert listed.json()["items"] == []


def test_gitlab_failing_to_show_the_branch_head_is_502_and_nothing_is_stored(
    client, simulator, issuer, key
):
    sha = simulator.branch_head(APP, "main")
    simulator.inject_fault("GET", "/projects/:id/repository/branches/:branch", status=503)
    answer = client.post(
        "/api/work-items/trunk",
        json={"project": APP, "branch": "main", "sha": sha},
        headers=ci_job(issuer, key),
    )
    assert answer.status_code == 502, answer.text
    assert answer.json()["detail"].startswith("GitLab branches.get: 503")
    listed = client.get(
        "/api/work-items", params={"item_type": "trunk"}, headers=ci_job(issuer, key)
    )
    assert listed.json()["items"] == []
    again = client.post(
        "/api/work-items/trunk",
        json={"project": APP, "branch": "main", "sha": sha},
        headers=ci_job(issuer, key),
    )
    assert again.status_code == 201, again.text
