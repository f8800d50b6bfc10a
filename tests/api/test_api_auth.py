"""Authentication and authorization at the HTTP boundary, with a real local OIDC issuer."""

from __future__ import annotations

import pytest
from api_harness import build_client
from auth_support import LocalIssuer, claims_for, sign
from mr_harness import PROJECT

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/auth-test",
    "title": "t",
    "commit_message": "m",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v9\n"}],
}
BOT_SUB = "system:serviceaccount:ci:bot"
READER_SUB = "system:serviceaccount:ci:reader"
OTHER_SUB = "system:serviceaccount:ci:other-type"


def rules(issuer_url: str) -> tuple[dict, ...]:
    def rule(sub, permissions, **extra):
        return {
            "issuer": issuer_url,
            "claims": {"aud": "workqueue-service", "sub": sub},
            "permissions": permissions,
            **extra,
        }

    return (
        rule(BOT_SUB, ["read", "submit", "retry"], item_types=["mr"], projects=["**"]),
        rule(READER_SUB, ["read"]),
        rule(OTHER_SUB, ["read", "submit"], item_types=["trunk"], projects=["**"]),
    )


@pytest.fixture
def client(database_url, simulator, issuer):
    with build_client(database_url, simulator, local_user=None, rules=rules(issuer.issuer)) as c:
        yield c


def bearer(issuer: LocalIssuer, key, sub: str, **claims) -> dict[str, str]:
    token = sign(claims_for(issuer.issuer, sub=sub, aud="workqueue-service", **claims), key)
    return {"Authorization": f"Bearer {token}"}


def test_no_credentials_is_401_and_proxy_headers_are_not_trusted(client):
    for headers in (
        {},
        {"X-Forwarded-User": "admin"},
        {"X-Forwarded-Access-Token": "sha256~abc", "X-Forwarded-User": "admin"},
        {"Cookie": "_oauth_proxy=abc"},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
    ):
        answer = client.get("/api/work-items", headers=headers)
        assert answer.status_code == 401, headers
        assert answer.headers["www-authenticate"] == "Bearer"
    assert client.post("/api/work-items/mr", json=SUBMIT).status_code == 401


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": 1},  # expired
        {"aud": "another-service"},  # token meant for someone else
        {"iss": "https://untrusted.example"},
    ],
)
def test_invalid_tokens_are_401(client, issuer, key, claims):
    token = sign(
        claims_for(issuer.issuer, sub=BOT_SUB, **{"aud": "workqueue-service", **claims}), key
    )
    answer = client.get("/api/work-items", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    assert token not in answer.text


def test_permissions_come_from_matching_rules(client, issuer, key):
    bot, reader = bearer(issuer, key, BOT_SUB), bearer(issuer, key, READER_SUB)
    created = client.post("/api/work-items/mr", json=SUBMIT, headers=bot)
    assert created.status_code == 201, created.text
    assert created.json()["caller_identity"] == BOT_SUB
    item_id = created.json()["id"]

    refused = client.post("/api/work-items/mr", json=SUBMIT, headers=reader)
    assert refused.status_code == 403
    assert "may not submit" in refused.json()["detail"]
    assert client.get(f"/api/work-items/{item_id}", headers=reader).status_code == 200
    assert len(client.get("/api/work-items", headers=reader).json()["items"]) == 1
    assert client.post(f"/api/work-items/{item_id}/cancel", headers=reader).status_code == 403
    assert client.post(f"/api/work-items/{item_id}/cancel", headers=bot).status_code == 200


def test_item_type_scoping_hides_other_types(client, issuer, key):
    bot, other = bearer(issuer, key, BOT_SUB), bearer(issuer, key, OTHER_SUB)
    item_id = client.post("/api/work-items/mr", json=SUBMIT, headers=bot).json()["id"]
    assert client.get(f"/api/work-items/{item_id}", headers=other).status_code == 403
    assert client.get("/api/work-items/mr", headers=other).status_code == 403
    assert client.post("/api/work-items/mr", json=SUBMIT, headers=other).status_code == 403
    # Listing all types shows only what the caller may read: nothing of type mr.
    assert client.get("/api/work-items", headers=other).json()["items"] == []
