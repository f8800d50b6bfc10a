"""`GET /user`: the token's own user, in GitLab's `UserPublic` shape, as python-gitlab reads it."""

from __future__ import annotations

import gitlab
import pytest


def test_current_user_is_the_tokens_user(sim, gl):
    gl.auth()  # python-gitlab's own GET /user
    user = gl.user
    assert user is not None
    assert (user.id, user.username, user.name) == (sim.bot.id, "workqueue-bot", sim.bot.name)
    # The address GitLab writes as author and committer of the user's API commits.
    assert user.commit_email == user.email == sim.bot.email
    assert user.bot is False
    assert user.web_url == f"{sim.url}/workqueue-bot"


def test_another_token_answers_its_own_user(sim, client_factory):
    sim.add_user("grace", token="grace-token")
    with_grace = client_factory(private_token="grace-token")
    with_grace.auth()
    assert with_grace.user is not None
    assert with_grace.user.username == "grace"


def test_current_user_needs_a_valid_token(sim, api, client_factory):
    with pytest.raises(gitlab.GitlabAuthenticationError):
        client_factory(private_token="wrong").auth()
    assert api.get("/user").json()["username"] == "workqueue-bot"
    assert [record.status for record in sim.log.records("GET", "/user")] == [401, 200]
