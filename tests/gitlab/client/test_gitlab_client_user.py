"""`GitLabClient.current_user`: the token's user, fetched once per client."""

from __future__ import annotations

import threading

import pytest

from workqueue.gitlab import PermanentGitLabError, UserInfo


def test_current_user_is_read_once_and_cached(sim, client, calls):
    user = client.current_user()
    assert user == UserInfo(
        id=sim.bot.id,
        username="workqueue-bot",
        name=sim.bot.name,
        email=sim.bot.email,
        commit_email=sim.bot.email,
        bot=False,
    )
    assert user.commit_emails == {sim.bot.email}
    assert client.current_user() is user
    assert sim.request_count("GET", "/user") == 1
    assert calls.calls == [("user.get", 200)]


def test_concurrent_first_calls_agree(sim, client):
    results: list[UserInfo] = []
    threads = [
        threading.Thread(target=lambda: results.append(client.current_user())) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6
    assert all(result is results[0] for result in results)


def test_commit_emails_are_case_insensitive_and_skip_missing():
    user = UserInfo(
        id=1, username="u", name="U", email="Bot@Example.com", commit_email=None, bot=True
    )
    assert user.commit_emails == {"bot@example.com"}


def test_a_failed_lookup_is_not_cached(sim, client):
    sim.inject_fault("GET", "/user", status=404, body={"message": "404 Not found"})
    with pytest.raises(PermanentGitLabError):
        client.current_user()
    assert client.current_user().username == "workqueue-bot"
