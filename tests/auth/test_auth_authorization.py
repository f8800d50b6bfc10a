"""Authorization rules as tables: claims (AND/OR, coercion, lists), groups, scoping, union."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from workqueue.auth import (
    ALL_ITEM_TYPES,
    NO_ITEM_TYPES,
    AuthorizationRule,
    ItemTypeScope,
    Principal,
    granted_permissions,
    is_allowed,
    readable_item_types,
    rule_matches,
)

GITLAB = "https://gitlab.com"
CLUSTER = "https://oidc.op1.openshiftapps.com/2a3b4c"


def rule(**fields: Any) -> AuthorizationRule:
    fields.setdefault("permissions", ["read"])
    if "issuer" in fields:
        fields.setdefault("claims", {})
        fields["claims"] = {"aud": "workqueue-service", **fields["claims"]}
    return AuthorizationRule.model_validate(fields)


def jwt_principal(
    issuer: str = GITLAB, configured: frozenset[str] | None = None, **claims: Any
) -> Principal:
    claims = {"iss": issuer, "aud": "workqueue-service", "sub": "someone", **claims}
    return Principal(
        identity=claims["sub"],
        kind="jwt",
        issuer=issuer,
        claims=MappingProxyType(claims),
        configured_issuers=configured if configured is not None else frozenset({issuer}),
    )


def ocp_user(*groups: str) -> Principal:
    return Principal(identity="alice", kind="openshift", groups=frozenset(groups))


GITLAB_CI = jwt_principal(
    project_path="redhat/hummingbird/rpms",
    project_id="4242",
    ref="main",
    ref_protected="true",
    user_access_level="maintainer",
    groups_direct=["redhat", "redhat/hummingbird"],
)

CLAIM_CASES = [
    # (description, rule claims, principal, matches)
    ("single claim equal", {"project_path": "redhat/hummingbird/rpms"}, GITLAB_CI, True),
    ("single claim different", {"project_path": "redhat/other"}, GITLAB_CI, False),
    (
        "AND across keys: all match",
        {"project_path": "redhat/hummingbird/rpms", "ref": "main"},
        GITLAB_CI,
        True,
    ),
    (
        "AND across keys: one differs",
        {"project_path": "redhat/hummingbird/rpms", "ref": "develop"},
        GITLAB_CI,
        False,
    ),
    ("OR within a list: one matches", {"ref": ["develop", "main"]}, GITLAB_CI, True),
    ("OR within a list: none matches", {"ref": ["develop", "release"]}, GITLAB_CI, False),
    ("missing claim never matches", {"environment": "production"}, GITLAB_CI, False),
    (
        "case-sensitive: other case never matches",
        {"project_path": "RedHat/Hummingbird/RPMS"},
        GITLAB_CI,
        False,
    ),
    ("case-sensitive: ref Main is not main", {"ref": "Main"}, GITLAB_CI, False),
    ("int rule vs string claim", {"project_id": 4242}, GITLAB_CI, True),
    ("int rule vs other string", {"project_id": 4243}, GITLAB_CI, False),
    ("bool rule vs string claim", {"ref_protected": True}, GITLAB_CI, True),
    ("bool false vs 'true'", {"ref_protected": False}, GITLAB_CI, False),
    ("string rule vs int claim", {"runner_id": "17"}, jwt_principal(runner_id=17), True),
    (
        "string rule vs bool claim",
        {"ref_protected": "true"},
        jwt_principal(ref_protected=True),
        True,
    ),
    (
        "string rule vs bool claim: exact text",
        {"ref_protected": "TRUE"},
        jwt_principal(ref_protected=True),
        False,
    ),
    ("bool rule vs bool claim", {"ref_protected": True}, jwt_principal(ref_protected=True), True),
    ("int 1 is not bool true", {"flag": True}, jwt_principal(flag=1), False),
    ("list claim: one element matches", {"groups_direct": "redhat"}, GITLAB_CI, True),
    ("list claim vs list rule", {"groups_direct": ["x", "redhat/hummingbird"]}, GITLAB_CI, True),
    (
        "list claim vs list rule, other case",
        {"groups_direct": ["REDHAT/hummingbird"]},
        GITLAB_CI,
        False,
    ),
    ("list claim: no element matches", {"groups_direct": "fedora"}, GITLAB_CI, False),
    ("aud as a token list", {}, jwt_principal(aud=["https://k8s", "workqueue-service"]), True),
    ("aud list without ours", {}, jwt_principal(aud=["https://k8s", "other"]), False),
    ("rule aud differs", {"aud": "other-service"}, GITLAB_CI, False),
    (
        "object claims never match",
        {"kubernetes.io": "x"},
        jwt_principal(**{"kubernetes.io": {}}),
        False,
    ),
    ("null claims never match", {"ref": "none"}, jwt_principal(ref=None), False),
    ("float claims never match", {"level": "1.0"}, jwt_principal(level=1.0), False),
]


@pytest.mark.parametrize(
    ("claims", "principal", "matches"),
    [case[1:] for case in CLAIM_CASES],
    ids=[case[0] for case in CLAIM_CASES],
)
def test_claim_matching(claims, principal, matches):
    assert rule_matches(principal, rule(issuer=GITLAB, claims=claims)) is matches


ISSUER_CASES = [
    ("same issuer", GITLAB, jwt_principal(), True),
    ("other issuer", "https://gitlab.example.com", jwt_principal(), False),
    ("k8s rule, cluster token", "k8s", jwt_principal(CLUSTER, frozenset({"k8s"})), True),
    ("k8s rule, GitLab token", "k8s", jwt_principal(), False),
    ("URL rule of the cluster issuer", CLUSTER, jwt_principal(CLUSTER, frozenset({"k8s"})), False),
    (
        "URL and k8s for one issuer",
        CLUSTER,
        jwt_principal(CLUSTER, frozenset({"k8s", CLUSTER})),
        True,
    ),
    ("OpenShift user never matches issuer rules", GITLAB, ocp_user("admins"), False),
    (
        "local user never matches issuer rules",
        GITLAB,
        Principal(identity="dev", kind="local"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("issuer", "principal", "matches"),
    [case[1:] for case in ISSUER_CASES],
    ids=[case[0] for case in ISSUER_CASES],
)
def test_issuer_rules_match_only_their_issuer(issuer, principal, matches):
    assert rule_matches(principal, rule(issuer=issuer)) is matches


GROUP_CASES = [
    ("member of the only group", ["admins"], ocp_user("admins"), True),
    ("member of one listed group", ["admins", "devs"], ocp_user("devs", "x"), True),
    ("member of none", ["admins"], ocp_user("devs"), False),
    ("no groups at all", ["admins"], ocp_user(), False),
    ("group names are exact", ["admins"], ocp_user("Admins"), False),
    (
        "a JWT `groups` claim is not OpenShift membership",
        ["admins"],
        jwt_principal(groups=["admins"]),
        False,
    ),
]


@pytest.mark.parametrize(
    ("groups", "principal", "matches"),
    [case[1:] for case in GROUP_CASES],
    ids=[case[0] for case in GROUP_CASES],
)
def test_group_rules(groups, principal, matches):
    assert rule_matches(principal, rule(groups=groups)) is matches


SEED_RULES = [
    rule(issuer="k8s", permissions=["read"]),
    rule(
        groups=["konflux-hummingbird-admin-access"],
        permissions=["read", "submit", "retry"],
        projects=["**"],
    ),
    rule(
        issuer="k8s",
        claims={"sub": "system:serviceaccount:hummingbird--internal:rpms-ci"},
        permissions=["submit", "retry"],
        item_types=["mr"],
        projects=["redhat/hummingbird/**"],
    ),
    rule(
        issuer=GITLAB,
        claims={"project_path": "redhat/hummingbird/rpms"},
        permissions=["read", "submit", "retry"],
        item_types=["mr"],
        projects=["{project_path}"],
    ),
]
RPMS_CI = jwt_principal(
    CLUSTER,
    frozenset({"k8s"}),
    sub="system:serviceaccount:hummingbird--internal:rpms-ci",
    aud=[CLUSTER, "workqueue-service"],
)
OTHER_SA = jwt_principal(
    CLUSTER, frozenset({"k8s"}), sub="system:serviceaccount:ns:other", aud=["workqueue-service"]
)
MR_ONLY = ItemTypeScope(all_types=False, item_types=frozenset({"mr"}))

GRANT_CASES = [
    ("admin group: everything everywhere", ocp_user("konflux-hummingbird-admin-access"), {
        "read": ALL_ITEM_TYPES, "submit": ALL_ITEM_TYPES, "retry": ALL_ITEM_TYPES,
    }),
    ("union: read anywhere + submit/retry on mr", RPMS_CI, {
        "read": ALL_ITEM_TYPES, "submit": MR_ONLY, "retry": MR_ONLY,
    }),
    ("another service account: read only", OTHER_SA, {"read": ALL_ITEM_TYPES}),
    ("GitLab CI of the project: mr only", GITLAB_CI, {
        "read": MR_ONLY, "submit": MR_ONLY, "retry": MR_ONLY,
    }),
    ("GitLab CI of another project: nothing", jwt_principal(project_path="evil/fork"), {}),
    ("authenticated user without groups: nothing", ocp_user("system:authenticated"), {}),
    ("local development user: everything", Principal(identity="dev", kind="local"), {
        "read": ALL_ITEM_TYPES, "submit": ALL_ITEM_TYPES, "retry": ALL_ITEM_TYPES,
        "report": ALL_ITEM_TYPES,
    }),
]  # fmt: skip


@pytest.mark.parametrize(
    ("principal", "expected"),
    [case[1:] for case in GRANT_CASES],
    ids=[case[0] for case in GRANT_CASES],
)
def test_granted_permissions_with_the_seed_rules(principal, expected):
    assert granted_permissions(principal, SEED_RULES) == expected


ALLOWED_CASES = [
    (RPMS_CI, "submit", "mr", True),
    (RPMS_CI, "submit", "other", False),
    (RPMS_CI, "read", "other", True),
    (OTHER_SA, "submit", "mr", False),
    (GITLAB_CI, "retry", "mr", True),
    (GITLAB_CI, "read", "other", False),
    (ocp_user("devs"), "read", "mr", False),
]


@pytest.mark.parametrize(("principal", "permission", "item_type", "allowed"), ALLOWED_CASES)
def test_is_allowed(principal, permission, item_type, allowed):
    assert is_allowed(principal, SEED_RULES, permission, item_type) is allowed


def test_scopes_of_several_rules_are_merged():
    rules = [
        rule(groups=["a"], permissions=["read"], item_types=["mr"]),
        rule(groups=["b"], permissions=["read", "retry"], item_types=["pkg"], projects=["**"]),
        rule(groups=["c"], permissions=["retry"], projects=["**"]),
    ]
    scopes = granted_permissions(ocp_user("a", "b"), rules)
    assert scopes["read"] == ItemTypeScope(all_types=False, item_types=frozenset({"mr", "pkg"}))
    assert scopes["retry"] == ItemTypeScope(all_types=False, item_types=frozenset({"pkg"}))
    assert "submit" not in scopes
    assert granted_permissions(ocp_user("a", "c"), rules)["retry"] == ALL_ITEM_TYPES


def test_readable_item_types():
    assert readable_item_types(RPMS_CI, SEED_RULES) == ALL_ITEM_TYPES
    assert readable_item_types(GITLAB_CI, SEED_RULES) == MR_ONLY
    nothing = readable_item_types(ocp_user(), SEED_RULES)
    assert nothing == NO_ITEM_TYPES
    assert nothing.is_empty
    assert not nothing.allows("mr")


def test_no_rules_grant_nothing():
    assert granted_permissions(GITLAB_CI, []) == {}
    assert not is_allowed(ocp_user("admins"), [], "read", "mr")
