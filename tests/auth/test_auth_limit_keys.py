"""What the limits count a caller as (`limit_key`), as a table over principals and rules."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from workqueue.auth.config import AuthorizationRule
from workqueue.auth.limit_keys import LimitKey, LimitKeyError, limit_key
from workqueue.auth.principal import Principal

GITLAB = "https://gitlab.com"
CI_SUB = "project_path:team/app:ref_type:branch:ref:main"


def rule(**fields: Any) -> AuthorizationRule:
    fields.setdefault("permissions", ["read"])
    if "groups" not in fields:
        fields.setdefault("issuer", GITLAB)
        fields["claims"] = {"aud": "workqueue-service", **fields.get("claims", {})}
    return AuthorizationRule.model_validate(fields)


def ci_job(
    issuer: str = GITLAB, configured: frozenset[str] | None = None, **claims: Any
) -> Principal:
    claims = {"sub": CI_SUB, "aud": "workqueue-service", **claims}
    return Principal(
        identity=claims["sub"],
        kind="jwt",
        issuer=issuer,
        claims=MappingProxyType(claims),
        configured_issuers=configured if configured is not None else frozenset({issuer}),
    )


BY_PROJECT = rule(limit_key="project_path")

KEYS = [
    (
        "no rule sets a limit key",
        ci_job(project_path="team/app"),
        [rule()],
        f"identity:{CI_SUB}",
        CI_SUB,
    ),
    (
        "the matching rule's claim",
        ci_job(project_path="team/app"),
        [BY_PROJECT],
        "claim:project_path=team/app",
        "project_path team/app",
    ),
    (
        "a rule that sets it and one that does not",
        ci_job(project_path="team/app"),
        [rule(), BY_PROJECT],
        "claim:project_path=team/app",
        "project_path team/app",
    ),
    (
        "an integer claim reads as its JSON text",
        ci_job(project_id=4242),
        [rule(limit_key="project_id")],
        "claim:project_id=4242",
        "project_id 4242",
    ),
    (
        "a rule that does not match the token is not asked",
        ci_job(project_path="team/app"),
        [rule(claims={"ref": "other"}, limit_key="project_path")],
        f"identity:{CI_SUB}",
        CI_SUB,
    ),
    (
        "a rule of another issuer is not asked",
        ci_job(project_path="team/app"),
        [rule(issuer="https://other.example.com", limit_key="project_path")],
        f"identity:{CI_SUB}",
        CI_SUB,
    ),
    (
        "an OpenShift user counts as itself",
        Principal(identity="alice", kind="openshift", groups=frozenset({"admins"})),
        [rule(groups=["admins"]), BY_PROJECT],
        "identity:alice",
        "alice",
    ),
    (
        "the local user counts as itself",
        Principal(identity="dev-user", kind="local"),
        [BY_PROJECT],
        "identity:dev-user",
        "dev-user",
    ),
    (
        "a claim value shaped like a key stays inside its own prefix",
        ci_job(project_path="x=identity:y"),
        [BY_PROJECT],
        "claim:project_path=x=identity:y",
        "project_path x=identity:y",
    ),
]


@pytest.mark.parametrize(
    ("principal", "rules", "key", "shown_as"),
    [case[1:] for case in KEYS],
    ids=[case[0] for case in KEYS],
)
def test_limit_keys(principal, rules, key, shown_as):
    assert limit_key(principal, rules) == LimitKey(key=key, shown_as=shown_as)


REFUSED = [
    ("the claim is missing", ci_job(), [BY_PROJECT], "no usable `project_path` claim"),
    ("the claim is empty", ci_job(project_path=""), [BY_PROJECT], "no usable `project_path`"),
    ("the claim is a list", ci_job(project_path=["a", "b"]), [BY_PROJECT], "no usable"),
    ("the claim is a boolean", ci_job(project_path=True), [BY_PROJECT], "no usable"),
    ("the claim is an object", ci_job(project_path={"a": 1}), [BY_PROJECT], "no usable"),
    (
        "two matching rules name different claims",
        ci_job(
            issuer="https://cluster.example.com",
            configured=frozenset({"k8s", "https://cluster.example.com"}),
            project_path="team/app",
            namespace_path="team",
        ),
        [
            rule(issuer="k8s", limit_key="project_path"),
            rule(issuer="https://cluster.example.com", limit_key="namespace_path"),
        ],
        r"different claims \(namespace_path, project_path\)",
    ),
]


@pytest.mark.parametrize(
    ("principal", "rules", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_a_caller_its_rules_cannot_count_is_refused(principal, rules, message):
    with pytest.raises(LimitKeyError, match=message):
        limit_key(principal, rules)


def test_subjects_and_claim_values_never_share_a_key():
    # A subject spelled like another caller's claim key is still a subject.
    spoof = ci_job(sub="claim:project_path=team/app")
    assert limit_key(spoof, [rule()]).key == "identity:claim:project_path=team/app"
    assert (
        limit_key(ci_job(project_path="team/app"), [BY_PROJECT]).key
        != limit_key(spoof, [rule()]).key
    )


def test_limit_key_is_pure():
    principal, rules = ci_job(project_path="team/app"), [BY_PROJECT]
    assert limit_key(principal, rules) == limit_key(principal, rules)
    assert principal.claims["project_path"] == "team/app"
