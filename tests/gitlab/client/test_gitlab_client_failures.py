"""Failures over real HTTP: classification, one request per call, no leaked token, on_call."""

from __future__ import annotations

import logging
import time

import gitlab
import pytest
from gitlab_client_support import PROJECT, TOKEN

from workqueue.gitlab import (
    GitLabClient,
    GitLabError,
    PermanentGitLabError,
    RetryableGitLabError,
)
from workqueue.testing.gitlab_simulator import JobSpec

PROJECT_ROUTE = "/projects/:id"

ACTIONS = [{"action": "update", "file_path": "README.md", "content": "x\n"}]

# Every public operation, with arguments that would succeed on a healthy server.
OPERATIONS = {
    "project": lambda c, _w: c.project(PROJECT),
    "branch": lambda c, _w: c.branch(PROJECT, "main"),
    "delete_branch": lambda c, _w: c.delete_branch(PROJECT, "bot/x"),
    "commit": lambda c, _w: c.commit(
        PROJECT, branch="bot/y", start_branch="main", message="m", actions=ACTIONS
    ),
    "compare": lambda c, _w: c.compare(PROJECT, "main", "bot/x"),
    "open_merge_requests": lambda c, _w: c.open_merge_requests(PROJECT, "bot/x"),
    "merge_request": lambda c, w: c.merge_request(PROJECT, w["mr"]),
    "create_merge_request": lambda c, _w: c.create_merge_request(
        PROJECT, source_branch="bot/z", target_branch="main", title="t"
    ),
    "update_merge_request": lambda c, w: c.update_merge_request(PROJECT, w["mr"], title="t2"),
    "close_merge_request": lambda c, w: c.close_merge_request(PROJECT, w["mr"]),
    "merge": lambda c, w: c.merge(PROJECT, w["mr"], sha=w["sha"]),
    "add_note": lambda c, w: c.add_note(PROJECT, w["mr"], "hi"),
    "pipeline": lambda c, w: c.pipeline(PROJECT, w["pipeline"]),
    "pipeline_jobs": lambda c, w: c.pipeline_jobs(PROJECT, w["pipeline"]),
    "job": lambda c, w: c.job(PROJECT, w["job"]),
    "retry_job": lambda c, w: c.retry_job(PROJECT, w["job"]),
    "job_trace_tail": lambda c, w: c.job_trace_tail(PROJECT, w["job"], 100),
}

# The `on_call` operation name of each method.
OPERATION_NAMES = {
    "project": "projects.get",
    "branch": "branches.get",
    "delete_branch": "branches.delete",
    "commit": "commits.create",
    "compare": "repository.compare",
    "open_merge_requests": "merge_requests.list",
    "merge_request": "merge_requests.get",
    "create_merge_request": "merge_requests.create",
    "update_merge_request": "merge_requests.update",
    "close_merge_request": "merge_requests.close",
    "merge": "merge_requests.merge",
    "add_note": "notes.create",
    "pipeline": "pipelines.get",
    "pipeline_jobs": "pipeline_jobs.list",
    "job": "jobs.get",
    "retry_job": "jobs.retry",
    "job_trace_tail": "jobs.trace",
}


@pytest.fixture
def world(sim, project_id):
    """A branch with an open MR, a pipeline with a failed job: every operation can succeed."""
    sim.push(project_id, "bot/x", {"README.md": "changed\n"})
    sim.push(project_id, "bot/z", {"README.md": "other\n"})
    iid = sim.create_merge_request(project_id, "bot/x", "t")
    pipeline = sim.create_pipeline(
        project_id, merge_request_iid=iid, jobs=[JobSpec("unit", status="failed", trace="log\n")]
    )
    [job] = sim.jobs(pipeline)
    sim.reset_requests()
    return {
        "mr": iid,
        "sha": sim.branch_head(project_id, "bot/x"),
        "pipeline": pipeline,
        "job": job["id"],
    }


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_succeeds_in_one_request_without_retry_params(
    sim, client, world, calls, operation
):
    OPERATIONS[operation](client, world)
    records = sim.log.records()
    assert len(records) == 1
    assert calls.calls == [(OPERATION_NAMES[operation], records[0].status)]
    for record in records:
        assert not {"obey_rate_limit", "max_retries", "retry_transient_errors", "timeout"} & set(
            record.query
        )


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize(
    "case",
    [
        ({"status": 500}, RetryableGitLabError, 500),
        ({"status": 503, "headers": {"Retry-After": "2"}}, RetryableGitLabError, 503),
        ({"status": 429}, RetryableGitLabError, 429),
        ({"disconnect": True}, RetryableGitLabError, None),
        ({"status": 403}, PermanentGitLabError, 403),
        ({"status": 200, "body": b"<html>proxy</html>"}, None, None),
        ({"status": 200, "body": ["not", "an", "object"]}, None, None),
        ({"status": 200, "body": {"not": "a list"}}, None, None),
    ],
    ids=["500", "503", "429", "disconnect", "403", "html-200", "list-200", "object-200"],
)
def test_every_operation_classifies_failures_after_exactly_one_request(
    sim, client, world, operation, case
):
    fault, kind, status = case
    rule = sim.inject_fault("*", "*", times=None, **fault)
    if fault.get("status") == 200:
        # A 2xx the client cannot read: raw bodies (delete, trace) are fine, JSON is not.
        if operation in {"delete_branch", "job_trace_tail"}:
            OPERATIONS[operation](client, world)
            return
        kind = RetryableGitLabError if isinstance(fault["body"], bytes) else PermanentGitLabError
    with pytest.raises(kind) as caught:
        OPERATIONS[operation](client, world)
    error = caught.value
    assert error.status == status
    assert error.operation == OPERATION_NAMES[operation]
    assert error.__cause__ is None
    assert error.__context__ is None
    assert rule.hits == 1  # python-gitlab did not retry
    if status == 503:
        assert error.retry_after == 2.0
    assert TOKEN not in repr(error)


def test_429_with_retry_after_is_retryable_after_one_request(sim, client, calls):
    sim.inject_fault("GET", PROJECT_ROUTE, status=429, headers={"Retry-After": "7"})
    with pytest.raises(RetryableGitLabError) as caught:
        client.project(PROJECT)
    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    assert caught.value.message == "Retry later"
    assert sim.request_count() == 1
    assert calls.calls == [("projects.get", 429)]
    # The fault is used up: the next call succeeds.
    assert client.project(PROJECT).path_with_namespace == PROJECT


def test_python_gitlab_alone_would_have_retried_the_429(sim, project_id):
    """Why the client passes obey_rate_limit=False: python-gitlab's default retries 429."""
    sim.inject_fault("GET", PROJECT_ROUTE, status=429)  # Retry-After: 0
    with gitlab.Gitlab(sim.url, private_token=TOKEN, retry_transient_errors=False) as raw:
        assert raw.projects.get(PROJECT).id == project_id
    assert [record.status for record in sim.log.records()] == [429, 200]


def test_a_prebuilt_gitlab_with_retries_on_still_makes_one_request(sim, project_id):
    sim.inject_fault("GET", PROJECT_ROUTE, status=502)
    with gitlab.Gitlab(sim.url, private_token=TOKEN, retry_transient_errors=True) as gl:
        client = GitLabClient(sim.url, TOKEN, timeout=5, gl=gl)
        with pytest.raises(RetryableGitLabError):
            client.project(PROJECT)
        assert sim.request_count() == 1
        client.close()
        assert client._transport._remember not in gl.session.hooks["response"]
        # The session was the caller's: still open and usable.
        assert gl.projects.get(PROJECT).id == project_id


def test_500_is_retryable_with_gitlabs_message(sim, client, calls):
    sim.inject_fault("POST", "/projects/:id/repository/commits", status=500)
    with pytest.raises(RetryableGitLabError) as caught:
        client.commit(PROJECT, branch="bot/x", start_branch="main", message="m", actions=ACTIONS)
    assert (caught.value.status, caught.value.message) == (500, "500 Internal Server Error")
    assert calls.calls == [("commits.create", 500)]


def test_connection_refused_is_retryable(make_client, closed_port, calls):
    client = make_client(url=f"http://127.0.0.1:{closed_port}", on_call=calls)
    with pytest.raises(RetryableGitLabError) as caught:
        client.project(PROJECT)
    assert caught.value.status is None
    assert caught.value.message.startswith("ConnectionError: ")
    assert calls.calls == [("projects.get", "connection_error")]


def wait_for_requests(sim, count, limit=5.0):
    """The slow handler logs its request only once it has slept: wait for it."""
    deadline = time.monotonic() + limit
    while sim.request_count() < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return sim.request_count()


def test_timeout_is_retryable(sim, make_client, project_id, calls):
    client = make_client(timeout=0.2, on_call=calls)
    rule = sim.inject_fault("GET", PROJECT_ROUTE, status=None, latency=0.4, times=None)
    with pytest.raises(RetryableGitLabError) as caught:
        client.project(PROJECT)
    assert caught.value.status is None
    assert "timed out" in caught.value.message
    assert calls.calls == [("projects.get", "timeout")]
    assert rule.hits == 1
    assert wait_for_requests(sim, 1) == 1


def test_403_and_404_are_permanent(sim, client, project_id):
    with pytest.raises(PermanentGitLabError) as missing:
        client.project("acme/unknown")
    assert (missing.value.status, missing.value.message) == (404, "404 Project Not Found")
    sim.inject_fault("GET", PROJECT_ROUTE, status=403)
    with pytest.raises(PermanentGitLabError) as forbidden:
        client.project(PROJECT)
    assert (forbidden.value.status, forbidden.value.message) == (403, "403 Forbidden")


def test_a_wrong_token_is_a_permanent_401(make_client, project_id):
    client = make_client(token="glpat-wrong-token")
    with pytest.raises(PermanentGitLabError) as caught:
        client.project(PROJECT)
    assert (caught.value.status, caught.value.message) == (401, "401 Unauthorized")
    assert "glpat-wrong-token" not in repr(caught.value)


def test_the_token_never_appears_in_errors(sim, client, make_client, closed_port, project_id):
    failures: list[GitLabError] = []

    def collect(call):
        with pytest.raises(GitLabError) as caught:
            call()
        failures.append(caught.value)

    collect(lambda: client.merge_request(PROJECT, 42))  # 404
    sim.inject_fault("GET", PROJECT_ROUTE, status=500)
    collect(lambda: client.project(PROJECT))
    sim.inject_fault("GET", PROJECT_ROUTE, status=429, headers={"Retry-After": "1"})
    collect(lambda: client.project(PROJECT))
    # A proxy that echoes the credential back in its error page.
    sim.inject_fault(
        "GET", PROJECT_ROUTE, status=400, body={"message": f"bad PRIVATE-TOKEN {TOKEN}"}
    )
    collect(lambda: client.project(PROJECT))
    sim.inject_fault("GET", PROJECT_ROUTE, status=502, body=f"<html>{TOKEN}</html>".encode())
    collect(lambda: client.project(PROJECT))
    collect(lambda: make_client(url=f"http://127.0.0.1:{closed_port}").project(PROJECT))
    sim.inject_fault("GET", PROJECT_ROUTE, status=None, latency=0.4)
    collect(lambda: make_client(timeout=0.2).project(PROJECT))
    wait_for_requests(sim, 6)  # all but the refused connection reached the simulator

    assert len(failures) == 7
    assert failures[3].message == "bad PRIVATE-TOKEN [REDACTED]"
    for failure in failures:
        for text in (str(failure), repr(failure), failure.message, str(failure.args)):
            assert TOKEN not in text
        assert failure.__context__ is None
    assert TOKEN not in repr(client)


def test_on_call_failures_never_break_the_operation(sim, make_client, project_id, caplog):
    def broken(operation, status):
        raise RuntimeError("metrics down")

    client = make_client(on_call=broken)
    with caplog.at_level(logging.ERROR, logger="workqueue.gitlab.transport"):
        assert client.project(PROJECT).id == project_id
    assert "on_call callback failed for projects.get" in caplog.text
