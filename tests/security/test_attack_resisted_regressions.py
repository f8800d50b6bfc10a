"""Attacks from the review that the boundary resists (kept as regression tests)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from scoping_support import OWN, VICTIM, ci_job, scoped_rules, submission, token

WRITES = ("POST", "PUT", "DELETE")


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,
    ) as test_client:
        yield test_client


@pytest.mark.parametrize(
    "project",
    [
        "team/app/../../victim/prod",
        "team%2Fapp",
        "team/app%2F..%2F..%2Fvictim%2Fprod",
        "team/app\n",
        "team/app/",
        "/team/app",
        "team//app",
        "team/app.git",
        "+42",
        "042",
        "\uff14\uff12",  # full-width digits
        "team/\uff41pp",  # a full-width letter
    ],
)
def test_non_canonical_project_spellings_are_refused(client, simulator, issuer, key, project):
    simulator.reset_requests()
    answer = client.post(
        "/api/work-items/mr", json=submission(project), headers=ci_job(issuer, key)
    )
    assert answer.status_code in {403, 422}, answer.text
    assert sum(simulator.request_count(m) for m in WRITES) == 0


def test_glob_metacharacters_in_a_claim_are_literal(client, simulator, issuer, key):
    for crafted in ("**", "*/*", "victim/*", ".*", "victim/prod|team/app", "(?:.*)"):
        headers = token(
            issuer,
            key,
            f"project_path:{crafted}:ref_type:branch:ref:main",
            project_path=crafted,
            namespace_path="team",
        )
        answer = client.post("/api/work-items/mr", json=submission(VICTIM), headers=headers)
        assert answer.status_code == 403, (crafted, answer.text)
        # Such a claim cannot name a project: the rule grants nothing at all.
        listed = client.get("/api/work-items", headers=headers)
        assert listed.status_code == 403, (crafted, listed.text)


def test_a_ci_job_of_another_namespace_is_refused_even_with_the_right_project_claim(
    client, issuer, key
):
    # The rule binds namespace_path: team; a victim-namespace job gets nothing.
    answer = client.post(
        "/api/work-items/mr",
        json=submission(VICTIM),
        headers=ci_job(issuer, key, project_path=VICTIM),
    )
    assert answer.status_code == 403


@pytest.mark.parametrize(
    "description",
    [
        "ok\n\u00a0/merge",
        "ok\u2028/approve",
        "ok\r/close",
        "ok\n\t /assign_reviewer @me",
        "ok\u2029/merge",
    ],
)
def test_quick_action_variants_are_refused(client, simulator, issuer, key, description):
    simulator.reset_requests()
    answer = client.post(
        "/api/work-items/mr",
        json=submission(OWN, description=description),
        headers=ci_job(issuer, key),
    )
    assert answer.status_code == 422, answer.text
    assert simulator.request_count() == 0


@pytest.mark.parametrize(
    "branch",
    [
        "main",
        "workqueue/",
        "workqueue/../main",
        "Workqueue/x",
        "workqueue/x.lock",
        "workqueue/\u202ex",
    ],
)
def test_source_branches_outside_the_prefix_are_refused(client, issuer, key, branch):
    answer = client.post(
        "/api/work-items/mr", json=submission(OWN, branch), headers=ci_job(issuer, key)
    )
    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize(
    "path",
    [".GITLAB-CI.yml", ".gitlab/ci/x.yml", "docs/codeowners", ".git/config", "a/.GIT./hooks/x"],
)
def test_blocked_and_git_paths_are_refused_on_every_action(client, issuer, key, path):
    for action in (
        {"action": "create", "file_path": path, "content": "x"},
        {"action": "delete", "file_path": path},
        {"action": "move", "file_path": "ok.txt", "previous_path": path},
        {"action": "chmod", "file_path": path, "execute_filemode": True},
    ):
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, file_actions=[action]),
            headers=ci_job(issuer, key),
        )
        assert answer.status_code == 422, (action, answer.text)
