"""Project scopes of rules (`projects:`): glob semantics, claim placeholders, config checks."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from workqueue.auth import AuthorizationRule, Principal
from workqueue.auth.authorization import EVERYTHING, Grant, grants, is_allowed_on_project
from workqueue.project_patterns import path_matches, pattern_problem, pattern_regex

CI_CLAIMS = {"project_path": "team/app", "namespace_path": "team", "project_id": "42"}

MATCH_CASES = [
    # Each row: pattern, claims of the token, project path, whether it matches.
    ("team/app", {}, "team/app", True),
    ("team/app", {}, "team/app2", False),
    ("team/app", {}, "Team/App", False),  # case-sensitive
    ("team/app", {}, "xteam/app", False),  # anchored at the start
    ("team/*", {}, "team/app", True),
    ("team/*", {}, "team/sub/app", False),  # `*` stays within one segment
    ("team/**", {}, "team/sub/app", True),  # `**` crosses segments
    ("team/**", {}, "team", False),
    ("team/**", {}, "team2/app", False),
    ("**", {}, "any/where/at/all", True),
    ("*/app", {}, "team/app", True),
    ("*/app", {}, "a/b/app", False),
    ("team/app-*", {}, "team/app-docs", True),
    ("team.x/app", {}, "teamyx/app", False),  # `.` is literal
    ("team/a+b", {}, "team/aab", False),  # regex characters are literal
    ("{project_path}", CI_CLAIMS, "team/app", True),
    ("{project_path}", CI_CLAIMS, "team/other", False),
    ("{project_path}", CI_CLAIMS, "team/app/sub", False),
    ("{namespace_path}/**", CI_CLAIMS, "team/anything", True),
    ("{namespace_path}/**", CI_CLAIMS, "other/anything", False),
    ("{project_path}", {}, "team/app", False),  # missing claim: never matches
    ("{project_path}", {"project_path": ""}, "", False),
    ("{project_path}", {"project_path": True}, "True", False),  # not a string
    ("{project_path}", {"project_path": ["team/app"]}, "team/app", False),
    # A claim value is text, never a wildcard or an expression.
    ("{project_path}", {"project_path": "**"}, "team/app", False),
    # ...and only path characters: anything else cannot name a GitLab project.
    ("{project_path}", {"project_path": "**"}, "**", False),
    ("{project_path}", {"project_path": "tëam/app"}, "tëam/app", False),
    ("{project_path}", {"project_path": "team/app\n"}, "team/app\n", False),
    ("{project_path}", {"project_path": "team app"}, "team app", False),
    ("{project_path}", {"project_path": "team/a_b.c-d"}, "team/a_b.c-d", True),
    ("{project_path}", {"project_path": "team/.*"}, "team/app", False),
    ("{project_path}", {"project_path": "team/*"}, "team/app", False),
    ("x/{project_id}", CI_CLAIMS, "x/42", True),
    ("x/{project_id}", {"project_id": 42}, "x/42", True),  # integers in decimal
]


@pytest.mark.parametrize(("pattern", "claims", "path", "matches"), MATCH_CASES)
def test_pattern_matching(pattern: str, claims: dict[str, Any], path: str, matches: bool) -> None:
    regex = pattern_regex(pattern, claims)
    assert (regex is not None and path_matches([regex], path)) is matches


@pytest.mark.parametrize(("pattern", "claims", "path", "matches"), MATCH_CASES)
def test_expressions_are_the_same_in_postgresql(
    sessions: Any, pattern: str, claims: dict[str, Any], path: str, matches: bool
) -> None:
    """Lists filter with PostgreSQL's `~`: it must agree with Python on every row."""
    regex = pattern_regex(pattern, claims)
    if regex is None:
        assert not matches
        return
    import sqlalchemy as sa  # noqa: PLC0415 - only this test needs the database

    with sessions() as session:
        found = session.execute(sa.text("SELECT :path ~ :regex"), {"path": path, "regex": regex})
        assert found.scalar_one() is matches
    assert bool(re.match(regex, path, re.DOTALL)) is matches


PROBLEM_CASES = [
    ("", "must not be empty"),
    (" team/app", "spaces"),
    ("team/***", "`**`"),
    ("team/{project_path", "stray brace"),
    ("team/project_path}", "stray brace"),
    ("team/{}", "stray brace"),
    ("team/{a b}", "stray brace"),
    ("tëam/**", "ASCII"),
]


@pytest.mark.parametrize(("pattern", "problem"), PROBLEM_CASES)
def test_unusable_patterns_are_refused(pattern: str, problem: str) -> None:
    found = pattern_problem(pattern)
    assert found is not None
    assert problem in found


def rule(**fields: Any) -> AuthorizationRule:
    return AuthorizationRule.model_validate(fields)


GITLAB = "https://gitlab.example.com"


def ci_rule(**fields: Any) -> AuthorizationRule:
    return rule(issuer=GITLAB, claims={"aud": "workqueue-service"}, **fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"permissions": ["submit"]}, "a rule granting submit must list `projects`"),
        ({"permissions": ["read", "retry"]}, "a rule granting retry must list `projects`"),
        ({"permissions": ["submit", "retry"]}, "granting submit and retry"),
        ({"permissions": ["submit"], "projects": []}, "at least 1 item"),
        ({"permissions": ["submit"], "projects": ["a/**", "a/**"]}, "duplicate"),
        ({"permissions": ["submit"], "projects": ["a/{x"]}, "stray brace"),
    ],
)
def test_config_refuses_write_rules_without_a_project_scope(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ci_rule(**fields)


def test_placeholders_need_an_issuer_rule() -> None:
    with pytest.raises(ValidationError, match="placeholders in `projects` need token claims"):
        rule(groups=["admins"], permissions=["read"], projects=["{project_path}"])


def test_read_only_rules_may_omit_projects() -> None:
    assert ci_rule(permissions=["read"]).projects is None


def ci_principal(**claims: Any) -> Principal:
    return Principal(
        identity="project_path:team/app:ref_type:branch:ref:main",
        kind="jwt",
        issuer=GITLAB,
        claims={"iss": GITLAB, "aud": "workqueue-service", **claims},
        configured_issuers=frozenset({GITLAB}),
    )


SCOPED_RULES = [
    ci_rule(permissions=["read", "submit"], projects=["{project_path}"], item_types=["mr"]),
    ci_rule(permissions=["read"], projects=["shared/**"]),
]

PROJECT_CASES = [
    ("own project", "submit", "mr", "team/app", True),
    ("another project", "submit", "mr", "team/other", False),
    ("same path other case", "submit", "mr", "TEAM/APP", False),
    ("own project, other type", "submit", "trunk", "team/app", False),
    ("read of a shared project, any type", "read", "trunk", "shared/lib", True),
    ("no submit on the shared project", "submit", "mr", "shared/lib", False),
    ("an item without a project is out of every scope", "read", "mr", None, False),
    ("retry is granted by no rule", "retry", "mr", "team/app", False),
]


@pytest.mark.parametrize(
    ("permission", "item_type", "project", "allowed"),
    [case[1:] for case in PROJECT_CASES],
    ids=[case[0] for case in PROJECT_CASES],
)
def test_project_scopes(
    permission: str, item_type: str, project: str | None, allowed: bool
) -> None:
    principal = ci_principal(project_path="team/app")
    assert (
        is_allowed_on_project(principal, SCOPED_RULES, permission, item_type, project)  # type: ignore[arg-type]
        is allowed
    )


def test_a_token_without_the_placeholder_claim_gets_nothing_from_that_rule() -> None:
    principal = ci_principal()  # no project_path claim
    assert grants(principal, SCOPED_RULES, "submit") == ()
    assert not is_allowed_on_project(principal, SCOPED_RULES, "submit", "mr", "team/app")
    # The other rule still applies.
    assert is_allowed_on_project(principal, SCOPED_RULES, "read", "mr", "shared/x")


def test_grants_keep_each_rules_types_and_projects_together() -> None:
    found = grants(ci_principal(project_path="team/app"), SCOPED_RULES, "read")
    assert len(found) == 2
    mr_in_own_project, shared = found
    assert mr_in_own_project.item_types == frozenset({"mr"})
    assert mr_in_own_project.allows("mr", "team/app")
    assert not mr_in_own_project.allows("trunk", "team/app")
    assert shared.item_types is None
    assert shared.allows("trunk", "shared/a/b")


def test_the_local_user_and_unscoped_rules_reach_everything() -> None:
    local = Principal(identity="dev", kind="local")
    assert grants(local, [], "submit") == (EVERYTHING,)
    unscoped = Grant(item_types=None, project_regexes=None)
    assert unscoped.allows("mr", None)
    assert unscoped.allows("mr", "any/project")


def test_issuer_keys_separate_callers_with_the_same_subject() -> None:
    from_gitlab = ci_principal()
    from_cluster = Principal(identity=from_gitlab.identity, kind="jwt", issuer="https://k8s")
    openshift = Principal(identity=from_gitlab.identity, kind="openshift")
    local = Principal(identity=from_gitlab.identity, kind="local")
    keys = {p.issuer_key for p in (from_gitlab, from_cluster, openshift, local)}
    assert keys == {GITLAB, "https://k8s", "openshift", "local"}
