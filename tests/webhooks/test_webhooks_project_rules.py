"""The pure rules behind project-scoped webhook secrets and id/path agreement, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from workqueue.api.webhook_projects import KnownProject, names_one_project
from workqueue.api.webhook_secrets import ProjectScope, WebhookSecrets
from workqueue.gitlab.hooks import HookProject, project_id_conflict

APP = KnownProject(42, "team/app")
PROD = KnownProject(7, "victim/prod")


@pytest.mark.parametrize(
    ("item_names", "project", "matches"),
    [
        # One name of the item's project: compared with the hook's name of that kind.
        (("team/app",), HookProject(42, "team/app"), True),
        (("42",), HookProject(42, "team/app"), True),
        (("42",), HookProject(42, None), True),
        (("team/app",), HookProject(None, "team/app"), True),
        (("team/app",), HookProject(42, None), False),  # an id says nothing about a path
        (("42",), HookProject(None, "team/app"), False),
        # Both names of the item's project: neither may contradict the hook.
        (("42", "team/app"), HookProject(42, "team/app"), True),
        (("42", "team/app"), HookProject(7, "team/app"), False),  # the path is ours, the id not
        (("42", "team/app"), HookProject(42, "victim/prod"), False),  # the id is ours, the path not
        (("42", "team/app"), HookProject(42, None), True),
        (("Team/App", "team/app"), HookProject(None, "team/app"), True),  # either spelling
        # Nothing to compare.
        ((None,), HookProject(42, "team/app"), False),
        ((), HookProject(42, "team/app"), False),
        (("team/app",), HookProject(None, None), False),
    ],
)
def test_is_one_of_never_takes_an_id_or_a_path_that_the_other_contradicts(
    item_names, project, matches
):
    assert project.is_one_of(*item_names) is matches


@pytest.mark.parametrize(
    ("body", "conflict"),
    [
        ({"project_id": 42, "project": {"id": 42}}, False),
        ({"project_id": 42, "project": {"id": 7}}, True),
        ({"project_id": 42}, False),
        ({"project": {"id": 7}}, False),
        ({"project_id": "7", "project": {"id": 42}}, False),  # not an id: absent
        ({"project_id": 42, "project": {"id": True}}, False),
        ({}, False),
    ],
)
def test_a_body_whose_two_project_ids_differ_contradicts_itself(body: dict[str, Any], conflict):
    assert project_id_conflict(body) is conflict


@pytest.mark.parametrize(
    ("project_id", "path", "by_id", "by_path", "one"),
    [
        (42, "team/app", APP, APP, True),
        (42, "team/app", APP, None, True),  # by id is enough
        (42, "team/app2", APP, KnownProject(42, "team/app2"), True),  # renamed, id cached
        (7, "team/app", PROD, APP, False),  # the review's forged body
        (999, "team/app", None, APP, False),  # an id GitLab does not show, a served path
        (42, "victim/prod", APP, PROD, False),
        (42, "victim/prod", APP, None, False),
        (42, "Team/App", APP, APP, False),  # GitLab finds it, but spells it otherwise
        (555, "team/hidden", None, None, True),  # neither shown: names nothing we act on
    ],
)
def test_id_and_path_name_one_project_only_as_gitlab_knows_them(
    project_id, path, by_id, by_path, one
):
    assert names_one_project(project_id, path, by_id, by_path) is one


@pytest.mark.parametrize(
    ("patterns", "path", "covered"),
    [
        (("team/**",), "team/app", True),
        (("team/**",), "team/sub/app", True),
        (("team/**",), "teams/app", False),
        (("team/*",), "team/sub/app", False),
        (("victim/prod",), "victim/prod", True),
        (("victim/prod",), "Victim/Prod", False),
        (("**",), "anything/at/all", True),
        (("team/**", "ops/tools"), "ops/tools", True),
    ],
)
def test_a_scope_covers_paths_as_authorization_rules_do(patterns, path, covered):
    assert ProjectScope.of(patterns).covers(path) is covered


def test_a_token_carries_the_projects_of_every_secret_it_equals():
    secrets = WebhookSecrets(
        ["legacy"],
        [("team", ["team/**"]), ("victim", ["victim/prod"]), ("team", ["ops/tools"])],
    )
    team = secrets.scope("team")
    assert team is not None
    assert team.patterns == ("team/**", "ops/tools")
    assert not team.every_project
    assert (team.covers("ops/tools"), team.covers("victim/prod")) == (True, False)
    legacy = secrets.scope("legacy")
    assert legacy is not None
    assert legacy.every_project
    assert secrets.scope("nobody") is None
    assert secrets.scope(None) is None
    assert secrets.matches("victim")
    assert not secrets.matches("victim ")
    assert "team" not in repr(secrets)
    assert len(secrets) == 4
