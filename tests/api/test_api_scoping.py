"""The trust boundary over HTTP: project scopes, exact claims, ownership, generations, limits.

Callers carry real tokens from a local OIDC issuer. The GitLab-CI-style caller
holds a `project_path` claim and a rule `projects: ["{project_path}"]`: it may
act on its own project only. Every refusal is checked to have made no GitLab
write (the simulator's request log).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_harness import build_client
from auth_support import LocalIssuer, claims_for, sign
from scoping_support import (
    ADMIN_SUB,
    MAIN_ONLY,
    OTHER_BOT,
    OWN,
    SIBLING,
    TEAM_READER,
    VICTIM,
    WRITES,
    ci_job,
    scoped_rules,
    submission,
    token,
)

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture
def projects(simulator: GitLabSimulator) -> dict[str, int]:
    files = {"README.md": "# hello\n", "kernel.spec": "Version: 1\n"}
    return {path: simulator.create_project(path, files) for path in (OWN, SIBLING, VICTIM)}


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects  # created before the app starts
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,  # what is stored is under test here, not the GitLab writes
    ) as test_client:
        yield test_client


def writes(simulator: GitLabSimulator) -> int:
    return sum(simulator.request_count(method) for method in WRITES)


def test_a_ci_token_submits_to_its_own_project_and_nowhere_else(
    client, simulator, issuer, key, projects
):
    ci = ci_job(issuer, key)
    simulator.reset_requests()
    for project in (SIBLING, VICTIM, str(projects[VICTIM]), "Victim/Prod", "team/app/sub"):
        refused = client.post("/api/work-items/mr", json=submission(project), headers=ci)
        assert refused.status_code == 403, (project, refused.text)
        assert "may not submit mr items in project" in refused.json()["detail"]
    assert writes(simulator) == 0
    assert client.get("/api/work-items", headers=ci).json()["items"] == []

    created = client.post("/api/work-items/mr", json=submission(OWN), headers=ci)
    assert created.status_code == 201, created.text
    assert created.json()["caller_issuer"] == issuer.issuer
    # Another spelling of the same project is the same project: same live item.
    for spelling in ("Team/App", str(projects[OWN])):
        again = client.post("/api/work-items/mr", json=submission(spelling), headers=ci)
        assert again.status_code == 200, (spelling, again.text)
        assert again.json()["id"] == created.json()["id"]


def test_a_numeric_project_id_is_authorized_by_its_path(client, simulator, issuer, key, projects):
    ci = ci_job(issuer, key)
    own_id = str(projects[OWN])
    created = client.post("/api/work-items/mr", json=submission(own_id), headers=ci)
    assert created.status_code == 201, created.text
    assert created.json()["details"]["project"] == own_id  # stored as given
    item = created.json()["id"]
    assert client.get(f"/api/work-items/{item}", headers=ci).status_code == 200

    victim_id = str(projects[VICTIM])
    refused = client.post("/api/work-items/mr", json=submission(victim_id), headers=ci)
    assert refused.status_code == 403
    assert VICTIM not in refused.text  # the id's path is not disclosed
    assert victim_id in refused.json()["detail"]
    # An unknown project is a 422 only for a caller its rules would allow
    # there; to a scoped caller it looks like any other out-of-scope project.
    admin = token(issuer, key, ADMIN_SUB)
    for unknown_project in ("987654", "team/nope"):
        hidden = client.post("/api/work-items/mr", json=submission(unknown_project), headers=ci)
        assert hidden.status_code == 403, (unknown_project, hidden.text)
        unknown = client.post("/api/work-items/mr", json=submission(unknown_project), headers=admin)
        assert unknown.status_code == 422, (unknown_project, unknown.text)
        assert unknown.json()["detail"][0]["loc"] == ["body", "project"]
    assert writes(simulator) == 0


def test_read_scopes_filter_lists_in_sql_and_refuse_single_items(client, issuer, key):
    admin = token(issuer, key, ADMIN_SUB)
    ids: dict[str, list[str]] = {}
    for project in (OWN, SIBLING, VICTIM):
        for branch in ("workqueue/a", "workqueue/b", "workqueue/c"):
            answer = client.post(
                "/api/work-items/mr", json=submission(project, branch), headers=admin
            )
            assert answer.status_code == 201, answer.text
            ids.setdefault(project, []).append(answer.json()["id"])

    def all_pages(path: str, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
        found, cursor = [], None
        while True:
            query = {"limit": 1, **params, **({"cursor": cursor} if cursor else {})}
            page = client.get(path, params=query, headers=headers).json()
            assert len(page["items"]) <= 1
            found.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return found

    ci, reader = ci_job(issuer, key), token(issuer, key, TEAM_READER)
    for path in ("/api/work-items", "/api/work-items/mr"):
        assert {i["id"] for i in all_pages(path, ci)} == set(ids[OWN])
        assert {i["id"] for i in all_pages(path, reader)} == set(ids[OWN] + ids[SIBLING])
        assert len(all_pages(path, admin)) == 9
    assert client.get("/api/work-items/mr", params={"project": VICTIM}, headers=ci).json() == {
        "items": [],
        "next_cursor": None,
    }
    victim_item = ids[VICTIM][0]
    assert client.get(f"/api/work-items/{victim_item}", headers=ci).status_code == 403
    assert client.get(f"/api/work-items/{victim_item}", headers=reader).status_code == 403
    assert client.post(f"/api/work-items/{victim_item}/cancel", headers=ci).status_code == 403
    assert client.get(f"/api/work-items/{victim_item}", headers=admin).json()["phase"] == "active"
    own_item = ids[OWN][0]
    assert client.post(f"/api/work-items/{own_item}/cancel", headers=reader).status_code == 403
    assert client.post(f"/api/work-items/{own_item}/cancel", headers=ci).status_code == 200


def test_history_is_scoped_like_the_item(client, issuer, key):
    admin, ci = token(issuer, key, ADMIN_SUB), ci_job(issuer, key)
    mine = client.post("/api/work-items/mr", json=submission(OWN), headers=ci).json()["id"]
    theirs = client.post(
        "/api/work-items/mr", json=submission(VICTIM, "workqueue/hist"), headers=admin
    ).json()["id"]
    own = client.get(f"/api/work-items/{mine}/history", headers=ci)
    assert own.status_code == 200
    refused = client.get(f"/api/work-items/{theirs}/history", headers=ci)
    assert refused.status_code == 403
    assert "may not read mr items in project victim/prod" in refused.json()["detail"]
    assert client.get(f"/api/work-items/{theirs}/history", headers=admin).status_code == 200
    assert client.get(f"/api/work-items/{uuid.uuid4()}/history", headers=ci).status_code == 404


def test_claims_are_compared_exactly(client, issuer, key):
    body = submission(OWN, "workqueue/exact")
    for ref in ("Main", "MAIN", "main "):
        refused = client.post(
            "/api/work-items/mr", json=body, headers=token(issuer, key, MAIN_ONLY, ref=ref)
        )
        assert refused.status_code == 403, ref
    allowed = client.post(
        "/api/work-items/mr", json=body, headers=token(issuer, key, MAIN_ONLY, ref="main")
    )
    assert allowed.status_code == 201, allowed.text


def test_another_callers_live_item_is_not_theirs_to_update(client, issuer, key):
    admin, other = token(issuer, key, ADMIN_SUB), token(issuer, key, OTHER_BOT)
    first = client.post("/api/work-items/mr", json=submission(OWN), headers=admin)
    assert first.status_code == 201
    before = client.get(f"/api/work-items/{first.json()['id']}", headers=admin).json()

    taken = client.post("/api/work-items/mr", json=submission(OWN, title="Mine now"), headers=other)
    assert taken.status_code == 409
    assert "belongs to another caller" in taken.json()["detail"]
    after = client.get(f"/api/work-items/{first.json()['id']}", headers=admin).json()
    assert after == before
    # The same subject from another issuer is someone else as well.
    stranger = LocalIssuer()
    stranger.publish(key)
    stranger.start()
    try:
        forged = sign(claims_for(stranger.issuer, sub=ADMIN_SUB, aud="workqueue-service"), key)
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, title="x"),
            headers={"Authorization": f"Bearer {forged}"},
        )
        assert answer.status_code == 401  # not a configured issuer at all
    finally:
        stranger.stop()


def test_two_callers_racing_on_one_branch_get_one_owner(client, issuer, key):
    callers = {ADMIN_SUB: token(issuer, key, ADMIN_SUB), OTHER_BOT: token(issuer, key, OTHER_BOT)}
    statuses: Counter[tuple[str, int]] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(8)

    def one(sub: str, n: int) -> None:
        start.wait()
        answer = client.post(
            "/api/work-items/mr", json=submission(OWN, title=f"t{n % 2}"), headers=callers[sub]
        )
        with lock:
            statuses[sub, answer.status_code] += 1

    threads = [threading.Thread(target=one, args=(sub, n)) for n in range(4) for sub in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    items = client.get("/api/work-items", headers=callers[ADMIN_SUB]).json()["items"]
    assert len(items) == 1
    owner = items[0]["caller_identity"]
    loser = next(sub for sub in callers if sub != owner)
    assert statuses[loser, 409] == 4
    assert statuses[owner, 201] == 1
    assert sum(count for (sub, _), count in statuses.items() if sub == owner) == 4
    assert all(code in {200, 201} for (sub, code) in statuses if sub == owner)


def test_retrying_an_older_generation_while_a_newer_one_is_live_is_409(client, issuer, key):
    admin = token(issuer, key, ADMIN_SUB)
    first = client.post("/api/work-items/mr", json=submission(OWN), headers=admin).json()
    assert client.post(f"/api/work-items/{first['id']}/cancel", headers=admin).status_code == 200
    second = client.post("/api/work-items/mr", json=submission(OWN), headers=admin)
    assert second.status_code == 201
    assert second.json()["generation"] == 2

    refused = client.post(f"/api/work-items/{first['id']}/retry", headers=admin)
    assert refused.status_code == 409
    assert second.json()["id"] in refused.json()["detail"]
    assert client.get(f"/api/work-items/{first['id']}", headers=admin).json()["phase"] == (
        "cancelled"
    )
    # The branch still has exactly one live item, and submissions keep working.
    again = client.post("/api/work-items/mr", json=submission(OWN, title="v3"), headers=admin)
    assert again.status_code == 200
    assert again.json()["id"] == second.json()["id"]
    assert again.json()["outcome"] == "updated"


@pytest.fixture
def limited_client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        limits={"submissions_per_minute_per_caller": 4, "max_live_items_per_caller": 2},
        process_items=False,
    ) as test_client:
        yield test_client


def test_per_caller_limits_answer_429_with_retry_after(limited_client, issuer, key):
    client = limited_client
    admin, other = token(issuer, key, ADMIN_SUB), token(issuer, key, OTHER_BOT)
    assert (
        client.post(
            "/api/work-items/mr", json=submission(OWN, "workqueue/a"), headers=admin
        ).status_code
        == 201
    )
    assert (
        client.post(
            "/api/work-items/mr", json=submission(OWN, "workqueue/b"), headers=admin
        ).status_code
        == 201
    )
    # A third live item is over the live-item limit; updating a held one is fine.
    third = client.post("/api/work-items/mr", json=submission(OWN, "workqueue/c"), headers=admin)
    assert third.status_code == 429
    assert third.headers["retry-after"] == "60"
    assert third.json()["detail"].startswith(
        f"max_live_items_per_caller (2) reached for {ADMIN_SUB}"
    )
    updated = client.post(
        "/api/work-items/mr", json=submission(OWN, "workqueue/a", title="v2"), headers=admin
    )
    assert updated.status_code == 200
    # Five submissions this minute: over the rate, whatever they contain.
    limited = client.post("/api/work-items/mr", json=submission(OWN, "workqueue/a"), headers=admin)
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert limited.json()["detail"].startswith(
        f"submissions_per_minute_per_caller (4) reached for {ADMIN_SUB}"
    )
    # Limits are per caller.
    assert (
        client.post(
            "/api/work-items/mr", json=submission(OWN, "workqueue/d"), headers=other
        ).status_code
        == 201
    )
    items = client.get("/api/work-items", headers=admin).json()["items"]
    assert len(items) == 3
