"""Attack review, round 2: webhook secrets scoped to projects, and hooks whose project id and
path name different projects.

One secret used to serve every project, so a maintainer of any served project (who
can read their own hook's secret) could forge deliveries for every other project;
and a body was matched on its project id *or* its path, so `project.id` of one
project with `path_with_namespace` of another was accepted. Real HTTP (uvicorn:
the service's webhook shortcut, and the full middleware stack), real database, the
GitLab simulator answering the service's project look-ups.
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from live_app import serve_in_thread
from mr_harness import TOKEN
from scoping_support import FILES, OWN, VICTIM
from starlette.types import ASGIApp, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).parents[1] / "webhooks"))

from webhook_support import make_item, mr_registry

from workqueue.api.app import ServiceApp, create_app
from workqueue.api.webhooks import route as webhooks
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.receivers.projects import ProjectDirectory
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec
from workqueue.types.plugin import InstallContext

TEAM_ENV = "WORKQUEUE_TEST_HOOK_SECRET_TEAM"
VICTIM_ENV = "WORKQUEUE_TEST_HOOK_SECRET_VICTIM"
TEAM_SECRET = "team-app-maintainers-can-read-this"
VICTIM_SECRET = "only-victim-prod-knows-this"
LEGACY_SECRET = "the-one-secret-of-old"
BOT_BRANCH = "workqueue/sync"
PROJECT_ROUTE = "/projects/:id"
UNAUTHORIZED = {"detail": "missing or invalid X-Gitlab-Token"}
SCOPED_SECRETS = [
    {"projects": ["team/**"], "secret_env": TEAM_ENV},
    {"projects": [VICTIM], "secret_env": VICTIM_ENV},
]


@dataclass
class World:
    simulator: GitLabSimulator
    ids: dict[str, int]  # project path -> id
    iids: dict[str, int]  # project path -> the bot MR's iid
    pipelines: dict[str, int]  # project path -> that MR's pipeline
    jobs: dict[str, int]  # project path -> a job of that pipeline


@pytest.fixture
def world(simulator: GitLabSimulator, projects: dict[str, int]) -> World:
    iids, pipelines, jobs = {}, {}, {}
    for path in projects:
        simulator.push(path, BOT_BRANCH, {"kernel.spec": "Version: 2\n"}, user="workqueue-bot")
        iids[path] = simulator.create_merge_request(path, BOT_BRANCH, "Sync", user="workqueue-bot")
        pipelines[path] = simulator.create_pipeline(
            path, merge_request_iid=iids[path], jobs=[JobSpec("unit", status="failed")]
        )
        jobs[path] = simulator.jobs(pipelines[path])[0]["id"]
    return World(simulator, projects, iids, pipelines, jobs)


@pytest.fixture(autouse=True)
def _secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEAM_ENV, TEAM_SECRET)
    monkeypatch.setenv(VICTIM_ENV, VICTIM_SECRET)


class OuterMiddleware:
    """Any middleware outside the metrics: webhooks then take the full stack."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@dataclass
class Service:
    url: str
    app: ServiceApp


@contextmanager
def service(
    database_url: Any,
    simulator: GitLabSimulator,
    *,
    secrets: list[dict[str, Any]] | None = None,
    legacy: str | None = None,
    full_stack: bool = False,
) -> Iterator[Service]:
    """The service (`mr`, and `trunk` validating victim/prod's main) with these secrets."""
    sections: dict[str, Any] = {
        "handled_types": {
            "mr": {"gitlab_url": simulator.url},
            "trunk": {
                "gitlab_url": simulator.url,
                "queues": [{"project": VICTIM, "branch": "main"}],
            },
        },
    }
    if secrets != []:  # without any: the file as it was before the section existed
        sections["webhooks"] = {"secrets": SCOPED_SECRETS if secrets is None else secrets}
    config = ServiceConfig.model_validate(sections)
    app = create_app(
        Settings(WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=legacy),
        config,
        database_url=database_url,
        process_items=False,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    assert isinstance(app, ServiceApp)
    if full_stack:
        app.add_middleware(OuterMiddleware)
    with serve_in_thread(app) as base_url:
        yield Service(base_url + webhooks.WEBHOOK_PATH, app)
    assert (app._webhook_stack is None) is full_stack  # the path the test meant to take


def stored(sessions: Any) -> dict[str, Any]:
    """Everything a delivery could have left behind."""
    with sessions() as session:

        def rows(query: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in session.execute(sa.text(query)).all()]

        return {
            "received": rows("SELECT delivery_key FROM received_deliveries ORDER BY 1"),
            "incoming": rows("SELECT count(*) FROM incoming_deliveries"),
            "pending": rows("SELECT work_item_id, event_type FROM pending_events ORDER BY id"),
            "items": rows(
                "SELECT id, item_type, phase, actionable FROM work_items ORDER BY created_at, id"
            ),
        }


def deliver(
    url: str, body: dict[str, Any], token: str | None, *, event: str | None = None
) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
    if token is not None:
        headers["X-Gitlab-Token"] = token
    if event is not None:
        headers["X-Gitlab-Event"] = event
    return httpx.post(url, content=json.dumps(body).encode(), headers=headers, timeout=10)


def hooks_for(world: World, path: str) -> dict[str, dict[str, Any]]:
    simulator = world.simulator
    return {
        "Merge Request Hook": simulator.merge_request_hook(path, world.iids[path], action="merge"),
        "Push Hook": simulator.push_hook(path, "main", before="0" * 40),
        "Pipeline Hook": simulator.pipeline_hook(world.pipelines[path]),
        "Job Hook": simulator.job_hook(world.jobs[path]),
    }


@pytest.fixture
def victim_item(sessions: Any, world: World) -> uuid.UUID:
    registry = mr_registry(world.simulator.url)
    for path in (OWN, VICTIM):
        make_item(
            sessions,
            registry,
            project=path,
            source_branch=BOT_BRANCH,
            mr_iid=world.iids[path],
            head_pipeline_id=world.pipelines[path],
        )
    with sessions() as session:
        return session.execute(
            sa.text("SELECT id FROM work_items WHERE project_path = :path"), {"path": VICTIM}
        ).scalar_one()


# -- a secret covers its own projects only -----------------------------------------------


@pytest.mark.parametrize("full_stack", [False, True], ids=["shortcut", "full-stack"])
@pytest.mark.parametrize("kind", ["Merge Request Hook", "Push Hook", "Pipeline Hook", "Job Hook"])
def test_team_apps_secret_cannot_deliver_hooks_for_victim_prod(
    database_url, sessions, world, victim_item, kind, full_stack
):
    before = stored(sessions)
    with service(database_url, world.simulator, full_stack=full_stack) as app:
        forged = deliver(app.url, hooks_for(world, VICTIM)[kind], TEAM_SECRET, event=kind)
        own = deliver(app.url, hooks_for(world, OWN)[kind], TEAM_SECRET, event=kind)

    assert (forged.status_code, forged.json()) == (401, UNAUTHORIZED)
    assert own.status_code == 200, own.text  # the same secret still serves its own project
    after = stored(sessions)
    assert len(after["received"]) == len(before["received"]) + 1  # only team/app's
    assert [event for event in after["pending"] if event[0] == victim_item] == []
    assert [row for row in after["items"] if row[0] == victim_item] == [
        row for row in before["items"] if row[0] == victim_item
    ]


def test_victim_prods_own_secret_still_delivers_its_hooks(
    database_url, sessions, world, victim_item
):
    with service(database_url, world.simulator) as app:
        answers = [
            deliver(app.url, body, VICTIM_SECRET, event=kind).status_code
            for kind, body in hooks_for(world, VICTIM).items()
        ]
        refused = deliver(app.url, hooks_for(world, OWN)["Push Hook"], VICTIM_SECRET)

    assert answers == [200, 200, 200, 200]
    assert refused.status_code == 401  # `victim/prod` covers that one project, not team/**


def test_an_id_only_job_hook_is_checked_against_the_project_gitlab_names_for_the_id(
    database_url, sessions, world, victim_item
):
    """Job Hooks of some GitLab versions carry only `project_id`: the service looks the id
    up (once, after the token matched a secret) to know which project the body names."""
    own, victim = (hooks_for(world, path)["Job Hook"] for path in (OWN, VICTIM))
    for body in (own, victim):
        del body["project"]
    before = stored(sessions)
    with service(database_url, world.simulator) as app:
        forged = deliver(app.url, victim, TEAM_SECRET, event="Job Hook")
        accepted = deliver(app.url, own, TEAM_SECRET, event="Job Hook")

    assert (forged.status_code, forged.json()) == (401, UNAUTHORIZED)
    assert (accepted.status_code, accepted.json()) == (200, {"status": "accepted"})
    assert len(stored(sessions)["received"]) == len(before["received"]) + 1


def test_a_body_naming_no_project_needs_a_secret_that_covers_every_project(
    database_url, sessions, world
):
    body = {"object_kind": "pipeline", "object_attributes": {"id": 1}}
    with service(database_url, world.simulator) as app:
        scoped = deliver(app.url, body, TEAM_SECRET)
    with service(
        database_url, world.simulator, secrets=[{"projects": ["**"], "secret_env": TEAM_ENV}]
    ) as app:
        everything = deliver(app.url, body, TEAM_SECRET)

    assert scoped.status_code == 401
    assert everything.json() == {"status": "accepted"}


def test_the_legacy_secret_still_covers_every_project(database_url, sessions, world, victim_item):
    with service(database_url, world.simulator, secrets=[], legacy=LEGACY_SECRET) as app:
        answers = {
            (path, kind): deliver(app.url, body, LEGACY_SECRET, event=kind).json()["status"]
            for path in (OWN, VICTIM)
            for kind, body in hooks_for(world, path).items()
        }

    assert set(answers.values()) == {"accepted"}
    assert len(answers) == 8


def test_the_legacy_secret_and_scoped_secrets_work_side_by_side(database_url, sessions, world):
    with service(database_url, world.simulator, legacy=LEGACY_SECRET) as app:
        team_on_victim = deliver(app.url, hooks_for(world, VICTIM)["Push Hook"], TEAM_SECRET)
        legacy_on_victim = deliver(app.url, hooks_for(world, VICTIM)["Push Hook"], LEGACY_SECRET)

    assert team_on_victim.status_code == 401
    assert legacy_on_victim.status_code == 200


def test_unauthenticated_deliveries_cost_no_gitlab_call(database_url, sessions, world):
    body = hooks_for(world, VICTIM)["Job Hook"]
    del body["project"]  # an id only: the one shape that needs a look-up to be scoped
    with service(database_url, world.simulator) as app:
        world.simulator.reset_requests()
        answers = {deliver(app.url, body, token).status_code for token in (None, "wrong") * 10}
        calls = world.simulator.request_count("GET", PROJECT_ROUTE)

    assert answers == {401}
    assert calls == 0


def test_project_look_ups_are_cached_per_project(database_url, sessions, world):
    hook = hooks_for(world, OWN)["Pipeline Hook"]
    with service(database_url, world.simulator) as app:
        world.simulator.reset_requests()
        answers = {deliver(app.url, hook, TEAM_SECRET).status_code for _ in range(10)}
        calls = world.simulator.request_count("GET", PROJECT_ROUTE)

    assert answers == {200}
    assert calls == 1


# -- id and path must name one project ---------------------------------------------------


def with_project_id_of(body: dict[str, Any], project_id: int) -> dict[str, Any]:
    """`body` claiming its path, with another project's id in every id field it has."""
    forged = copy.deepcopy(body)
    forged["project"]["id"] = project_id
    if "project_id" in forged:
        forged["project_id"] = project_id
    return forged


@pytest.mark.parametrize("full_stack", [False, True], ids=["shortcut", "full-stack"])
@pytest.mark.parametrize("kind", ["Merge Request Hook", "Push Hook", "Pipeline Hook", "Job Hook"])
def test_an_id_of_one_project_with_the_path_of_another_is_422_and_stores_nothing(
    database_url, sessions, world, victim_item, kind, full_stack
):
    """The forged push of the review: the one valid secret, `path_with_namespace` of the
    project whose head it wants to move, the id of another project."""
    other = world.simulator.create_project("elsewhere/unrelated", FILES)
    forged = with_project_id_of(hooks_for(world, VICTIM)[kind], other)
    before = stored(sessions)
    with service(database_url, world.simulator, secrets=[], legacy=LEGACY_SECRET) as app:
        answer = deliver(app.url, forged, LEGACY_SECRET, event=kind)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["body", "project"]
    assert "different projects" in problem["msg"]
    assert stored(sessions) == before


def test_team_apps_secret_with_victims_id_and_its_own_path_is_422(
    database_url, sessions, world, victim_item
):
    forged = with_project_id_of(hooks_for(world, OWN)["Merge Request Hook"], world.ids[VICTIM])
    before = stored(sessions)
    with service(database_url, world.simulator) as app:
        answer = deliver(app.url, forged, TEAM_SECRET)

    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "project"]
    assert stored(sessions) == before


def test_an_id_gitlab_does_not_show_with_a_served_path_is_422(
    database_url, sessions, world, victim_item
):
    forged = with_project_id_of(hooks_for(world, VICTIM)["Push Hook"], 987654)
    before = stored(sessions)
    with service(database_url, world.simulator, secrets=[], legacy=LEGACY_SECRET) as app:
        answer = deliver(app.url, forged, LEGACY_SECRET)

    assert answer.status_code == 422
    assert stored(sessions) == before


def test_project_id_and_project_dot_id_must_agree(database_url, sessions, world, victim_item):
    forged = hooks_for(world, VICTIM)["Push Hook"]
    forged["project_id"] = world.ids[OWN]  # the top-level copy names another project
    before = stored(sessions)
    with service(database_url, world.simulator, secrets=[], legacy=LEGACY_SECRET) as app:
        answer = deliver(app.url, forged, LEGACY_SECRET)

    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "project_id"]
    assert stored(sessions) == before


def test_a_hook_of_a_project_the_service_cannot_see_is_still_accepted(
    database_url, sessions, world
):
    """A group hook also reports projects the service's token cannot see: when GitLab
    shows neither the id nor the path, the body names nothing the service acts on, and a
    4xx would only get the group's hook disabled."""
    hook = hooks_for(world, OWN)["Push Hook"]
    hook["project"].update(id=555_555, path_with_namespace="team/hidden")
    hook["project_id"] = 555_555
    with service(database_url, world.simulator) as app:
        answer = deliver(app.url, hook, TEAM_SECRET)

    assert answer.json() == {"status": "accepted"}


def test_a_path_no_gitlab_project_can_have_is_never_looked_up_or_kept(
    database_url, sessions, world
):
    """A secret holder sending megabyte-long made-up paths must not make the service ask
    GitLab for them, nor keep them as cache keys (a bounded table of 1 MiB keys is not
    bounded memory)."""
    forged = hooks_for(world, OWN)["Push Hook"]
    forged["project"]["path_with_namespace"] = "team/" + "x" * 300_000
    with service(
        database_url, world.simulator, secrets=[{"projects": ["**"], "secret_env": TEAM_ENV}]
    ) as app:
        world.simulator.reset_requests()
        answer = deliver(app.url, forged, TEAM_SECRET)
        calls = world.simulator.request_count("GET", PROJECT_ROUTE)
        kept = app.app.state.webhook_projects.kept_keys()

    assert answer.status_code == 422  # the id is team/app's, the path is not
    assert calls == 1  # the id only
    assert max(len(key) for key in kept) < 100


# -- made-up ids spend their own secret's look-up budget ---------------------------------
#
# A holder of a scoped secret sending a new made-up `project.id` (with a path its secret
# covers) in each delivery made the service ask GitLab once or twice per delivery, on two
# threads with an unbounded queue: enough to spend the service token's GitLab rate limit
# for every project and delay real hooks. Each secret now has a budget of 60 uncached
# look-ups a minute; over it a delivery answers 503 with `Retry-After`, while answers the
# service already holds (real projects) keep flowing and other secrets keep their own
# budgets. The directory's clock is frozen so the budget does not refill during a test.

BUDGET = 60  # uncached look-ups per secret per minute (docs/reference/http-api.md)
MADE_UP_ID = 900_000


def freeze_lookup_clock(app: Service) -> None:
    """The service's project directory, its clock stopped: no refill during the test."""
    context = InstallContext(
        gitlab_token=TOKEN,
        gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
    )
    app.app.state.webhook_projects.close()
    app.app.state.webhook_projects = ProjectDirectory.for_registry(
        app.app.state.runtime.registry, context, clock=lambda: 1000.0
    )


def test_made_up_ids_spend_only_their_secrets_budget_and_real_hooks_keep_flowing(
    database_url, sessions, world, victim_item
):
    own_push = hooks_for(world, OWN)["Push Hook"]
    with service(database_url, world.simulator) as app:
        freeze_lookup_clock(app)
        world.simulator.reset_requests()
        warm = deliver(app.url, own_push, TEAM_SECRET)  # team/app's id: one look-up
        before = stored(sessions)
        attack = [
            deliver(app.url, with_project_id_of(own_push, MADE_UP_ID + n), TEAM_SECRET)
            for n in range(BUDGET + 10)
        ]
        spent = world.simulator.request_count("GET", PROJECT_ROUTE)
        after_attack = stored(sessions)
        own_again = deliver(app.url, own_push, TEAM_SECRET)  # answered from the cache
        victims = deliver(app.url, hooks_for(world, VICTIM)["Push Hook"], VICTIM_SECRET)
        calls = world.simulator.request_count("GET", PROJECT_ROUTE)

    assert warm.json() == {"status": "accepted"}
    # The first made-up id costs two look-ups (the id, then team/app's path), every later
    # one a look-up of its id; the warm-up took one: the secret's 60 are gone after 58.
    assert spent == BUDGET
    statuses = [answer.status_code for answer in attack]
    assert statuses == [422] * (BUDGET - 2) + [503] * 12
    for refused in attack[BUDGET - 2 :]:
        assert int(refused.headers["Retry-After"]) >= 1
        assert "project look-ups" in refused.json()["detail"]
    # Neither the 422s nor the 503s stored anything (the warm-up's own delivery may be
    # resolved meanwhile: its key stays recorded either way).
    assert after_attack["received"] == before["received"]
    assert own_again.json() == {"status": "accepted"}
    assert victims.json() == {"status": "accepted"}  # another secret, its own budget
    assert calls == BUDGET + 1  # victim/prod's id, paid by its own secret


def test_a_burst_of_one_real_projects_hooks_costs_one_look_up_and_no_budget(
    database_url, sessions, world
):
    hook = hooks_for(world, OWN)["Pipeline Hook"]
    with service(database_url, world.simulator) as app:
        freeze_lookup_clock(app)
        world.simulator.reset_requests()
        answers = {deliver(app.url, hook, TEAM_SECRET).status_code for _ in range(BUDGET + 5)}
        calls = world.simulator.request_count("GET", PROJECT_ROUTE)

    assert answers == {200}
    assert calls == 1


# -- the body checked is the body stored -------------------------------------------------


def deliver_raw(url: str, raw: str, token: str) -> httpx.Response:
    headers = {"Content-Type": "application/json", "X-Gitlab-Token": token}
    return httpx.post(url, content=raw.encode(), headers=headers, timeout=10)


@pytest.mark.parametrize("full_stack", [False, True], ids=["shortcut", "full-stack"])
@pytest.mark.parametrize("spelling", ["{id}e0", "{id}0e-1", "{id}.0", '"{id}"', "true"])
def test_a_project_id_that_is_no_integer_is_422_and_stores_nothing(
    database_url, sessions, world, victim_item, spelling, full_stack
):
    """`"id": 7e0` was read as "no id" by the check (so no id/path check: team/app's path
    alone passed team/app's secret) but stored by JSONB as `{"id": 7}`, victim/prod's id."""
    hook = hooks_for(world, OWN)["Merge Request Hook"]
    hook["project"]["id"] = "@ID@"
    raw = json.dumps(hook).replace('"@ID@"', spelling.format(id=world.ids[VICTIM]))
    before = stored(sessions)
    with service(database_url, world.simulator, full_stack=full_stack) as app:
        answer = deliver_raw(app.url, raw, TEAM_SECRET)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["body", "project", "id"]
    assert stored(sessions) == before


def test_a_top_level_project_id_that_is_no_integer_is_422(
    database_url, sessions, world, victim_item
):
    hook = hooks_for(world, OWN)["Job Hook"]
    hook["project_id"] = "@ID@"
    raw = json.dumps(hook).replace('"@ID@"', f"{world.ids[VICTIM]}e0")
    before = stored(sessions)
    with service(database_url, world.simulator) as app:
        answer = deliver_raw(app.url, raw, TEAM_SECRET)

    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "project_id"]
    assert stored(sessions) == before
