"""`POST /api/signals`: who may report a check, what a report must look like, and what
it does to an MR item (the merge gate), through the real app and real tokens."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa
from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT
from scoping_support import submission, token

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

REPORTER = "system:serviceaccount:konflux:build-reporter"
SUBMITTER = "system:serviceaccount:ops:bot"
READER = "system:serviceaccount:ops:reader"
SHA = "a" * 40
HOOK_SECRET = "hook-secret"


def rules(issuer_url: str) -> tuple[dict[str, object], ...]:
    def rule(sub: str, permissions: list[str], projects: list[str]) -> dict[str, object]:
        return {
            "issuer": issuer_url,
            "claims": {"aud": "workqueue-service", "sub": sub},
            "permissions": permissions,
            "projects": projects,
        }

    return (
        rule(REPORTER, ["report"], [PROJECT]),
        rule(SUBMITTER, ["read", "submit", "retry"], ["**"]),
        rule(READER, ["read"], ["**"]),
    )


@pytest.fixture
def client(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    handled = {"mr": {"gitlab_url": simulator.url, "checks": {"before_merge": ["scan"]}}}
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=rules(issuer.issuer),
        handled_types=handled,
        webhook_secret=HOOK_SECRET,
    ) as test_client:
        yield test_client


def signal(**overrides: object) -> dict[str, object]:
    return {
        "project": PROJECT,
        "sha": SHA,
        "name": "scan",
        "status": "success",
        "url": "https://ci.example/runs/1",
        **overrides,
    }


def stored(database_url) -> list[tuple[str, str, str]]:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return [
                tuple(row)
                for row in connection.execute(
                    sa.text("SELECT sha, variant, status FROM check_signals ORDER BY sha, variant")
                )
            ]
    finally:
        engine.dispose()


def test_a_reporter_reports_and_a_resend_is_a_duplicate(client, issuer, key, database_url):
    reporter = {**token(issuer, key, REPORTER), "Idempotency-Key": "run-1"}
    first = client.post("/api/signals", json=signal(), headers=reporter)
    assert (first.status_code, first.json()) == (202, {"status": "accepted"})
    again = client.post("/api/signals", json=signal(status="failed"), headers=reporter)
    assert (again.status_code, again.json()) == (202, {"status": "duplicate"})
    assert stored(database_url) == [(SHA, "", "success")]
    # Without a key a report is always accepted; an older one changes nothing.
    older = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    late = client.post(
        "/api/signals",
        json=signal(status="failed", timestamp=older),
        headers=token(issuer, key, REPORTER),
    )
    assert (late.status_code, late.json()) == (202, {"status": "accepted"})
    assert stored(database_url) == [(SHA, "", "success")]


@pytest.mark.parametrize(
    ("sub", "project"),
    [
        (SUBMITTER, PROJECT),  # submit, retry and read, but no report
        (READER, PROJECT),
        (REPORTER, "victim/prod"),  # report, but not on this project
        (REPORTER, PROJECT.upper()),  # patterns are exact: another spelling is out of scope
    ],
)
def test_a_token_without_report_on_the_project_is_refused_and_nothing_changes(
    client, issuer, key, database_url, sub, project
):
    refused = client.post(
        "/api/signals", json=signal(project=project), headers=token(issuer, key, sub)
    )
    assert refused.status_code == 403, refused.text
    assert f"may not report mr items in project {project}" in refused.json()["detail"]
    assert stored(database_url) == []


def test_no_token_is_401(client, database_url):
    assert client.post("/api/signals", json=signal()).status_code == 401
    assert stored(database_url) == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"sha": "abc123"}, "sha"),  # a short sha names no commit exactly
        ({"sha": SHA.upper()}, "sha"),
        ({"name": "Build!"}, "name"),
        ({"variant": "../api"}, "variant"),
        ({"status": "green"}, "status"),
        ({"url": "javascript:alert(1)"}, "url"),  # shown as a link in the dashboard
        ({"url": "https://ci.example/\nrun"}, "url"),
        ({"url": "https://ci.example/\x9b31m"}, "url"),  # a C1 control: printed by the CLI
        ({"url": "https://ci.example/\u202egnp.exe"}, "url"),  # a bidi override
        ({"description": "line\x00break"}, "description"),
        ({"timestamp": "2026-01-01T00:00:00"}, "timestamp"),  # no zone: ambiguous
        ({"timestamp": (datetime.now(UTC) + timedelta(days=365)).isoformat()}, "timestamp"),
        # before year 1 in UTC: PostgreSQL stores it BC and no read of the commit works
        ({"timestamp": "0001-01-01T00:00:00+01:00"}, "timestamp"),
        ({"timestamp": "1999-12-31T23:59:59+00:00"}, "timestamp"),  # no build reports so
        ({"extra": 1}, "extra"),
    ],
)
def test_bad_reports_are_422_naming_the_field(client, issuer, key, database_url, overrides, field):
    answer = client.post(
        "/api/signals", json=signal(**overrides), headers=token(issuer, key, REPORTER)
    )
    assert answer.status_code == 422, answer.text
    assert field in {str(part) for problem in answer.json()["detail"] for part in problem["loc"]}
    assert stored(database_url) == []


def test_a_report_lets_the_held_mr_merge(client, issuer, key, simulator: GitLabSimulator):
    bot = token(issuer, key, SUBMITTER)
    created = client.post("/api/work-items/mr", json=submission(PROJECT), headers=bot)
    assert created.status_code == 201, created.text
    item_id = created.json()["id"]

    def item() -> dict[str, object]:
        return client.get(f"/api/work-items/{item_id}", headers=bot).json()

    wait_until(lambda: item()["details"].get("mr_iid") is not None, what="the MR")
    iid = item()["details"]["mr_iid"]
    pipeline = simulator.create_pipeline(
        PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
    )
    hook = simulator.pipeline_hook(pipeline)
    headers = {"X-Gitlab-Event": "Pipeline Hook", "X-Gitlab-Token": HOOK_SECRET}
    assert client.post("/api/webhooks/gitlab", json=hook, headers=headers).status_code == 200
    wait_until(
        lambda: (item()["details"].get("merge_blocker") or {}).get("code") == "checks_pending",
        what="held by the check",
    )
    head = item()["details"]["mr_sha"]
    reported = client.post(
        "/api/signals", json=signal(sha=head), headers=token(issuer, key, REPORTER)
    )
    assert reported.status_code == 202
    wait_until(lambda: item()["phase"] == "completed", what="merged")
    assert simulator.merge_request(PROJECT, iid)["state"] == "merged"
