"""`POST /api/webhooks/tekton`: PipelineRun CloudEvents as Tekton's events controller and
Konflux send them, through the real app, real tokens and PostgreSQL.

Who may send (a bearer token with `report`, or the events secret in `?token=`
for the projects it is given), what the run must carry, and what a merged MR
item does with the builds it waits for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from api_harness import build_client
from cloudevents.conversion import to_binary
from harness import wait_until
from mr_harness import PROJECT
from scoping_support import submission, token
from tekton_sender import cloud_event, pipeline_run, send

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

REPORTER = "system:serviceaccount:konflux:build-reporter"
SUBMITTER = "system:serviceaccount:ops:bot"
SHA = "b" * 40
HOOK_SECRET = "hook-secret"
SECRET_ENV = "WQ_TEST_TEKTON_SECRET"
EVENTS_SECRET = "s3cret-for-the-events-controller"
AFTER_MERGE = {
    "checks": {
        "after_merge": [{"name": "build", "variants": ["api", "worker"], "timeout_seconds": 120}]
    }
}


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
    )


@pytest.fixture
def client(database_url, simulator, issuer, monkeypatch) -> Iterator[httpx.Client]:
    monkeypatch.setenv(SECRET_ENV, EVENTS_SECRET)
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=rules(issuer.issuer),
        handled_types={"mr": {"gitlab_url": simulator.url, **AFTER_MERGE}},
        webhook_secret=HOOK_SECRET,
        signals={
            "tekton": {
                "secret_env": SECRET_ENV,
                "namespaces": {"team-tenant": [PROJECT], "shared-ci": ["group/**"]},
            }
        },
    ) as test_client:
        yield test_client


def run(**overrides: object) -> dict[str, object]:
    return pipeline_run(**{"project": PROJECT, **overrides})  # type: ignore[arg-type]


def stored(database_url) -> list[tuple[str, ...]]:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT project, sha, name, variant, status, coalesce(url, ''), reporter "
                    "FROM check_signals ORDER BY variant"
                )
            )
            return [tuple(row) for row in rows]
    finally:
        engine.dispose()


def test_a_binary_event_with_a_report_token_is_stored(client, issuer, key, database_url):
    event = cloud_event(run(sha=SHA, component="api"))
    answer = send(client, event, headers=token(issuer, key, REPORTER))
    assert (answer.status_code, answer.json()) == (202, {"status": "accepted", "signals": 1})
    assert stored(database_url) == [
        (
            PROJECT,
            SHA,
            "build",
            "api",
            "success",
            "https://konflux.example/ns/pipelinerun/build-1",
            REPORTER,
        )
    ]


def test_a_structured_event_with_the_secret_is_stored(client, database_url):
    data = run(sha=SHA, component="worker", repo_url=True, reason="Failed")
    answer = send(client, cloud_event(data, "failed"), structured=True, token=EVENTS_SECRET)
    assert (answer.status_code, answer.json()) == (202, {"status": "accepted", "signals": 1})
    [row] = stored(database_url)
    assert row[:5] == (PROJECT, SHA, "build", "worker", "failed")
    assert row[6] == "workqueue:tekton-secret"


def test_a_cancelled_run_is_canceled(client, database_url):
    data = run(sha=SHA, reason="Cancelled")
    assert send(client, cloud_event(data, "failed"), token=EVENTS_SECRET).status_code == 202
    assert [row[4] for row in stored(database_url)] == ["canceled"]


def test_the_same_event_resent_is_a_duplicate(client, database_url):
    event = cloud_event(run(sha=SHA), event_id="delivery-7")
    assert send(client, event, token=EVENTS_SECRET).json()["status"] == "accepted"
    again = send(client, event, token=EVENTS_SECRET)
    assert (again.status_code, again.json()) == (202, {"status": "duplicate", "signals": 1})
    assert len(stored(database_url)) == 1


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (run(sha=SHA, event_type="pull_request"), "successful"),  # not a push build
        ({"taskRun": {"metadata": {"name": "t"}}}, "successful"),  # no PipelineRun
    ],
)
def test_runs_no_check_takes_are_ignored(client, database_url, data, reason):
    answer = send(client, cloud_event(data, reason), token=EVENTS_SECRET)
    assert (answer.status_code, answer.json()) == (202, {"status": "ignored", "signals": 0})
    assert stored(database_url) == []


def test_a_taskrun_event_is_ignored(client, database_url):
    event = cloud_event(run(sha=SHA))
    event["type"] = "dev.tekton.event.taskrun.successful.v1"
    answer = send(client, event, token=EVENTS_SECRET)
    assert (answer.status_code, answer.json()) == (202, {"status": "ignored", "signals": 0})
    assert stored(database_url) == []


@pytest.mark.parametrize(
    "credentials",
    [
        {},  # nothing
        {"token": "s3cret-for-the-events-controllex"},  # a wrong secret
        {"token": EVENTS_SECRET.upper()},
        {"headers": {"Authorization": "Bearer not-a-token"}},
    ],
)
def test_without_a_valid_credential_it_is_401_and_nothing_is_stored(
    client, database_url, credentials
):
    answer = send(client, cloud_event(run(sha=SHA)), **credentials)
    assert answer.status_code == 401, answer.text
    assert stored(database_url) == []


def test_the_secret_twice_is_refused(client, database_url):
    body = cloud_event(run(sha=SHA))
    headers, content = to_binary(body)
    headers["content-type"] = "application/json"
    answer = client.post(
        f"/api/webhooks/tekton?token={EVENTS_SECRET}&token={EVENTS_SECRET}",
        content=content,
        headers=headers,
    )
    assert answer.status_code == 401
    assert stored(database_url) == []


@pytest.mark.parametrize("project", ["victim/prod", PROJECT.upper()])
def test_out_of_scope_is_403_and_nothing_is_stored(client, issuer, key, database_url, project):
    event = cloud_event(run(sha=SHA, project=project))
    with_secret = send(client, event, token=EVENTS_SECRET)
    assert with_secret.status_code == 403, with_secret.text
    assert project in with_secret.json()["detail"]
    with_token = send(client, event, headers=token(issuer, key, REPORTER))
    assert with_token.status_code == 403, with_token.text
    assert stored(database_url) == []


def test_the_secret_reports_for_a_namespace_only_on_its_projects(client, database_url):
    """Tenants write their own PipelineRuns, annotations and all: a run in another
    tenant's namespace naming this project is refused, though the sender holds the secret."""
    forged = run(sha=SHA)
    forged["pipelineRun"]["metadata"]["namespace"] = "evil-tenant"
    answer = send(client, cloud_event(forged), token=EVENTS_SECRET)
    assert answer.status_code == 403, answer.text
    assert "evil-tenant" in answer.json()["detail"]
    del forged["pipelineRun"]["metadata"]["namespace"]
    assert send(client, cloud_event(forged), token=EVENTS_SECRET).status_code == 403
    assert stored(database_url) == []
    shared = run(sha=SHA)
    shared["pipelineRun"]["metadata"]["namespace"] = "shared-ci"
    assert send(client, cloud_event(shared), token=EVENTS_SECRET).status_code == 202
    assert len(stored(database_url)) == 1


def test_a_token_without_report_is_403(client, issuer, key, database_url):
    event = cloud_event(run(sha=SHA))
    answer = send(client, event, headers=token(issuer, key, SUBMITTER))
    assert answer.status_code == 403, answer.text
    assert stored(database_url) == []


@pytest.mark.parametrize(
    ("body", "headers", "field"),
    [
        (b"{not json", {"content-type": "application/cloudevents+json"}, "body"),
        (b"{}", {"content-type": "application/json"}, "body"),  # no ce-* attributes
    ],
)
def test_what_is_no_cloudevent_is_422(client, database_url, body, headers, field):
    answer = client.post(
        "/api/webhooks/tekton", content=body, headers=headers, params={"token": EVENTS_SECRET}
    )
    assert answer.status_code in {400, 422}, answer.text
    assert stored(database_url) == []


def test_a_run_without_its_commit_is_422_naming_it(client, database_url):
    data = run(sha=SHA)
    del data["pipelineRun"]["metadata"]["annotations"]["pipelinesascode.tekton.dev/sha"]
    answer = send(client, cloud_event(data), token=EVENTS_SECRET)
    assert answer.status_code == 422, answer.text
    assert "sha" in {str(part) for problem in answer.json()["detail"] for part in problem["loc"]}
    assert stored(database_url) == []


def test_the_secret_never_reaches_a_log(client, database_url, caplog):
    access = logging.getLogger("uvicorn.access")
    level = access.level
    access.setLevel(logging.INFO)
    access.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    try:
        ok = send(client, cloud_event(run(sha=SHA)), token=EVENTS_SECRET)
        wrong = send(client, cloud_event(run(sha=SHA)), token=EVENTS_SECRET + "x")
        refused = send(
            client, cloud_event(run(sha=SHA, project="victim/prod")), token=EVENTS_SECRET
        )
    finally:
        access.removeHandler(caplog.handler)
        access.setLevel(level)
    assert (ok.status_code, wrong.status_code, refused.status_code) == (202, 401, 403)
    # The service's lines, the access log's included; the test's own client logs its URLs.
    service = [
        record.getMessage()
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    ]
    assert any("/api/webhooks/tekton" in line for line in service)  # the access log saw them
    assert not [line for line in service if EVENTS_SECRET in line]


def test_a_merged_item_completes_when_both_components_built(
    client, issuer, key, simulator: GitLabSimulator
):
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
    hooks = {"X-Gitlab-Event": "Pipeline Hook", "X-Gitlab-Token": HOOK_SECRET}
    hook = simulator.pipeline_hook(pipeline)
    assert client.post("/api/webhooks/gitlab", json=hook, headers=hooks).status_code == 200
    wait_until(lambda: item()["details"].get("post_merge") is not None, what="merged, waiting")
    assert item()["phase"] == "active"
    merge_sha = item()["details"]["post_merge"]["merge_commit_sha"]
    assert merge_sha == simulator.merge_request(PROJECT, iid)["merge_commit_sha"]

    api = cloud_event(run(sha=merge_sha, component="api"))
    assert send(client, api, token=EVENTS_SECRET).status_code == 202
    wait_until(
        lambda: (
            [c["status"] for c in item()["details"]["post_merge"]["checks"]]
            == ["success", "pending"]
        ),
        what="api built, worker still expected",
    )
    assert item()["phase"] == "active"
    worker = cloud_event(run(sha=merge_sha, component="worker"))
    assert send(client, worker, headers=token(issuer, key, REPORTER)).status_code == 202
    wait_until(lambda: item()["phase"] == "completed", what="completed after both builds")
    assert item()["details"]["completion_reason"] == "merged"


def test_without_a_credential_the_body_is_never_read(client, database_url):
    """401 before the body: no buffering, no JSON parse for a sender without a credential."""
    bad_json = client.post(
        "/api/webhooks/tekton", content=b"{bad", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 401, bad_json.text
    huge = client.post(
        "/api/webhooks/tekton",
        content=b"x" * (17 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert huge.status_code == 401, huge.text
    assert stored(database_url) == []


def test_a_body_over_its_limit_is_413_with_a_credential(client, database_url):
    big = client.post(
        "/api/webhooks/tekton",
        params={"token": EVENTS_SECRET},
        content=b"x" * (3 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413, big.text
    assert stored(database_url) == []


def test_over_the_failed_authentication_budget_a_bearer_is_429(client):
    event = cloud_event(run(sha=SHA))
    bad = {"Authorization": "Bearer not-a-token"}
    for _ in range(30):
        assert send(client, event, headers=bad).status_code == 401
    answer = send(client, event, headers=bad)
    assert answer.status_code == 429, answer.text
    assert "retry-after" in answer.headers


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/webhooks/tekton/"),  # a sink configured with a trailing slash
        ("GET", "/api/webhooks/tekton"),
        ("HEAD", "/api/webhooks/tekton"),
        ("PUT", "/api/webhooks/tekton"),
        ("POST", "/api/webhooks/gitlab"),  # the secret sent to the wrong receiver
    ],
)
def test_the_secret_is_never_logged_on_a_near_miss(client, caplog, method, path):
    access = logging.getLogger("uvicorn.access")
    level = access.level
    access.setLevel(logging.INFO)
    access.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    headers, content = to_binary(cloud_event(run(sha=SHA)))
    headers["content-type"] = "application/json"
    try:
        client.request(
            method,
            path,
            params={"token": EVENTS_SECRET},
            content=content if method in {"POST", "PUT"} else None,
            headers=headers,
        )
    finally:
        access.removeHandler(caplog.handler)
        access.setLevel(level)
    service = [
        record.getMessage()
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    ]
    assert any(path.rstrip("/") in line for line in service)  # the access log saw it
    assert not [line for line in service if EVENTS_SECRET in line]


def test_a_malformed_event_is_not_echoed_back(client):
    body = b"x" * 2000
    answer = client.post(
        "/api/webhooks/tekton",
        params={"token": EVENTS_SECRET},
        content=body,
        headers={"content-type": "text/plain", "ce-specversion": "1.0"},
    )
    assert answer.status_code == 422, answer.text
    assert "x" * 100 not in answer.text
