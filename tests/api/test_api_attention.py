"""Attention queues over HTTP: listing, paging, manual add/remove, and project scoping."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_harness import build_client
from auth_support import LocalIssuer, claims_for, sign

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "attention"))
from attention_support import create_mr, members

OWN = "team/app"
VICTIM = "victim/prod"
CI_SUB = "project_path:team/app:ref_type:branch:ref:main"
ADMIN_SUB = "system:serviceaccount:ops:admin"


def rules(issuer_url: str) -> tuple[dict[str, Any], ...]:
    base = {"issuer": issuer_url}
    return (
        {
            **base,
            "claims": {"aud": "workqueue-service", "namespace_path": "team"},
            "permissions": ["read", "retry"],
            "projects": ["{project_path}"],
        },
        {
            **base,
            "claims": {"aud": "workqueue-service", "sub": ADMIN_SUB},
            "permissions": ["read", "retry"],
            "projects": ["**"],
        },
    )


def token(issuer: LocalIssuer, key, sub: str, **claims: Any) -> dict[str, str]:
    signed = sign(claims_for(issuer.issuer, sub=sub, aud="workqueue-service", **claims), key)
    return {"Authorization": f"Bearer {signed}"}


@pytest.fixture
def scoped(database_url, simulator, issuer) -> Iterator[Any]:
    with build_client(database_url, simulator, local_user=None, rules=rules(issuer.issuer)) as c:
        yield c


def test_queues_items_add_remove_and_statuses(scoped, sessions, issuer, key):
    admin = token(issuer, key, ADMIN_SUB)
    with sessions() as session:
        own = create_mr(session, OWN)
        other = create_mr(session, VICTIM)
        session.commit()
    answer = scoped.get("/api/queues", headers=admin)
    assert answer.status_code == 200
    names = [queue["name"] for queue in answer.json()["items"]]
    assert names == [
        "needs-human",
        "needs-review",
        "conflicts",
        "held",
        "red-ci",
        "red-checks",
        "red-trunk",
    ]
    assert answer.json()["next_cursor"] is None

    add = scoped.post(
        "/api/queues/needs-human/items", json={"work_item_id": str(own)}, headers=admin
    )
    assert add.status_code == 201
    assert add.json()["added_by"] == ADMIN_SUB
    again = scoped.post(
        "/api/queues/needs-human/items", json={"work_item_id": str(own)}, headers=admin
    )
    assert again.status_code == 200
    assert members(sessions, "needs-human") == {own}

    page = scoped.get("/api/queues/needs-human/items", headers=admin).json()
    assert [item["id"] for item in page["items"]] == [str(own)]
    assert page["items"][0]["membership"]["added_by"] == ADMIN_SUB
    assert "file_actions" in page["items"][0]["details"]

    assert scoped.get("/api/queues/nope/items", headers=admin).status_code == 404
    unknown = scoped.post(
        "/api/queues/needs-human/items",
        json={"work_item_id": "00000000-0000-0000-0000-000000000000"},
        headers=admin,
    )
    assert unknown.status_code == 404
    assert scoped.delete(f"/api/queues/needs-human/items/{other}", headers=admin).status_code == 404
    assert scoped.delete(f"/api/queues/needs-human/items/{own}", headers=admin).status_code == 204
    assert scoped.delete(f"/api/queues/needs-human/items/{own}", headers=admin).status_code == 404
    assert members(sessions, "needs-human") == set()


def test_scoped_callers_see_and_change_only_their_project(scoped, sessions, issuer, key):
    admin = token(issuer, key, ADMIN_SUB)
    ci = token(issuer, key, CI_SUB, namespace_path="team", project_path=OWN)
    with sessions() as session:
        own = create_mr(session, OWN)
        victim = create_mr(session, VICTIM)
        session.commit()
    for item in (own, victim):
        answer = scoped.post(
            "/api/queues/needs-human/items", json={"work_item_id": str(item)}, headers=admin
        )
        assert answer.status_code == 201
    sizes = {q["name"]: q["size"] for q in scoped.get("/api/queues", headers=ci).json()["items"]}
    assert sizes["needs-human"] == 1  # the victim's member is not counted for this caller
    admin_sizes = scoped.get("/api/queues", headers=admin).json()["items"]
    assert admin_sizes[0]["size"] == 2
    listed = scoped.get("/api/queues/needs-human/items", headers=ci).json()["items"]
    assert [item["id"] for item in listed] == [str(own)]
    refused = scoped.delete(f"/api/queues/needs-human/items/{victim}", headers=ci)
    assert refused.status_code == 403
    refused_add = scoped.post(
        "/api/queues/needs-review/items", json={"work_item_id": str(victim)}, headers=ci
    )
    assert refused_add.status_code == 403
    assert members(sessions, "needs-human") == {own, victim}
    assert scoped.delete(f"/api/queues/needs-human/items/{own}", headers=ci).status_code == 204
    assert scoped.get("/api/queues", headers={}).status_code == 401
