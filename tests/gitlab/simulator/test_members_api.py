"""Project members with access levels (`GET /projects/:id/members/all[/:user_id]`)."""

from __future__ import annotations

import gitlab
import pytest


def test_every_project_starts_with_the_bot_as_developer_and_ada_as_maintainer(sim, project):
    bot = project.members_all.get(sim.bot.id)
    assert (bot.username, bot.access_level) == ("workqueue-bot", 30)
    assert bot.state == "active"
    assert project.members_all.get(sim.human.id).access_level == 40


def test_add_member_creates_the_user_and_sets_the_level(sim, project, project_id):
    user_id = sim.add_member(project_id, "grace", 20)
    member = project.members_all.get(user_id)
    assert (member.username, member.access_level) == ("grace", 20)
    assert sim.add_member(project_id, "grace", 50) == user_id  # a new level replaces the old
    assert project.members_all.get(user_id).access_level == 50
    assert project.members.get(user_id).access_level == 50  # all members are direct here
    assert sim.access_level(project_id, "grace") == 50


@pytest.mark.parametrize("level", [0, 15, 60])
def test_add_member_refuses_unknown_levels(sim, project_id, level):
    with pytest.raises(ValueError, match="access_level"):
        sim.add_member(project_id, "grace", level)


def test_a_non_member_is_404_not_found(sim, project, project_id, api):
    outsider = sim.add_user("mallory")
    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.members_all.get(outsider.id)
    assert caught.value.response_code == 404
    answer = api.get(f"/projects/{project_id}/members/all/{outsider.id}")
    assert answer.json() == {"message": "404 Not found"}

    sim.add_member(project_id, "mallory", 10)
    sim.remove_member(project_id, "mallory")
    assert sim.access_level(project_id, "mallory") is None
    assert api.get(f"/projects/{project_id}/members/all/{outsider.id}").status_code == 404


def test_members_all_is_paginated(sim, project, project_id, api):
    for index in range(3):
        sim.add_member(project_id, f"dev{index}", 30)
    everyone = project.members_all.list(get_all=True)
    assert {m.username for m in everyone} == {"workqueue-bot", "ada", "dev0", "dev1", "dev2"}
    page = api.get(f"/projects/{project_id}/members/all", params={"per_page": 2})
    assert (len(page.json()), page.headers["X-Total"], page.headers["X-Next-Page"]) == (2, "5", "2")
    assert 'rel="next"' in page.headers["Link"]
