"""Attack (fixed): text the service writes to GitLab used to act on other projects.

A caller scoped to `team/app` submits a description `Closes victim/prod#1,
victim/prod#2 and https://…/victim/prod/-/issues/3` and a commit message
`Fixes victim/prod#4`. Both reached GitLab; on merge into the default branch
GitLab closes those issues with the service user's rights (and every mention
leaves a "mentioned in" note there). `@all` notified everyone in the bot's
name. Now each such field answers 422 naming it, before any GitLab write;
closing patterns for the item's own project still pass, and the operator can
opt in to references and mentions (`handled_types.mr`).
"""

from __future__ import annotations

from typing import Any

import httpx
from api_harness import build_client
from harness import wait_until
from scoping_support import OWN, ci_job, scoped_rules, submission

from workqueue.testing.gitlab_simulator import GitLabSimulator

ATTACK_DESCRIPTION = (
    "Closes victim/prod#1, victim/prod#2 and https://gitlab.example.com/victim/prod/-/issues/3"
)
ATTACK_COMMIT_MESSAGE = "Fixes victim/prod#4"


def _writes(simulator: GitLabSimulator) -> int:
    return len(simulator.log.writes())


def _errors(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 422, answer.text
    errors: list[dict[str, Any]] = answer.json()["detail"]
    return errors


def _opened_mr(client: httpx.Client, item_id: str, headers: dict[str, str]) -> dict[str, Any]:
    def item() -> dict[str, Any]:
        body: dict[str, Any] = client.get(f"/api/work-items/{item_id}", headers=headers).json()
        return body

    wait_until(lambda: item()["details"]["mr_iid"] is not None, timeout=30, what="MR opened")
    return item()


def _client(database_url, simulator, issuer, **mr_options: Any):
    return build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"mr": {"gitlab_url": simulator.url, **mr_options}},
    )


def test_the_closing_chain_is_refused_on_both_fields_with_no_gitlab_write(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        writes_before = _writes(simulator)
        answer = client.post(
            "/api/work-items/mr",
            json=submission(
                OWN,
                "workqueue/attack",
                description=ATTACK_DESCRIPTION,
                commit_message=ATTACK_COMMIT_MESSAGE,
            ),
            headers=job,
        )
        errors = {tuple(error["loc"]): error for error in _errors(answer)}
        assert set(errors) == {("body", "description"), ("body", "commit_message")}
        description = errors[("body", "description")]
        assert description["type"] == "cross_project_reference"
        for quoted in ("'victim/prod#1'", "'victim/prod#2'", "/victim/prod/-/issues/3'"):
            assert quoted in description["msg"]
        assert "clos" in description["msg"]
        assert "'victim/prod#4'" in errors[("body", "commit_message")]["msg"]

        # A clean item of the same caller is processed to its MR: had the
        # refused one been stored, the workers would have written it by then.
        control = client.post(
            "/api/work-items/mr", json=submission(OWN, "workqueue/control"), headers=job
        )
        assert control.status_code == 201, control.text
        _opened_mr(client, control.json()["id"], job)
        attack_writes = [
            write
            for write in simulator.log.writes()[writes_before:]
            if "attack" in write.path or "attack" in repr(write.body)
        ]
        assert attack_writes == []
        assert simulator.branch_head(OWN, "workqueue/attack") is None
        assert simulator.merge_requests(OWN, source_branch="workqueue/attack") == []
        listed = client.get(
            "/api/work-items/mr", params={"source_branch": "workqueue/attack"}, headers=job
        )
        assert listed.json()["items"] == []


def test_a_commit_message_closing_another_projects_issue_is_refused(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        writes_before = _writes(simulator)
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, commit_message=ATTACK_COMMIT_MESSAGE),
            headers=job,
        )
        (error,) = _errors(answer)
        assert error["loc"] == ["body", "commit_message"]
        assert error["type"] == "cross_project_reference"
        assert "'victim/prod#4'" in error["msg"]
        assert _writes(simulator) == writes_before


def test_a_numeric_project_id_is_compared_by_its_resolved_path(
    database_url, simulator, issuer, key, projects
):
    """`42` is resolved to `team/app` before the text rules judge `team/app#3`."""
    job = ci_job(issuer, key)
    own_id = str(projects[OWN])
    with _client(database_url, simulator, issuer) as client:
        writes_before = _writes(simulator)
        refused = client.post(
            "/api/work-items/mr",
            json=submission(own_id, "workqueue/by-id", commit_message=ATTACK_COMMIT_MESSAGE),
            headers=job,
        )
        (error,) = _errors(refused)
        assert error["loc"] == ["body", "commit_message"]
        assert _writes(simulator) == writes_before

        accepted = client.post(
            "/api/work-items/mr",
            json=submission(own_id, "workqueue/by-id", commit_message="Fixes team/app#3"),
            headers=job,
        )
        assert accepted.status_code == 201, accepted.text


def test_mentions_are_refused_in_title_and_description(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        writes_before = _writes(simulator)
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, title="Ping @all", description="cc @alice and @team/leads"),
            headers=job,
        )
        errors = {tuple(error["loc"]): error for error in _errors(answer)}
        assert set(errors) == {("body", "title"), ("body", "description")}
        assert errors[("body", "title")]["type"] == "mention"
        assert "'@all'" in errors[("body", "title")]["msg"]
        assert "'@alice'" in errors[("body", "description")]["msg"]
        assert "'@team/leads'" in errors[("body", "description")]["msg"]
        assert _writes(simulator) == writes_before


def test_own_project_closing_patterns_reach_gitlab(database_url, simulator, issuer, key, projects):
    del projects
    job = ci_job(issuer, key)
    description = "Closes #1 and fixes team/app#2; see !3 and mail bot@example.com"
    with _client(database_url, simulator, issuer) as client:
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, description=description, commit_message="Resolves #1"),
            headers=job,
        )
        assert answer.status_code == 201, answer.text
        item = _opened_mr(client, answer.json()["id"], job)
        merge_request = simulator.merge_request(OWN, item["details"]["mr_iid"])
        assert merge_request["description"] == description


def test_the_opt_ins_let_references_and_mentions_through(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    with _client(
        database_url,
        simulator,
        issuer,
        allow_mentions=True,
        allow_cross_project_references=True,
    ) as client:
        answer = client.post(
            "/api/work-items/mr",
            json=submission(
                OWN,
                title="Sync for @release-managers",
                description=ATTACK_DESCRIPTION + "\ncc @all",
                commit_message=ATTACK_COMMIT_MESSAGE,
            ),
            headers=job,
        )
        assert answer.status_code == 201, answer.text
        item = _opened_mr(client, answer.json()["id"], job)
        merge_request = simulator.merge_request(OWN, item["details"]["mr_iid"])
        assert merge_request["description"] == ATTACK_DESCRIPTION + "\ncc @all"


def test_one_opt_in_does_not_open_the_other(database_url, simulator, issuer, key, projects):
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer, allow_cross_project_references=True) as client:
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, description="Closes victim/prod#1, cc @all"),
            headers=job,
        )
        (error,) = _errors(answer)
        assert (error["loc"], error["type"]) == (["body", "description"], "mention")
