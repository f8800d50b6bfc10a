"""Transport-level behaviour: auth, routing, params, pagination, faults and the request log."""

from __future__ import annotations

import threading
import time

import gitlab
import pytest
import requests

COMMITS = "/projects/:id/repository/commits"


def commit_payload(branch="bot/x"):
    return {
        "branch": branch,
        "start_branch": "main",
        "commit_message": "m",
        "actions": [{"action": "update", "file_path": "README.md", "content": "x\n"}],
    }


def test_requests_without_a_valid_token_are_401(sim, project_id, client_factory):
    with pytest.raises(gitlab.GitlabAuthenticationError) as caught:
        client_factory(private_token=None).projects.get(project_id)
    assert caught.value.response_code == 401
    assert caught.value.error_message == "401 Unauthorized"

    with pytest.raises(gitlab.GitlabAuthenticationError):
        client_factory(private_token="wrong").projects.get(project_id)

    bearer = client_factory(private_token=None, oauth_token=sim.token)
    assert bearer.projects.get(project_id).id == project_id


def test_unknown_route_and_wrong_method_use_grape_errors(api, project_id):
    unknown = api.get(f"/projects/{project_id}/nothing")
    assert (unknown.status_code, unknown.json()) == (404, {"error": "404 Not Found"})
    wrong_method = api.delete(f"/projects/{project_id}")
    assert (wrong_method.status_code, wrong_method.json()) == (405, {"error": "405 Not Allowed"})


def test_query_and_form_params_are_accepted_like_grape(api, project_id):
    # A form-encoded body (with an array) merged with query-string params, as Grape does.
    created = api.post(
        f"/projects/{project_id}/repository/branches?ref=main", data={"branch": "from-form"}
    )
    assert created.status_code == 201
    mr = api.post(
        f"/projects/{project_id}/merge_requests?remove_source_branch=True",
        data={
            "source_branch": "from-form",
            "target_branch": "main",
            "title": "t",
            "labels[]": ["b", "a"],
        },
    )
    assert mr.status_code == 201
    assert mr.json()["labels"] == ["a", "b"]
    assert mr.json()["force_remove_source_branch"] is True


def test_pagination_headers_and_link_following(sim, gl, project_id):
    for n in range(24):
        sim.create_branch(project_id, f"feature/{n:02d}")
    response = gl.http_request(
        "get", f"/projects/{project_id}/repository/branches", query_data={"per_page": 10, "page": 2}
    )
    headers = response.headers
    assert (headers["X-Page"], headers["X-Per-Page"], headers["X-Total"]) == ("2", "10", "25")
    assert (headers["X-Total-Pages"], headers["X-Next-Page"], headers["X-Prev-Page"]) == (
        "3",
        "3",
        "1",
    )
    assert response.links["next"]["url"].startswith(f"{sim.url}/api/v4/projects/{project_id}/")
    assert "page=3" in response.links["next"]["url"]
    assert len(response.json()) == 10

    project = gl.projects.get(project_id)
    assert len(project.branches.list(get_all=True, per_page=7)) == 25
    with pytest.warns(UserWarning, match="get_all=True"):
        assert len(project.branches.list()) == 20


def test_fault_500_then_success(sim, project_id, project):
    sim.inject_fault("POST", COMMITS, status=500, times=2)

    for _ in range(2):
        with pytest.raises(gitlab.GitlabCreateError) as caught:
            project.commits.create(commit_payload())
        assert caught.value.response_code == 500
        assert caught.value.error_message == "500 Internal Server Error"
    assert sim.branch_head(project_id, "bot/x") is None  # the faults stopped the writes

    commit = project.commits.create(commit_payload())
    assert sim.branch_head(project_id, "bot/x") == commit.id
    statuses = [r.status for r in sim.log.records(method="POST", route=COMMITS)]
    assert statuses == [500, 500, 201]
    assert sim.request_count("POST", COMMITS) == 3


def test_python_gitlab_retries_transient_faults_when_asked(sim, project_id, client_factory):
    sim.inject_fault("GET", "/projects/:id", status=503, times=2)
    retrying = client_factory(retry_transient_errors=True)
    assert retrying.projects.get(project_id).id == project_id
    assert [r.status for r in sim.log.records(route="/projects/:id")] == [503, 503, 200]


def test_rate_limit_fault_sends_retry_after(sim, api, project_id):
    sim.inject_fault(
        "PUT",
        "/projects/:id/merge_requests/:merge_request_iid/merge",
        status=429,
        headers={"Retry-After": "7"},
    )
    response = api.put(f"/projects/{project_id}/merge_requests/1/merge")
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "7"
    assert response.text == "Retry later\n"
    # The fault was used up: the next call reaches the handler (no MR !1 here).
    assert api.put(f"/projects/{project_id}/merge_requests/1/merge").status_code == 404


def test_fault_after_apply_loses_the_answer_but_keeps_the_write(sim, project_id, project):
    sim.inject_fault("POST", COMMITS, status=502, after_apply=True)
    with pytest.raises(gitlab.GitlabCreateError):
        project.commits.create(commit_payload())
    assert sim.branch_head(project_id, "bot/x") is not None


def test_dropped_connection_and_latency(sim, project_id, project, gl):
    sim.inject_fault("POST", COMMITS, disconnect=True)
    with pytest.raises(requests.exceptions.ConnectionError):
        project.commits.create(commit_payload())

    sim.inject_fault("GET", "/projects/:id", status=None, latency=0.2)
    started = time.monotonic()
    gl.projects.get(project_id)
    assert time.monotonic() - started >= 0.2


def test_a_fault_with_a_probability_hits_about_that_share_of_calls(sim, api, project_id):
    sim.inject_fault("GET", "/projects/:id", status=503, times=None, probability=0.5)
    statuses = [api.get(f"/projects/{project_id}").status_code for _ in range(200)]
    assert set(statuses) == {200, 503}
    assert 60 <= statuses.count(503) <= 140
    with pytest.raises(ValueError, match="probability"):
        sim.inject_fault("GET", "/projects/:id", probability=0)


def test_request_records_carry_their_arrival_and_answer_times(sim, project_id, gl):
    sim.inject_fault("GET", "/projects/:id", status=None, latency=0.2)
    gl.projects.get(project_id)
    (record,) = sim.log.records(route="/projects/:id")
    assert record.started_at is not None
    assert record.at - record.started_at >= 0.2


def test_requests_being_handled_are_listed_in_flight(sim, project_id, gl):
    sim.inject_fault("GET", "/projects/:id", status=None, latency=0.5)
    reader = threading.Thread(target=gl.projects.get, args=(project_id,))
    reader.start()
    deadline = time.monotonic() + 5
    while not sim.log.in_flight() and time.monotonic() < deadline:
        time.sleep(0.01)
    (pending,) = sim.log.in_flight()
    assert (pending.route, pending.status) == ("/projects/:id", 0)
    reader.join()
    assert sim.log.in_flight() == []
    assert [r.status for r in sim.log.records(route="/projects/:id")] == [200]


def test_calls_with_a_labelled_bot_token_are_logged_with_the_label(sim, client_factory):
    sim.add_bot_token("second-token", "replica-b")
    client_factory(private_token="second-token").auth()
    client_factory().auth()
    (labelled, plain) = sim.log.records(route="/user")
    assert (labelled.caller, plain.caller) == ("replica-b", None)
    assert "second-token" not in repr(labelled)


def test_faults_reject_unknown_routes(sim):
    with pytest.raises(ValueError, match="no simulated route"):
        sim.inject_fault("POST", "/projects/:id/nothing")


def test_request_log_counts_and_resets(sim, project_id, project, gl):
    sim.create_branch(project_id, "feature/x")
    project.branches.get("feature/x")
    project.branches.get("main")
    assert sim.request_count("GET", "/projects/:id/repository/branches/:branch") == 2
    assert sim.log.writes() == []
    record = sim.log.records()[-2]
    assert record.path == f"/projects/{project_id}/repository/branches/feature%2Fx"
    assert record.status == 200
    sim.reset_requests()
    assert sim.request_count() == 0


def test_concurrent_clients_see_a_consistent_world(sim, project_id, client_factory):
    """Twelve clients each push a branch and open an MR at once: no lost update, unique iids."""
    errors: list[BaseException] = []
    iids: list[int] = []

    def work(n: int) -> None:
        try:
            project = client_factory().projects.get(project_id, lazy=True)
            project.commits.create(commit_payload(f"bot/{n}"))
            mr = project.mergerequests.create(
                {"source_branch": f"bot/{n}", "target_branch": "main", "title": f"t{n}"}
            )
            iids.append(mr.iid)
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(iids) == list(range(1, 13))
    assert len(sim.merge_requests(project_id, state="opened")) == 12
