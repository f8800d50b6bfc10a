"""The rules behind project-scoped webhook secrets and id/path agreement: the pure ones as
tables, then the directory's answers from the GitLab simulator."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_support import install_context, mr_registry

from workqueue.api.webhooks.secrets import ProjectScope, WebhookSecrets
from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.webhook_bodies import (
    HookProject,
    gitlab_event_type,
    malformed_project_ids,
    project_id_conflict,
)
from workqueue.receivers.projects import (
    KnownProject,
    ProjectDirectory,
    ProjectLookupUnavailable,
    names_one_project,
)
from workqueue.types.plugin import InstallContext

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


def test_a_token_gitlab_refuses_makes_every_check_unavailable_not_open(simulator, world):
    """A 401 (revoked or expired service token) or 403 (a token without `read_api`) is
    GitLab refusing every question, not "no such project": treating it as the latter would
    accept every body whose id and path disagree. Only a 404 says GitLab shows none."""
    registry = mr_registry(simulator.url)
    bad = InstallContext(
        gitlab_token="revoked-token",
        gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
    )
    directory = ProjectDirectory.for_registry(registry, bad)
    try:
        with pytest.raises(ProjectLookupUnavailable):
            directory.same_project(world.project_id + 1000, world.project_path)
        with pytest.raises(ProjectLookupUnavailable):
            directory.path_of(world.project_id)
    finally:
        directory.close()
    good = ProjectDirectory.for_registry(registry, install_context())
    try:
        assert good.same_project(world.project_id, world.project_path)
        assert not good.same_project(world.project_id + 1000, world.project_path)
        assert good.path_of(world.project_id + 1000) is None
    finally:
        good.close()


@pytest.mark.parametrize(
    ("body", "malformed"),
    [
        ({"project": {"id": 42}, "project_id": 42}, []),
        ({"project": {"id": None}}, []),  # null: no id, stored as no id
        ({}, []),
        ({"project": "team/app"}, []),  # no object: no id either way
        ({"project": {"id": 42.0}}, [("project", "id")]),  # `42.0`, and `4.2e1`
        ({"project": {"id": "42"}}, [("project", "id")]),
        ({"project": {"id": True}}, [("project", "id")]),
        ({"project": {"id": 0}}, [("project", "id")]),
        ({"project": {"id": -7}}, [("project", "id")]),
        ({"project": {"id": 2**63}}, [("project", "id")]),
        ({"project": {"id": [42]}}, [("project", "id")]),
        ({"project_id": 42.0}, [("project_id",)]),
        ({"project": {"id": "7"}, "project_id": 7.0}, [("project", "id"), ("project_id",)]),
    ],
)
def test_a_project_id_that_is_there_must_be_a_positive_json_integer(body, malformed):
    assert malformed_project_ids(body) == malformed


@pytest.mark.parametrize(
    ("body", "header", "kind"),
    [
        ({"object_kind": "push"}, None, "push"),
        ({"object_kind": "trunk.read_head"}, None, None),  # the service's own
        ({"object_kind": "trunk.read_head"}, "Push Hook", None),  # not dressed by a header
        ({"object_kind": "trunk.look_again"}, None, None),
        ({"object_kind": "made_up"}, None, None),
        ({}, "Push Hook", "push"),
    ],
)
def test_only_kinds_gitlab_sends_are_taken_from_outside(body, header, kind):
    assert gitlab_event_type(body, header) == kind
