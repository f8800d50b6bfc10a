"""Attack (fixed): limits that a ref multiplied, storage without bound, contents kept forever.

* A GitLab CI `sub` embeds the ref (`project_path:team/app:ref_type:branch:ref:x`), and
  the per-caller limits counted by `sub`: one project pushing from five branches was
  five callers, with five times the live items and five times the submission rate.
  Now `max_live_items_per_project` and `submissions_per_minute_per_project` bound a
  project whatever its refs, and a rule's `limit_key: project_path` makes the five
  jobs one caller.
* Stored contents grew without bound inside the limits (submit, cancel, repeat):
  `max_stored_bytes_per_caller` counts every text live and finished items hold
  (`types.mr.stored_bytes`) until `retention.content_days` after they finished, when
  the safety sweep drops their file contents, descriptions and commit messages.

Over HTTP with real OIDC tokens from the local issuer, real PostgreSQL and the
GitLab simulator.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from auth_support import LocalIssuer
from fastapi import FastAPI
from harness import wait_until
from live_app import live_client
from mr_harness import TOKEN
from scoping_support import ADMIN_SUB, OWN, VICTIM, ci_job, submission, token

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.plugin import InstallContext

REFS = [f"feature-{n}" for n in range(5)]
AUDIENCE = "workqueue-service"
MR_ROUTE = "/api/work-items/mr"
WRITE_ROUTES = ("/projects/:id/repository/commits", "/projects/:id/merge_requests")


def ci_rule(issuer_url: str, **extra: Any) -> dict[str, Any]:
    """The documented GitLab CI grant: a job acts on its own project only."""
    return {
        "issuer": issuer_url,
        "claims": {"aud": AUDIENCE, "namespace_path": "team"},
        "permissions": ["read", "submit", "retry"],
        "item_types": ["mr"],
        "projects": ["{project_path}"],
        **extra,
    }


def admin_rule(issuer_url: str) -> dict[str, Any]:
    return {
        "issuer": issuer_url,
        "claims": {"aud": AUDIENCE, "sub": ADMIN_SUB},
        "permissions": ["read", "submit", "retry"],
        "projects": ["**"],
    }


@contextmanager
def service(
    database_url: Any,
    simulator: GitLabSimulator,
    rules: list[dict[str, Any]],
    limits: dict[str, Any],
    *,
    process_items: bool = False,
    trunk_queues: list[dict[str, Any]] | None = None,
) -> Iterator[tuple[httpx.Client, FastAPI]]:
    """The service over HTTP, and its app (whose runtime runs the safety sweep)."""
    handled: dict[str, Any] = {"mr": {"gitlab_url": simulator.url}}
    if trunk_queues is not None:
        handled["trunk"] = {"gitlab_url": simulator.url, "queues": trunk_queues}
    config = ServiceConfig.model_validate(
        {
            "authorization": {"rules": rules, "limits": limits},
            "processing": {"workers": 2, "lease_seconds": 3, "heartbeat_seconds": 1},
            "handled_types": handled,
        }
    )
    app = create_app(
        Settings(WORKQUEUE_SERVICE_LOCAL_AUTH_USER=None),
        config,
        database_url=database_url,
        process_items=process_items,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    with live_client(app) as client:
        yield client, app


def clear_of_minute_boundary(engine: sa.Engine) -> None:
    """Wait, if needed, until the database clock is early in a minute: the rate windows
    are fixed minutes, and a test's few submissions must fall into one of them."""
    with engine.connect() as connection:
        second = connection.execute(
            sa.text("SELECT extract(second FROM clock_timestamp())")
        ).scalar_one()
    if second > 45:
        time.sleep(61 - float(second))


def live_count(engine: sa.Engine, project_path: str) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                sa.text(
                    "SELECT count(*) FROM work_items WHERE project_path = :path "
                    "AND phase NOT IN ('completed', 'cancelled')"
                ),
                {"path": project_path},
            ).scalar_one()
        )


def writes(simulator: GitLabSimulator) -> int:
    return sum(simulator.request_count("POST", route) for route in WRITE_ROUTES)


def by_ref(issuer: LocalIssuer, key: Any) -> dict[str, dict[str, str]]:
    """One CI job token per ref of team/app: five subjects, one project_path."""
    return {ref: ci_job(issuer, key, ref=ref) for ref in REFS}


def submit_from_every_ref(client: httpx.Client, jobs: dict[str, dict[str, str]]) -> list[Any]:
    return [
        client.post(MR_ROUTE, json=submission(OWN, f"workqueue/{ref}"), headers=jobs[ref])
        for ref in REFS
    ]


# -- per project -----------------------------------------------------------------------------


def test_five_refs_of_one_project_stop_at_max_live_items_per_project(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    limits = {"max_live_items_per_caller": 2, "max_live_items_per_project": 3}
    with service(database_url, simulator, [ci_rule(issuer.issuer)], limits) as (client, _):
        answers = submit_from_every_ref(client, by_ref(issuer, key))
    assert [answer.status_code for answer in answers] == [201, 201, 201, 429, 429]
    for refused in answers[3:]:
        assert refused.headers["retry-after"] == "60"
        assert refused.json()["detail"].startswith(
            f"max_live_items_per_project (3) reached for {OWN}"
        )
    assert live_count(engine, OWN) == 3


def test_five_refs_of_one_project_stop_at_submissions_per_minute_per_project(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    limits = {"submissions_per_minute_per_caller": 10, "submissions_per_minute_per_project": 3}
    with service(database_url, simulator, [ci_rule(issuer.issuer)], limits) as (client, _):
        clear_of_minute_boundary(engine)
        answers = submit_from_every_ref(client, by_ref(issuer, key))
    assert [answer.status_code for answer in answers] == [201, 201, 201, 429, 429]
    for refused in answers[3:]:
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.json()["detail"].startswith(
            f"submissions_per_minute_per_project (3) reached for {OWN}"
        )
    assert live_count(engine, OWN) == 3


def test_a_retry_cannot_revive_past_max_live_items_per_project(
    database_url, engine, simulator, issuer, key, projects
):
    """Cancel one, create another, retry the first: still at most the project's limit."""
    del projects
    limits = {"max_live_items_per_project": 2}
    with service(database_url, simulator, [ci_rule(issuer.issuer)], limits) as (client, _):
        jobs = by_ref(issuer, key)
        first, second = submit_from_every_ref(client, jobs)[:2]
        assert client.post(
            f"/api/work-items/{first.json()['id']}/cancel", headers=jobs[REFS[0]]
        ).is_success
        third = client.post(
            MR_ROUTE, json=submission(OWN, "workqueue/third"), headers=jobs[REFS[2]]
        )
        assert (second.status_code, third.status_code) == (201, 201)
        revived = client.post(f"/api/work-items/{first.json()['id']}/retry", headers=jobs[REFS[0]])
    assert revived.status_code == 429
    assert revived.json()["detail"].startswith(f"max_live_items_per_project (2) reached for {OWN}")
    assert live_count(engine, OWN) == 2


def test_manual_trunk_heads_count_against_the_project_too(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    rules = [ci_rule(issuer.issuer), {**ci_rule(issuer.issuer), "item_types": ["trunk"]}]
    limits = {"max_live_items_per_project": 1}
    queues = [{"project": OWN, "branch": "main"}]
    with service(database_url, simulator, rules, limits, trunk_queues=queues) as (client, _):
        job = ci_job(issuer, key, ref="main")
        assert client.post(MR_ROUTE, json=submission(OWN), headers=job).status_code == 201
        head = {"project": OWN, "branch": "main", "sha": simulator.branch_head(OWN, "main")}
        refused = client.post("/api/work-items/trunk", json=head, headers=job)
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith(f"max_live_items_per_project (1) reached for {OWN}")
    assert live_count(engine, OWN) == 1


def test_refused_callers_do_not_spend_another_projects_rate(
    database_url, engine, simulator, issuer, key, projects
):
    """Only callers allowed on a project count against its rate: a job of team/app
    asking for victim/prod (403) cannot lock victim/prod's own callers out."""
    del projects
    rules = [ci_rule(issuer.issuer), admin_rule(issuer.issuer)]
    limits = {"submissions_per_minute_per_caller": 50, "submissions_per_minute_per_project": 2}
    with service(database_url, simulator, rules, limits) as (client, _):
        clear_of_minute_boundary(engine)
        job = ci_job(issuer, key, ref="main")
        forbidden = [
            client.post(MR_ROUTE, json=submission(VICTIM, f"workqueue/x{n}"), headers=job)
            for n in range(5)
        ]
        admin = token(issuer, key, ADMIN_SUB)
        allowed = client.post(MR_ROUTE, json=submission(VICTIM), headers=admin)
    assert {answer.status_code for answer in forbidden} == {403}
    assert allowed.status_code == 201


# -- limit_key ------------------------------------------------------------------------------


def test_limit_key_project_path_makes_five_refs_one_caller(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    rules = [ci_rule(issuer.issuer, limit_key="project_path")]
    limits = {"max_live_items_per_caller": 2}
    with service(database_url, simulator, rules, limits) as (client, _):
        answers = submit_from_every_ref(client, by_ref(issuer, key))
    assert [answer.status_code for answer in answers] == [201, 201, 429, 429, 429]
    assert (
        answers[2]
        .json()["detail"]
        .startswith(f"max_live_items_per_caller (2) reached for project_path {OWN}")
    )
    assert answers[2].headers["retry-after"] == "60"
    # Ownership still follows the subject: each item names the job that made it.
    owners = {answer.json()["caller_identity"] for answer in answers[:2]}
    assert len(owners) == 2


def test_limit_key_project_path_shares_one_submission_rate(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    rules = [ci_rule(issuer.issuer, limit_key="project_path")]
    limits = {"submissions_per_minute_per_caller": 2}
    with service(database_url, simulator, rules, limits) as (client, _):
        clear_of_minute_boundary(engine)
        answers = submit_from_every_ref(client, by_ref(issuer, key))
    assert [answer.status_code for answer in answers] == [201, 201, 429, 429, 429]
    assert (
        answers[2]
        .json()["detail"]
        .startswith(f"submissions_per_minute_per_caller (2) reached for project_path {OWN}")
    )


def test_a_token_without_the_limit_key_claim_is_refused(
    database_url, engine, simulator, issuer, key, projects
):
    """A missing claim must not widen the limit back to one count per subject."""
    del projects
    rule = {
        "issuer": issuer.issuer,
        "claims": {"aud": AUDIENCE, "namespace_path": "team"},
        "permissions": ["read", "submit", "retry"],
        "projects": ["team/**"],
        "limit_key": "project_path",
    }
    with service(database_url, simulator, [rule], {}) as (client, _):
        headers = token(
            issuer, key, "job-without-project-path", namespace_path="team", project_path=None
        )
        refused = client.post(MR_ROUTE, json=submission(OWN), headers=headers)
    assert refused.status_code == 403
    assert "project_path" in refused.json()["detail"]
    assert live_count(engine, OWN) == 0


def test_limit_keys_of_two_issuers_never_collide(database_url, simulator, issuer, key, projects):
    del projects
    other = LocalIssuer()
    other.publish(key)
    other.start()
    try:
        rules = [
            ci_rule(issuer.issuer, limit_key="project_path"),
            ci_rule(other.issuer, limit_key="project_path"),
        ]
        limits = {"max_live_items_per_caller": 1}
        with service(database_url, simulator, rules, limits) as (client, _):
            first = client.post(
                MR_ROUTE, json=submission(OWN, "workqueue/a"), headers=ci_job(issuer, key)
            )
            same_issuer = client.post(
                MR_ROUTE,
                json=submission(OWN, "workqueue/b"),
                headers=ci_job(issuer, key, ref="other"),
            )
            other_issuer = client.post(
                MR_ROUTE, json=submission(OWN, "workqueue/c"), headers=ci_job(other, key)
            )
    finally:
        other.stop()
    assert [first.status_code, same_issuer.status_code, other_issuer.status_code] == [
        201,
        429,
        201,
    ]


# -- stored bytes ---------------------------------------------------------------------------


# What `sized` stores besides its content: the title, commit message and path of
# `scoping_support.submission`; retention keeps the title and the path (15 bytes).
SIZED_TEXT_BYTES = len("Sync") + len("Sync from upstream") + len("kernel.spec")


def sized(branch: str, size: int, *, path: str = "kernel.spec") -> dict[str, Any]:
    """A submission storing `SIZED_TEXT_BYTES + size` bytes (the default path)."""
    return submission(
        OWN,
        branch,
        file_actions=[{"action": "update", "file_path": path, "content": "x" * size}],
    )


def test_stored_bytes_count_live_and_finished_items_until_retention(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    rules = [admin_rule(issuer.issuer)]
    # Room for one item of SIZED_TEXT_BYTES + 100 (133 bytes), not two.
    limits = {"max_stored_bytes_per_caller": 200}
    admin = token(issuer, key, ADMIN_SUB)
    with service(database_url, simulator, rules, limits, process_items=True) as (client, app):
        first = client.post(MR_ROUTE, json=sized("workqueue/a", 100), headers=admin)
        assert first.status_code == 201
        over = client.post(MR_ROUTE, json=sized("workqueue/b", 100), headers=admin)
        assert over.status_code == 429
        assert over.headers["retry-after"]
        assert over.json()["detail"].startswith(
            f"max_stored_bytes_per_caller (200) reached for {ADMIN_SUB}: "
            f"{SIZED_TEXT_BYTES + 100} bytes stored, {SIZED_TEXT_BYTES + 100} more asked"
        )
        # Growing a held item over the limit is refused too, and changes nothing.
        grown = client.post(MR_ROUTE, json=sized("workqueue/a", 200), headers=admin)
        assert grown.status_code == 429
        item_id = first.json()["id"]
        kept = client.get(f"/api/work-items/{item_id}", headers=admin).json()
        assert kept["details"]["file_actions"][0]["content"] == "x" * 100
        # A cancelled item's contents still count...
        assert client.post(f"/api/work-items/{item_id}/cancel", headers=admin).status_code == 200
        again = client.post(MR_ROUTE, json=sized("workqueue/b", 100), headers=admin)
        assert again.status_code == 429
        # ...until retention drops them.
        age_items(engine, [item_id], days=8)
        run_safety_sweep(app)
        wait_until(
            lambda: (
                client.get(f"/api/work-items/{item_id}", headers=admin).json()[
                    "contents_dropped_at"
                ]
                is not None
            ),
            what="the contents drop",
        )
        # What it keeps (title and path) still counts: 15 + 133 bytes fit in 200.
        room = client.post(MR_ROUTE, json=sized("workqueue/b", 100), headers=admin)
        assert room.status_code == 201


@pytest.mark.parametrize(
    "binding",
    # Each submission stores SIZED_TEXT_BYTES + 50 (83 bytes): 4 fit in 350, not 5.
    [{"max_live_items_per_project": 4}, {"max_stored_bytes_per_caller": 350}],
    ids=["live-items-per-project", "stored-bytes"],
)
def test_concurrent_submissions_cannot_race_past_the_limits(
    database_url, engine, simulator, issuer, key, projects, binding
):
    """12 submissions at once, each on its own connection: exactly 4 fit either limit."""
    del projects
    rules = [admin_rule(issuer.issuer)]
    limits = {
        "submissions_per_minute_per_caller": 1000,
        "submissions_per_minute_per_project": 1000,
        **binding,
    }
    admin = token(issuer, key, ADMIN_SUB)
    statuses: list[int] = []
    lock = threading.Lock()
    with service(database_url, simulator, rules, limits) as (client, _):
        start = threading.Barrier(12)

        def one(n: int) -> None:
            start.wait()
            answer = client.post(MR_ROUTE, json=sized(f"workqueue/c{n}", 50), headers=admin)
            with lock:
                statuses.append(answer.status_code)

        threads = [threading.Thread(target=one, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(statuses) == [201] * 4 + [429] * 8
    with engine.connect() as connection:
        stored = connection.execute(sa.text("SELECT sum(content_bytes) FROM work_items")).scalar()
    assert stored == 4 * (SIZED_TEXT_BYTES + 50)


# -- retention of contents ------------------------------------------------------------------


def age_items(engine: sa.Engine, item_ids: list[str], *, days: int) -> None:
    """Make items look finished (or last touched) `days` ago."""
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "UPDATE work_items SET updated_at = now() - make_interval(days => :days) "
                "WHERE id = ANY(:ids)"
            ),
            {"days": days, "ids": [uuid.UUID(item_id) for item_id in item_ids]},
        )


def run_safety_sweep(app: FastAPI) -> None:
    app.state.runtime.manager.sweep()


def test_the_safety_sweep_drops_old_finished_contents_only(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    rules = [admin_rule(issuer.issuer)]
    admin = token(issuer, key, ADMIN_SUB)
    with service(database_url, simulator, rules, {}, process_items=True) as (client, app):

        def create(branch: str) -> str:
            body = {
                **sized(branch, 10),
                "file_actions": [
                    {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"},
                    {
                        "action": "create",
                        "file_path": "hello.txt",
                        "content": "aGkK",
                        "encoding": "base64",
                    },
                    {"action": "delete", "file_path": "README.md"},
                ],
                "auto_merge": False,
            }
            answer = client.post(MR_ROUTE, json=body, headers=admin)
            assert answer.status_code == 201, answer.text
            return str(answer.json()["id"])

        old_finished, recent_finished, old_live = (
            create(f"workqueue/{name}") for name in ("old", "recent", "live")
        )

        def idle(item_id: str) -> bool:
            body = client.get(f"/api/work-items/{item_id}", headers=admin).json()
            return not body["actionable"] and body["details"]["mr_iid"] is not None

        for item_id in (old_finished, recent_finished, old_live):
            wait_until(lambda item_id=item_id: idle(item_id), what="the MR")
        for item_id in (old_finished, recent_finished):
            cancelled = client.post(f"/api/work-items/{item_id}/cancel", headers=admin)
            assert cancelled.status_code == 200
        listed_before = {
            item["id"]: item["details"]["file_actions"]
            for item in client.get(MR_ROUTE, headers=admin).json()["items"]
        }
        age_items(engine, [old_finished, old_live], days=8)
        age_items(engine, [recent_finished], days=6)
        run_safety_sweep(app)

        def dropped(item_id: str) -> bool:
            body = client.get(f"/api/work-items/{item_id}", headers=admin).json()
            return body["contents_dropped_at"] is not None

        wait_until(lambda: dropped(old_finished), what="the contents drop")
        gone = client.get(f"/api/work-items/{old_finished}", headers=admin).json()
        # The file actions read as in lists: no content, each file's size and sha256.
        assert gone["details"]["file_actions"] == listed_before[old_finished]
        assert [action.get("size") for action in gone["details"]["file_actions"]] == [11, 3, None]
        assert all("content" not in action for action in gone["details"]["file_actions"])
        listed_after = {
            item["id"]: item for item in client.get(MR_ROUTE, headers=admin).json()["items"]
        }
        assert listed_after[old_finished]["details"]["file_actions"] == listed_before[old_finished]
        for kept in (recent_finished, old_live):
            body = client.get(f"/api/work-items/{kept}", headers=admin).json()
            assert body["contents_dropped_at"] is None
            assert body["details"]["file_actions"][0]["content"] == "Version: 2\n"

        # A retry must not push empty files: refused, nothing written to GitLab.
        writes_before = writes(simulator)
        retried = client.post(f"/api/work-items/{old_finished}/retry", headers=admin)
        assert retried.status_code == 409
        assert "retention.content_days" in retried.json()["detail"]
        assert client.get(f"/api/work-items/{old_finished}", headers=admin).json()["phase"] == (
            "cancelled"
        )
        assert writes(simulator) == writes_before
