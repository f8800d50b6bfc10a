"""A GitLab Note Hook through the real receiver (`POST /api/webhooks/gitlab`, its secret,
its project check) starts an agent task, and the running service answers in the thread.
A Confidential Note Hook is taken the same way; a forged hook naming one project by id
and another by path stores nothing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from api_harness import build_client
from fake_agent import FakeAgent, Scripted, fake_agent
from harness import wait_until
from mr_harness import PROJECT

from workqueue.testing.gitlab_simulator import GitLabSimulator

HOOK_SECRET = "hook-secret"
TOKEN_ENV = "WQ_TEST_AGENT_TOKEN"


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    with fake_agent() as running:
        yield running


@pytest.fixture
def client(database_url, simulator, agent, monkeypatch) -> Iterator[httpx.Client]:
    monkeypatch.setenv(TOKEN_ENV, "agent-token")
    simulator.add_member(PROJECT, "dev", 30)
    handled = {
        "mr": {"gitlab_url": simulator.url},
        "agent": {
            "gitlab_url": simulator.url,
            "projects": ["group/**"],
            "agent_url": agent.url,
            "agent_token_env": TOKEN_ENV,
        },
    }
    with build_client(
        database_url, simulator, handled_types=handled, webhook_secret=HOOK_SECRET
    ) as test_client:
        yield test_client


def tasks(database_url) -> list[tuple[int, str, str]]:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT d.note_id, w.phase, d.state FROM agent_details d "
                    "JOIN work_items w ON w.id = d.id ORDER BY d.note_id"
                )
            )
            return [tuple(row) for row in rows]
    finally:
        engine.dispose()


def post_hook(client: httpx.Client, simulator: GitLabSimulator, note_id: int, hook=None):
    return client.post(
        "/api/webhooks/gitlab",
        json=hook or simulator.note_hook(note_id),
        headers={
            "X-Gitlab-Event": simulator.note_hook_event(note_id),
            "X-Gitlab-Token": HOOK_SECRET,
        },
    )


@pytest.mark.parametrize("internal", [False, True])
def test_a_note_hook_through_the_receiver_is_answered(
    client, simulator, agent, database_url, internal
):
    agent.answer(Scripted(body={"reply": "On it, done."}))
    iid = simulator.create_issue(PROJECT, "Bump")
    note = simulator.add_comment(
        PROJECT, "Issue", iid, "@workqueue-bot bump", user="dev", internal=internal
    )
    answer = post_hook(client, simulator, note)
    assert answer.status_code == 200, answer.text
    wait_until(lambda: tasks(database_url) == [(note, "completed", "replied")], what="answered")
    thread = simulator.discussion(PROJECT, "Issue", iid, simulator.note_discussion_id(note))
    [reply] = [n for n in thread if n["author"]["username"] == simulator.bot.username]
    assert "On it, done." in reply["body"]
    assert reply["internal"] is internal


def test_a_hook_whose_project_id_and_path_disagree_stores_nothing(
    client, simulator, agent, database_url
):
    victim = simulator.create_project("victim/prod", {"README.md": "x\n"})
    iid = simulator.create_issue(PROJECT, "Bump")
    note = simulator.add_comment(PROJECT, "Issue", iid, "@workqueue-bot bump", user="dev")
    hook = simulator.note_hook(note)
    hook["project"]["id"] = victim
    answer = post_hook(client, simulator, note, hook)
    assert answer.status_code == 422, answer.text
    assert tasks(database_url) == []
    assert agent.calls == []
