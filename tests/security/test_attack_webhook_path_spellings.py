"""Attack: a secret holder grows the service's memory without bound with spellings of
one real project's path.

GitLab finds a project by its path in any letter case (`team/APP-service` is
`team/app-service`), so every spelling is a successful look-up. The webhook project
directory keeps at most `MAX_ANSWERS` answers (de09bf2), but it asks through
`GitLabClient.project`, whose own cache kept every key it was ever asked for: a
maintainer of one project under `team/**` (whose secret they can read) sending the
project's real id with a new spelling of its path in each delivery got a 422 each
time, and one more `ProjectInfo` kept forever each time (2^n spellings of a path of n
letters). The client's cache is now bounded too, oldest first.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from live_app import serve_in_thread
from mr_harness import TOKEN
from scoping_support import FILES

from workqueue.api.app import create_app
from workqueue.api.webhooks import route as webhooks
from workqueue.config import ServiceConfig
from workqueue.gitlab import client as gitlab_client
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.plugin import InstallContext

TEAM_ENV = "WORKQUEUE_TEST_HOOK_SECRET_TEAM"
TEAM_SECRET = "team-maintainers-can-read-this"
PROJECT = "team/app-service"
BOUND = 16


@pytest.fixture(autouse=True)
def _secret_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEAM_ENV, TEAM_SECRET)
    monkeypatch.setattr(gitlab_client, "MAX_CACHED_PROJECTS", BOUND)


def spellings(path: str) -> Iterator[str]:
    """`path` with the letters of its last segment in every combination of case."""
    group, name = path.rsplit("/", 1)
    for cases in itertools.product(*((c.lower(), c.upper()) for c in name)):
        spelled = "".join(cases)
        if spelled != name:
            yield f"{group}/{spelled}"


def test_spellings_of_a_real_path_do_not_grow_the_gitlab_clients_cache(
    database_url, simulator: GitLabSimulator
):
    project_id = simulator.create_project(PROJECT, FILES)
    made: list[GitLabClient] = []

    def factory(url: str, token: str) -> GitLabClient:
        client = GitLabClient(url, token, timeout=5)
        made.append(client)
        return client

    config = ServiceConfig.model_validate(
        {
            "handled_types": {"mr": {"gitlab_url": simulator.url}},
            "webhooks": {"secrets": [{"projects": ["team/**"], "secret_env": TEAM_ENV}]},
        }
    )
    app = create_app(
        Settings(),
        config,
        database_url=database_url,
        process_items=False,
        type_context=InstallContext(gitlab_token=TOKEN, gitlab_client_factory=factory),
    )
    body = simulator.push_hook(PROJECT, "main", before="0" * 40)
    with serve_in_thread(app) as base_url:
        for spelled in itertools.islice(spellings(PROJECT), 3 * BOUND):
            body["project"]["id"] = project_id
            body["project"]["path_with_namespace"] = spelled
            answer = httpx.post(
                base_url + webhooks.WEBHOOK_PATH,
                content=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Idempotency-Key": str(uuid.uuid4()),
                    "X-Gitlab-Token": TEAM_SECRET,
                },
                timeout=10,
            )
            assert answer.status_code == 422, answer.text  # not GitLab's spelling
        assert made
        # The cache is private: its size is what the attack grows.
        assert max(len(client._projects) for client in made) <= BOUND
