"""The `authorization:` section: what is accepted, and every way a rule is refused."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from workqueue.auth import AuthorizationConfig, AuthorizationRule

SEED_EXAMPLE = """
rules:
  - issuer: k8s
    claims:
      aud: workqueue-service
    permissions: [read]
  - groups:
      - konflux-hummingbird-admin-access
    permissions: [read, submit, retry]
    projects: ["**"]
  - issuer: k8s
    claims:
      aud: workqueue-service
      sub: system:serviceaccount:hummingbird--internal:rpms-ci
    permissions: [submit, retry]
    item_types: [mr]
    projects: ["redhat/hummingbird/**"]
  - issuer: https://gitlab.com
    claims:
      aud: workqueue-service
      project_path: redhat/hummingbird/rpms
      project_id: 4242
      ref_protected: true
      ref: [main, release]
    permissions: [read, submit, retry]
    item_types: [mr]
    projects: ["{project_path}"]
"""


def test_the_example_of_the_documentation_is_valid():
    config = AuthorizationConfig.model_validate(yaml.safe_load(SEED_EXAMPLE))
    assert len(config.rules) == 4
    assert config.issuers == {"k8s", "https://gitlab.com"}
    assert config.insecure_issuers == frozenset()
    gitlab = config.rules[3]
    assert gitlab.claims == {
        "aud": "workqueue-service",
        "project_path": "redhat/hummingbird/rpms",
        "project_id": 4242,
        "ref_protected": True,
        "ref": ["main", "release"],
    }
    assert gitlab.item_types == ["mr"]
    assert config.rules[1].groups == ["konflux-hummingbird-admin-access"]
    assert config.rules[0].item_types is None


def test_no_section_means_no_rules():
    assert AuthorizationConfig().rules == []


def test_an_http_issuer_is_accepted_and_flagged():
    config = AuthorizationConfig.model_validate(
        {
            "rules": [
                {
                    "issuer": "http://127.0.0.1:8080",
                    "claims": {"aud": "x"},
                    "permissions": ["read"],
                }
            ]
        }
    )
    assert config.rules[0].insecure_issuer
    assert config.insecure_issuers == {"http://127.0.0.1:8080"}


def _rule(**overrides: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "issuer": "https://gitlab.com",
        "claims": {"aud": "workqueue-service"},
        "permissions": ["read"],
    }
    rule.update(overrides)
    return {name: value for name, value in rule.items() if value is not None}


INVALID = [
    (
        "groups and issuer",
        _rule(groups=["admins"]),
        "either `groups` or `issuer` + `claims`, not both",
    ),
    ("neither groups nor issuer", {"permissions": ["read"]}, "needs either `groups` or `issuer`"),
    (
        "claims on a groups rule",
        {"groups": ["admins"], "claims": {"aud": "x"}, "permissions": ["read"]},
        "`claims` belong to `issuer` rules",
    ),
    ("issuer without claims", _rule(claims=None), "must bind the audience"),
    ("claims without aud", _rule(claims={"sub": "x"}), "must bind the audience"),
    ("issuer that is not a URL", _rule(issuer="gitlab.com"), "must be 'k8s' or an https:// URL"),
    ("issuer of another scheme", _rule(issuer="ftp://gitlab.com"), "https:// URL"),
    ("issuer without host", _rule(issuer="https://"), "has no host"),
    ("issuer with a query", _rule(issuer="https://gitlab.com/?x=1"), "query or fragment"),
    ("issuer with a fragment", _rule(issuer="https://gitlab.com#x"), "query or fragment"),
    ("issuer with credentials", _rule(issuer="https://u:p@gitlab.com"), "credentials"),
    ("shorthand in capitals", _rule(issuer="K8S"), "https:// URL"),
    ("no permissions", _rule(permissions=[]), "at least 1 item"),
    ("missing permissions", _rule(permissions=None), "permissions: Field required"),
    ("unknown permission", _rule(permissions=["admin"]), "'read', 'submit', 'retry' or 'report'"),
    ("duplicate permission", _rule(permissions=["read", "read"]), "duplicate permissions: read"),
    ("`types` instead of `item_types`", _rule(types=["mr"]), "types: Extra inputs"),
    ("unknown key", _rule(audience="x"), "audience: Extra inputs"),
    ("empty item_types", _rule(item_types=[]), "at least 1 item"),
    ("duplicate item_types", _rule(item_types=["mr", "mr"]), "duplicate entries: mr"),
    ("empty group list", {"groups": [], "permissions": ["read"]}, "at least 1 item"),
    ("empty group name", {"groups": [""], "permissions": ["read"]}, "at least 1 character"),
    ("float claim", _rule(claims={"aud": "x", "level": 1.0}), "claims.level"),
    ("null claim", _rule(claims={"aud": None}), "claims.aud"),
    ("nested claim", _rule(claims={"aud": "x", "k": {"a": 1}}), "claims.k"),
    ("empty alternatives", _rule(claims={"aud": []}), "'aud' has an empty list"),
    (
        "limit_key on a groups rule",
        {"groups": ["admins"], "permissions": ["read"], "limit_key": "project_path"},
        "`limit_key` names a token claim",
    ),
    ("empty limit_key", _rule(limit_key=""), "limit_key: String should match pattern"),
    ("limit_key with =", _rule(limit_key="a=b"), "limit_key: String should match pattern"),
    ("limit_key with a space", _rule(limit_key="project path"), "String should match pattern"),
]


@pytest.mark.parametrize(
    ("rule", "message"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_invalid_rules_are_refused_with_a_reason(rule, message):
    with pytest.raises(ValidationError) as caught:
        AuthorizationConfig.model_validate({"rules": [rule]})
    described = "; ".join(
        ".".join(str(part) for part in error["loc"]) + ": " + error["msg"]
        for error in caught.value.errors()
    )
    assert message in described


def test_unknown_keys_at_the_section_level_are_refused():
    with pytest.raises(ValidationError, match="Extra inputs"):
        AuthorizationConfig.model_validate({"rules": [], "issuers": []})


def test_the_models_are_frozen():
    config = AuthorizationConfig.model_validate(yaml.safe_load(SEED_EXAMPLE))
    with pytest.raises(ValidationError):
        config.rules = []  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.rules[0].permissions = ["retry"]  # type: ignore[misc]


def test_the_json_schema_names_the_fields():
    schema = AuthorizationConfig.model_json_schema()
    rule_schema = schema["$defs"]["AuthorizationRule"]
    assert set(rule_schema["properties"]) == {
        "groups",
        "issuer",
        "claims",
        "permissions",
        "item_types",
        "projects",
        "limit_key",
    }
    assert rule_schema["additionalProperties"] is False
    assert AuthorizationRule.model_json_schema()["required"] == ["permissions"]


def test_limits_default_to_the_contract():
    limits = AuthorizationConfig().limits
    assert limits.max_live_items_per_caller == 1000
    assert limits.submissions_per_minute_per_caller == 120
    assert limits.max_live_items_per_project == 1000
    assert limits.submissions_per_minute_per_project == 300
    assert limits.max_stored_bytes_per_caller == 1_073_741_824


@pytest.mark.parametrize(
    "name",
    [
        "max_live_items_per_project",
        "submissions_per_minute_per_project",
        "max_stored_bytes_per_caller",
    ],
)
@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_limits_are_positive_integers(name, value):
    with pytest.raises(ValidationError, match=name):
        AuthorizationConfig.model_validate({"limits": {name: value}})


def test_one_issuer_counts_callers_by_one_limit_key():
    same = [_rule(limit_key="project_path"), _rule(limit_key="project_path", permissions=["read"])]
    assert AuthorizationConfig.model_validate({"rules": same}).rules[0].limit_key == "project_path"
    other_issuer = [_rule(limit_key="project_path"), _rule(issuer="k8s", limit_key="sub")]
    AuthorizationConfig.model_validate({"rules": other_issuer})
    without = [_rule(limit_key="project_path"), _rule()]
    AuthorizationConfig.model_validate({"rules": without})
    with pytest.raises(ValidationError, match=r"rules 0 and 1 .* different `limit_key` claims"):
        AuthorizationConfig.model_validate(
            {"rules": [_rule(limit_key="project_path"), _rule(limit_key="namespace_path")]}
        )
