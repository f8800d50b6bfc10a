"""The pipeline herder's matcher (DDR-47): should this failed CI job be retried? Pure.

Rules come from `handled_types.mr.ci_retry.rules` and are tried in order; the
first rule whose criteria ALL hold decides, later rules are not consulted (a
rule whose limit is spent therefore stops the search: it does not fall through
to a looser rule). The criteria of a rule, each checked only when given:

* `failure_reason`: the job's GitLab `failure_reason` is one of the listed values;
* `job_name`: the regular expression matches the WHOLE job name (`re.fullmatch`:
  `build` does not match `build-docs`; write `build.*` for a prefix);
* `stage`: the job's stage equals it exactly;
* `log_patterns`: at least one regular expression is found (`re.search`,
  `re.MULTILINE`) in the tail of the job log, after ANSI escape sequences are
  removed and carriage returns turned into line breaks.

A matching rule retries while the retries already made for that job name (over
the item's life, whatever rule made them) are fewer than its `retry_limit`. The
wait before retry number n+1 (n retries done) is `retry_delays[n]`, the last
delay once the list runs out, 0 when it is empty.

Reading a job log costs an HTTP call, so callers ask `needs_log_tail` first and
fetch the tail only when it says so; `decide` refuses to guess a log it needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from workqueue.types.mr.config import CIRetryRule

# CSI sequences (colours, `\x1b[0K` after GitLab's section markers) and other
# two-character escapes: they can split words an operator's pattern looks for.
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
_CARRIAGE_RETURN = re.compile(r"\r\n?")


@dataclass(frozen=True, slots=True)
class FailedJob:
    """What the matcher knows about a failed job (the log tail is passed separately)."""

    name: str
    stage: str
    failure_reason: str | None


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """The matcher's verdict. `rule` names the rule that decided (None: no rule matched)."""

    retry: bool
    rule: str | None
    delay_seconds: float
    reason: str


def clean_log(text: str) -> str:
    """The log as the patterns see it: no ANSI escapes, one line per `\\n`."""
    return _CARRIAGE_RETURN.sub("\n", _ANSI_ESCAPE.sub("", text))


def matches_without_log(rule: CIRetryRule, job: FailedJob) -> bool:
    """Whether every criterion of `rule` other than `log_patterns` holds for `job`."""
    if rule.failure_reason and job.failure_reason not in rule.failure_reason:
        return False
    if rule.job_name is not None and re.fullmatch(rule.job_name, job.name) is None:
        return False
    return rule.stage is None or rule.stage == job.stage


def log_matches(rule: CIRetryRule, cleaned_tail: str) -> bool:
    """Whether one of the rule's log patterns is found (True when it has none)."""
    if not rule.log_patterns:
        return True
    return any(
        re.search(pattern, cleaned_tail, re.MULTILINE) is not None for pattern in rule.log_patterns
    )


def needs_log_tail(job: FailedJob, rules: Sequence[CIRetryRule]) -> bool:
    """Whether deciding about `job` requires its log: the first rule whose other
    criteria hold has log patterns (a rule without them decides on its own)."""
    for rule in rules:
        if matches_without_log(rule, job):
            return bool(rule.log_patterns)
    return False


def matching_rule(
    job: FailedJob, rules: Sequence[CIRetryRule], log_tail: str | None
) -> CIRetryRule | None:
    """The first rule all of whose criteria hold, or None.

    `log_tail` None means "not read": a rule that would need it raises
    `ValueError` (call `needs_log_tail` first and read the tail when it is True).
    """
    cleaned: str | None = None
    for rule in rules:
        if not matches_without_log(rule, job):
            continue
        if not rule.log_patterns:
            return rule
        if log_tail is None:
            raise ValueError(f"ci_retry rule {rule.name!r} needs the job log tail")
        if cleaned is None:
            cleaned = clean_log(log_tail)
        if log_matches(rule, cleaned):
            return rule
    return None


def retry_delay(rule: CIRetryRule, retries_done: int) -> float:
    """Seconds to wait before the next retry when `retries_done` retries were made."""
    if not rule.retry_delays:
        return 0.0
    return float(rule.retry_delays[min(max(retries_done, 0), len(rule.retry_delays) - 1)])


def decide(
    job: FailedJob,
    rules: Sequence[CIRetryRule],
    retries_done: int,
    log_tail: str | None = None,
) -> RetryDecision:
    """Retry `job` or not, by the first matching rule and the retries already made."""
    rule = matching_rule(job, rules, log_tail)
    if rule is None:
        return RetryDecision(
            retry=False,
            rule=None,
            delay_seconds=0.0,
            reason=(
                f"no ci_retry rule matches job {job.name!r} (stage {job.stage!r}, "
                f"failure_reason {job.failure_reason!r})"
            ),
        )
    if retries_done >= rule.retry_limit:
        return RetryDecision(
            retry=False,
            rule=rule.name,
            delay_seconds=0.0,
            reason=(
                f"ci_retry rule {rule.name!r}: retry limit reached "
                f"({retries_done} of {rule.retry_limit} retries made)"
            ),
        )
    return RetryDecision(
        retry=True,
        rule=rule.name,
        delay_seconds=retry_delay(rule, retries_done),
        reason=(
            f"ci_retry rule {rule.name!r} matches: retry {retries_done + 1} of {rule.retry_limit}"
        ),
    )
