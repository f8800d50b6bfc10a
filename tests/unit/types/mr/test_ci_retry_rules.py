"""The pipeline herder's matcher: one table per concern, all pure."""

from __future__ import annotations

import pytest

from workqueue.types.mr.config import (
    INFRASTRUCTURE_FAILURE_REASONS,
    CIRetryConfig,
    CIRetryRule,
)
from workqueue.types.mr.executors.ci_retry_rules import (
    FailedJob,
    RetryDecision,
    clean_log,
    decide,
    matching_rule,
    needs_log_tail,
    retry_delay,
)

DEFAULT_RULES = CIRetryConfig().rules


def job(name="build", stage="build", reason="runner_system_failure"):
    return FailedJob(name=name, stage=stage, failure_reason=reason)


def rule(name="r", **criteria):
    return CIRetryRule(name=name, **criteria)


# -- the defaults ----------------------------------------------------------------------------


@pytest.mark.parametrize("reason", INFRASTRUCTURE_FAILURE_REASONS)
def test_defaults_retry_every_infrastructure_reason(reason):
    decision = decide(job(reason=reason), DEFAULT_RULES, 0)
    assert decision == RetryDecision(
        retry=True,
        rule="infrastructure",
        delay_seconds=0.0,
        reason="ci_retry rule 'infrastructure' matches: retry 1 of 3",
    )


@pytest.mark.parametrize(
    "reason",
    [
        "script_failure",
        "unknown_failure",
        "job_execution_timeout",
        "missing_dependency_failure",
        "unmet_prerequisites",
        "ci_quota_exceeded",
        None,
    ],
)
@pytest.mark.parametrize("retries_done", [0, 1, 2, 100])
def test_defaults_never_retry_anything_else(reason, retries_done):
    decision = decide(job(reason=reason), DEFAULT_RULES, retries_done)
    assert (decision.retry, decision.rule) == (False, None)
    assert "no ci_retry rule matches" in decision.reason


@pytest.mark.parametrize(
    ("retries_done", "retry"), [(0, True), (1, True), (2, True), (3, False), (4, False)]
)
def test_defaults_retry_runner_system_failure_up_to_three_times(retries_done, retry):
    decision = decide(job(reason="runner_system_failure"), DEFAULT_RULES, retries_done)
    assert decision.retry is retry
    assert decision.rule == "infrastructure"
    if not retry:
        assert decision.reason == (
            "ci_retry rule 'infrastructure': retry limit reached "
            f"({retries_done} of 3 retries made)"
        )


def test_defaults_need_no_log():
    assert not needs_log_tail(job(), DEFAULT_RULES)
    assert not needs_log_tail(job(reason="script_failure"), DEFAULT_RULES)


# -- each criterion ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("criteria", "facts", "matches"),
    [
        # failure_reason is a membership test
        ({"failure_reason": ["api_failure"]}, job(reason="api_failure"), True),
        ({"failure_reason": ["api_failure", "x"]}, job(reason="x"), True),
        ({"failure_reason": ["api_failure"]}, job(reason="runner_system_failure"), False),
        ({"failure_reason": ["api_failure"]}, job(reason=None), False),
        # job_name: a regular expression over the whole name (fullmatch)
        ({"job_name": "build"}, job(name="build"), True),
        ({"job_name": "build"}, job(name="build-docs"), False),
        ({"job_name": "build"}, job(name="rebuild"), False),
        ({"job_name": "build.*"}, job(name="build-docs"), True),
        ({"job_name": r"test \d+/\d+"}, job(name="test 3/10"), True),
        ({"job_name": "Build"}, job(name="build"), False),  # case-sensitive
        ({"job_name": "(?i)Build"}, job(name="build"), True),
        # stage: exact equality
        ({"stage": "test"}, job(stage="test"), True),
        ({"stage": "test"}, job(stage="tests"), False),
        ({"stage": "test"}, job(stage="Test"), False),
        # all given criteria must hold
        (
            {"failure_reason": ["script_failure"], "job_name": "lint", "stage": "check"},
            job(name="lint", stage="check", reason="script_failure"),
            True,
        ),
        (
            {"failure_reason": ["script_failure"], "job_name": "lint", "stage": "check"},
            job(name="lint", stage="build", reason="script_failure"),
            False,
        ),
        (
            {"failure_reason": ["script_failure"], "job_name": "lint", "stage": "check"},
            job(name="lint2", stage="check", reason="script_failure"),
            False,
        ),
        (
            {"failure_reason": ["script_failure"], "job_name": "lint", "stage": "check"},
            job(name="lint", stage="check", reason="api_failure"),
            False,
        ),
    ],
)
def test_criteria_without_logs(criteria, facts, matches):
    rules = [rule(**criteria)]
    assert not needs_log_tail(facts, rules)
    assert (matching_rule(facts, rules, None) is not None) is matches
    assert decide(facts, rules, 0).retry is matches


OOM = {"failure_reason": ["script_failure"], "log_patterns": ["Killed", r"exit code 137$"]}


@pytest.mark.parametrize(
    ("tail", "matches"),
    [
        ("compiling...\nKilled\n", True),  # any one pattern is enough
        ("ERROR: Job failed: exit code 137\n", True),
        ("ERROR: Job failed: exit code 137\r\n", True),  # CRLF: `$` still ends the line
        ("exit code 137 (not at the end of a line) more\n", False),
        ("ERROR: Job failed: exit code 1\n", False),
        ("", False),
        ("killed\n", False),  # case-sensitive
        ("\x1b[31;1mKil\x1b[0;mled\x1b[0K\n", True),  # colour codes removed before matching
        ("section_start:1700000000:step_script\r\x1b[0Kexit code 137\n", True),
    ],
)
def test_log_patterns_are_searched_in_the_tail(tail, matches):
    rules = [rule(**OOM)]
    facts = job(reason="script_failure")
    assert needs_log_tail(facts, rules)
    assert decide(facts, rules, 0, tail).retry is matches


def test_log_patterns_are_multiline():
    rules = [rule(log_patterns=[r"^fatal: unable to access"])]
    tail = "Fetching changes\nfatal: unable to access 'https://x/': 502\n"
    assert decide(job(), rules, 0, tail).retry


def test_a_rule_needing_the_log_refuses_to_guess_without_it():
    with pytest.raises(ValueError, match="needs the job log tail"):
        decide(job(reason="script_failure"), [rule(**OOM)], 0, None)


def test_log_is_not_needed_when_the_other_criteria_already_fail():
    rules = [rule(**OOM)]  # script_failure only
    facts = job(reason="api_failure")
    assert not needs_log_tail(facts, rules)
    assert not decide(facts, rules, 0).retry


def test_log_is_not_needed_when_an_earlier_rule_decides_without_it():
    rules = [rule("infra", failure_reason=["script_failure"]), rule("oom", **OOM)]
    assert not needs_log_tail(job(reason="script_failure"), rules)
    assert decide(job(reason="script_failure"), rules, 0).rule == "infra"


def test_log_is_needed_when_the_first_applicable_rule_has_patterns():
    rules = [rule("oom", **OOM), rule("infra", failure_reason=["script_failure"])]
    assert needs_log_tail(job(reason="script_failure"), rules)
    # Patterns absent: that rule does not match, the next one does.
    assert decide(job(reason="script_failure"), rules, 0, "all fine").rule == "infra"
    assert decide(job(reason="script_failure"), rules, 0, "Killed").rule == "oom"


def test_clean_log():
    assert clean_log("\x1b[32;1mok\x1b[0;m\r\nnext\rover") == "ok\nnext\nover"


# -- first match wins -------------------------------------------------------------------------


def test_first_matching_rule_decides_even_when_its_limit_is_spent():
    rules = [
        rule("strict", failure_reason=["runner_system_failure"], retry_limit=1),
        rule("loose", failure_reason=["runner_system_failure"], retry_limit=5),
    ]
    assert decide(job(), rules, 0).rule == "strict"
    spent = decide(job(), rules, 1)
    assert (spent.retry, spent.rule) == (False, "strict")  # no fall-through to "loose"


def test_rules_that_do_not_match_are_skipped():
    rules = [
        rule("lint", job_name="lint", failure_reason=["script_failure"]),
        rule("infra", failure_reason=["runner_system_failure"]),
    ]
    assert decide(job(name="lint", reason="script_failure"), rules, 0).rule == "lint"
    assert decide(job(name="lint"), rules, 0).rule == "infra"
    assert decide(job(name="build", reason="script_failure"), rules, 0).rule is None


def test_no_rules_no_retry():
    decision = decide(job(), [], 0)
    assert decision == RetryDecision(
        retry=False,
        rule=None,
        delay_seconds=0.0,
        reason=(
            "no ci_retry rule matches job 'build' (stage 'build', "
            "failure_reason 'runner_system_failure')"
        ),
    )


# -- limits and delays ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "retries_done", "retry"),
    [(0, 0, False), (1, 0, True), (1, 1, False), (2, 1, True), (2, 2, False), (2, 7, False)],
)
def test_retry_limit(limit, retries_done, retry):
    rules = [rule(failure_reason=["runner_system_failure"], retry_limit=limit)]
    assert decide(job(), rules, retries_done).retry is retry


@pytest.mark.parametrize(
    ("delays", "retries_done", "expected"),
    [
        ([], 0, 0.0),
        ([], 5, 0.0),
        ([10], 0, 10.0),
        ([10], 3, 10.0),  # the last delay once the list runs out
        ([0, 30, 120.5], 0, 0.0),
        ([0, 30, 120.5], 1, 30.0),
        ([0, 30, 120.5], 2, 120.5),
        ([0, 30, 120.5], 9, 120.5),
    ],
)
def test_retry_delay(delays, retries_done, expected):
    r = rule(failure_reason=["runner_system_failure"], retry_limit=20, retry_delays=delays)
    assert retry_delay(r, retries_done) == expected
    assert decide(job(), [r], retries_done).delay_seconds == expected


def test_no_delay_when_not_retrying():
    r = rule(failure_reason=["runner_system_failure"], retry_limit=1, retry_delays=[60])
    assert decide(job(), [r], 1).delay_seconds == 0.0


def test_decide_is_pure():
    rules = [rule(**OOM)]
    facts = job(reason="script_failure")
    assert len({decide(facts, rules, 1, "Killed") for _ in range(5)}) == 1
