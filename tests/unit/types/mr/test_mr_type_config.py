"""`handled_types.mr` configuration: API.md defaults, strictness, validation of patterns."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from workqueue.types.mr.config import CIRetryConfig, CIRetryRule, MRTypeConfig

API_MD_SECTION = """
gitlab_url: https://gitlab.com
path_blocklist:
  [".gitlab-ci.yml", "{ci_config_path}", ".gitlab/**", "CODEOWNERS", ".gitlab/CODEOWNERS",
   "docs/CODEOWNERS", ".gitmodules", ".gitattributes", "**/.gitattributes"]
content:
  binary: refuse
  binary_paths: []
  secrets: refuse
max_file_bytes: 1048576
max_total_bytes: 10485760
max_actions: 500
empty_check_interval_seconds: 1800
ci_retry:
  rules:
    - name: infrastructure
      failure_reason: [runner_system_failure, stuck_or_timeout_failure, api_failure,
                       scheduler_failure, data_integrity_failure, runner_unsupported]
      retry_limit: 3
"""


def test_defaults_are_the_api_md_section():
    assert MRTypeConfig() == MRTypeConfig.model_validate(yaml.safe_load(API_MD_SECTION))


def test_default_values():
    config = MRTypeConfig()
    assert config.gitlab_url == "https://gitlab.com"
    assert config.path_blocklist == [
        ".gitlab-ci.yml",
        "{ci_config_path}",
        ".gitlab/**",
        "CODEOWNERS",
        ".gitlab/CODEOWNERS",
        "docs/CODEOWNERS",
        ".gitmodules",
        ".gitattributes",
        "**/.gitattributes",
    ]
    assert (config.content.binary, config.content.binary_paths) == ("refuse", [])
    assert config.content.secrets == "refuse"
    assert config.max_file_bytes == 1_048_576
    assert config.max_total_bytes == 10_485_760
    assert config.max_actions == 500
    assert config.empty_check_interval_seconds == 1800
    assert config.max_title_chars == 255
    assert config.max_description_chars == 1_048_576
    assert config.max_commit_message_bytes == 65_536
    assert config.max_branch_bytes == 255
    assert config.max_path_bytes == 4096
    assert config.max_label_chars == 255
    assert config.source_branch_prefix == "workqueue/"
    (rule,) = config.ci_retry.rules
    assert rule.name == "infrastructure"
    assert rule.failure_reason == [
        "runner_system_failure",
        "stuck_or_timeout_failure",
        "api_failure",
        "scheduler_failure",
        "data_integrity_failure",
        "runner_unsupported",
    ]
    assert rule.retry_limit == 3
    assert rule.job_name is None
    assert rule.stage is None
    assert rule.log_patterns == []
    assert rule.retry_delays == []


def test_default_lists_are_not_shared():
    assert MRTypeConfig().path_blocklist is not MRTypeConfig().path_blocklist


def test_explicit_empty_rule_list_disables_ci_retry():
    assert MRTypeConfig.model_validate({"ci_retry": {"rules": []}}).ci_retry.rules == []


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"max_file_byte": 1}, ("max_file_byte",)),
        ({"ci_retry": {"rule": []}}, ("ci_retry", "rule")),
        (
            {"ci_retry": {"rules": [{"name": "x", "failure_reason": ["a"], "limit": 1}]}},
            ("ci_retry", "rules", 0, "limit"),
        ),
    ],
)
def test_unknown_keys_are_errors_at_every_level(data, loc):
    with pytest.raises(ValidationError) as info:
        MRTypeConfig.model_validate(data)
    assert [(tuple(e["loc"]), e["type"]) for e in info.value.errors()] == [(loc, "extra_forbidden")]


def test_config_is_frozen():
    config = MRTypeConfig()
    with pytest.raises(ValidationError):
        config.max_actions = 1


@pytest.mark.parametrize(
    "data",
    [
        {"max_file_bytes": 0},
        {"max_total_bytes": 0},
        {"max_actions": 0},
        {"empty_check_interval_seconds": 0},
        {"max_title_chars": 0},
        {"max_description_chars": -1},
        {"max_commit_message_bytes": 0},
        {"max_branch_bytes": 0},
        {"max_path_bytes": 0},
        {"max_label_chars": 0},
        {"max_file_bytes": 11, "max_total_bytes": 10},
    ],
)
def test_limits_out_of_range_are_refused(data):
    with pytest.raises(ValidationError):
        MRTypeConfig.model_validate(data)


def test_file_limit_may_equal_total_limit():
    assert MRTypeConfig(max_file_bytes=10, max_total_bytes=10).max_file_bytes == 10


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://gitlab.com", "https://gitlab.com"),
        ("https://gitlab.example.org/", "https://gitlab.example.org"),
        ("https://example.org/gitlab/", "https://example.org/gitlab"),
        ("http://localhost:8080", "http://localhost:8080"),
    ],
)
def test_gitlab_url_is_accepted_without_trailing_slash(url, expected):
    assert MRTypeConfig(gitlab_url=url).gitlab_url == expected


@pytest.mark.parametrize(
    "url", ["gitlab.com", "ftp://gitlab.com", "https://", "https://x/?a=1", "https://x/#f", ""]
)
def test_bad_gitlab_urls_are_refused(url):
    with pytest.raises(ValidationError, match="gitlab_url"):
        MRTypeConfig(gitlab_url=url)


@pytest.mark.parametrize("pattern", ["", "/CODEOWNERS", ".gitlab/", "[abc"])
def test_bad_blocklist_patterns_are_refused_at_load(pattern):
    with pytest.raises(ValidationError, match="path_blocklist"):
        MRTypeConfig(path_blocklist=["ok/**", pattern])


@pytest.mark.parametrize("pattern", ["{ci_config}", "ci/{ci_config_path}", "{ci_config_path}/**"])
def test_braces_outside_the_ci_config_path_entry_are_refused(pattern):
    with pytest.raises(ValidationError, match="braces"):
        MRTypeConfig(path_blocklist=[pattern])


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ({"binary_paths": ["/abs"]}, "binary_paths"),
        ({"binary_paths": ["[abc"]}, "binary_paths"),
        ({"binary": "warn"}, "binary"),
        ({"secrets": "off"}, "secrets"),
        ({"secret": "allow"}, "secret"),
    ],
)
def test_bad_content_rules_are_refused_at_load(content, field):
    with pytest.raises(ValidationError, match=field):
        MRTypeConfig.model_validate({"content": content})


RULE = {"name": "r", "failure_reason": ["script_failure"]}


@pytest.mark.parametrize(
    "matcher",
    [
        {"failure_reason": ["api_failure"]},
        {"job_name": "^build-.*$"},
        {"stage": "test"},
        {"log_patterns": ["connection reset", r"HTTP 5\d\d"]},
    ],
)
def test_any_single_matcher_makes_a_rule(matcher):
    assert CIRetryRule.model_validate({"name": "r", **matcher}).name == "r"


def test_rule_without_any_matcher_is_refused():
    with pytest.raises(ValidationError, match="at least one of"):
        CIRetryRule.model_validate({"name": "r", "retry_limit": 2})


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({**RULE, "job_name": "build-(unclosed"}, "invalid regular expression"),
        ({**RULE, "log_patterns": ["ok", "[bad"]}, "invalid regular expression"),
        ({**RULE, "retry_limit": -1}, "greater than or equal to 0"),
        ({**RULE, "retry_delays": [1, -0.5]}, "greater than or equal to 0"),
        ({**RULE, "name": ""}, "at least 1 character"),
        ({**RULE, "stage": ""}, "at least 1 character"),
        ({**RULE, "retry_limit": 2.5}, "valid integer"),
    ],
)
def test_invalid_rules_are_refused(data, fragment):
    with pytest.raises(ValidationError, match=fragment):
        CIRetryRule.model_validate(data)


def test_retry_limit_zero_and_fractional_delays_are_allowed():
    rule = CIRetryRule.model_validate({**RULE, "retry_limit": 0, "retry_delays": [0, 2.5, 60]})
    assert rule.retry_limit == 0
    assert rule.retry_delays == [0, 2.5, 60]


def test_rule_names_must_be_unique():
    with pytest.raises(ValidationError, match="repeated: \\['a'\\]"):
        CIRetryConfig.model_validate(
            {"rules": [{**RULE, "name": "a"}, {**RULE, "name": "b"}, {**RULE, "name": "a"}]}
        )


# --- source_branch_prefix -------------------------------------------------------


@pytest.mark.parametrize("prefix", ["workqueue/", "bots/sync-", "wq.", "a/b/"])
def test_source_branch_prefix_accepts_branch_name_beginnings(prefix):
    assert MRTypeConfig(source_branch_prefix=prefix).source_branch_prefix == prefix


@pytest.mark.parametrize(
    "prefix", ["-x/", "/x", "a//", "a b/", "a..b/", ".hidden/", "x.lock/", "a~/", "a\x00/"]
)
def test_source_branch_prefix_that_no_branch_can_start_with_is_refused(prefix):
    with pytest.raises(ValidationError, match="source_branch_prefix"):
        MRTypeConfig(source_branch_prefix=prefix)


def test_empty_source_branch_prefix_is_an_explicit_opt_out_with_a_warning(caplog):
    with caplog.at_level("WARNING", logger="workqueue.types.mr.config"):
        config = MRTypeConfig.model_validate({"source_branch_prefix": ""})
    assert config.source_branch_prefix == ""
    assert "source_branch_prefix is empty" in caplog.text


def test_default_source_branch_prefix_warns_nothing(caplog):
    with caplog.at_level("WARNING", logger="workqueue.types.mr.config"):
        MRTypeConfig()
    assert caplog.text == ""
