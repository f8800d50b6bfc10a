"""Configuration of the `mr` type: the `handled_types.mr` section of the config file.

Unknown keys are errors everywhere, so a misspelt limit fails at startup
instead of silently keeping its default.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workqueue.project_patterns import pattern_problem, placeholders
from workqueue.signals.config import ChecksConfig
from workqueue.types.gitlab_connection import check_gitlab_url
from workqueue.types.mr.validation.paths import branch_problem, check_glob

logger = logging.getLogger(__name__)

DEFAULT_SOURCE_BRANCH_PREFIX = "workqueue/"

# A `path_blocklist` entry that stands for the project's own CI configuration file as
# GitLab reports it (`ci_config_path`; `.gitlab-ci.yml` when unset), read at submission.
CI_CONFIG_PATH_ENTRY = "{ci_config_path}"

DEFAULT_PATH_BLOCKLIST: tuple[str, ...] = (
    ".gitlab-ci.yml",
    CI_CONFIG_PATH_ENTRY,
    ".gitlab/**",
    "CODEOWNERS",
    ".gitlab/CODEOWNERS",
    "docs/CODEOWNERS",
    # Submodule URLs: every recursive clone, CI's included, would fetch what they name.
    ".gitmodules",
    # `-diff`, `binary`, `linguist-generated` hide files' changes from reviewers once merged.
    ".gitattributes",
    "**/.gitattributes",
)

# GitLab job failure reasons that say nothing about the change under test.
INFRASTRUCTURE_FAILURE_REASONS: tuple[str, ...] = (
    "runner_system_failure",
    "stuck_or_timeout_failure",
    "api_failure",
    "scheduler_failure",
    "data_integrity_failure",
    "runner_unsupported",
)

# Upper bound of `ci_retry.log_tail_bytes`: the tail is held in memory and searched.
MAX_LOG_TAIL_BYTES = 4 * 1_048_576


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    return pattern


class CIRetryRule(BaseModel):
    """One matcher rule for failed CI jobs; the first matching rule decides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="identifies the rule in logs and audit")
    failure_reason: list[str] = Field(
        default_factory=list, description="GitLab job failure_reason values that match"
    )
    job_name: str | None = Field(
        None, description="regular expression that must match the WHOLE job name (fullmatch)"
    )
    stage: str | None = Field(None, min_length=1, description="exact stage name")
    log_patterns: list[str] = Field(
        default_factory=list,
        description="regular expressions searched (re.MULTILINE) in the job log tail, ANSI "
        "escape sequences removed; any one found matches",
    )
    retry_limit: int = Field(3, ge=0, description="retries per (item, job name) over its life")
    retry_delays: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=list,
        description="seconds to wait before successive retries",
    )

    @field_validator("job_name")
    @classmethod
    def _job_name_compiles(cls, value: str | None) -> str | None:
        return None if value is None else _check_regex(value)

    @field_validator("log_patterns")
    @classmethod
    def _log_patterns_compile(cls, value: list[str]) -> list[str]:
        return [_check_regex(pattern) for pattern in value]

    @model_validator(mode="after")
    def _has_a_matcher(self) -> CIRetryRule:
        # A rule without criteria would retry every failure, including genuine
        # test failures; that is never what an operator means by omission.
        if not (self.failure_reason or self.job_name or self.stage or self.log_patterns):
            raise ValueError(
                f"ci_retry rule {self.name!r} needs at least one of "
                "failure_reason, job_name, stage, log_patterns"
            )
        return self


def _default_ci_retry_rules() -> list[CIRetryRule]:
    return [
        CIRetryRule(
            name="infrastructure",
            failure_reason=list(INFRASTRUCTURE_FAILURE_REASONS),
            retry_limit=3,
        )
    ]


class CIRetryBreakerConfig(BaseModel):
    """Pauses all CI retries of a replica when they come too fast (an infrastructure outage).

    At most `max_retries` retries are made in any `window_seconds`; a retry wanted
    beyond that opens the breaker, which then refuses every retry for
    `window_seconds` and closes by itself. Each replica has its own breaker.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_retries: int = Field(
        20, ge=1, description="retries allowed across all items within the window"
    )
    window_seconds: float = Field(
        600, gt=0, description="the sliding window, and how long an open breaker pauses"
    )


class CIRetryConfig(BaseModel):
    """Automatic retry of CI jobs that failed for reasons unrelated to the change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[CIRetryRule] = Field(
        default_factory=_default_ci_retry_rules, description="first match wins"
    )
    log_tail_bytes: int = Field(
        65_536,
        ge=1,
        le=MAX_LOG_TAIL_BYTES,
        description="bytes at the end of a job log searched by log_patterns (read only "
        "when a rule needs them)",
    )
    circuit_breaker: CIRetryBreakerConfig = Field(default_factory=CIRetryBreakerConfig)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, value: list[CIRetryRule]) -> list[CIRetryRule]:
        names = [rule.name for rule in value]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"ci_retry rule names must be unique; repeated: {duplicates}")
        return value


class ContentRulesConfig(BaseModel):
    """What file contents may hold (`handled_types.mr.content`; see `content_rules.py`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    binary: Literal["refuse", "allow"] = Field(
        "refuse",
        description="content with a NUL byte, or not valid UTF-8 after decoding: 'refuse' "
        "(unless its path matches binary_paths) or 'allow'",
    )
    binary_paths: list[str] = Field(
        default_factory=list,
        description="globs (as in path_blocklist) of the files that may hold binary content",
    )
    secrets: Literal["refuse", "allow"] = Field(
        "refuse",
        description="private keys and well-known token formats in file contents and in what "
        "GitLab shows (title, description, commit_message, branches, labels, paths): "
        "'refuse' or 'allow'",
    )

    @field_validator("binary_paths")
    @classmethod
    def _check_binary_paths(cls, value: list[str]) -> list[str]:
        for pattern in value:
            check_glob(pattern)
        return value


# The request schema refuses longer label lists before any policy runs.
MAX_LABELS_CEILING = 1000


class MRTypeConfig(BaseModel):
    """Limits and policy of the `mr` type. Byte counts are of decoded content / UTF-8."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gitlab_url: str = Field(
        "https://gitlab.com",
        description="base URL of the GitLab instance; http:// is for local development only",
    )
    path_blocklist: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PATH_BLOCKLIST),
        description=(
            "globs matched case-insensitively against the whole path of every action "
            "(and a move's previous_path): '**' crosses '/', '*' and '?' do not; the entry "
            f"'{CI_CONFIG_PATH_ENTRY}' is the project's CI configuration file as GitLab reports it"
        ),
    )
    max_file_bytes: int = Field(1_048_576, ge=1, description="per action, after decoding")
    max_total_bytes: int = Field(10_485_760, ge=1, description="per submission, after decoding")
    max_actions: int = Field(500, ge=1, description="file actions per submission")
    empty_check_interval_seconds: float = Field(
        1800, gt=0, description="how often an open MR is re-checked for an empty diff"
    )
    drift_check_seconds: float = Field(
        300,
        ge=0,
        description=(
            "an active item whose MR exists is re-read from GitLab when no webhook about it "
            "arrived for this long (lost or disabled hooks); 0 turns drift checks off"
        ),
    )
    rebase: Literal["auto", "off"] = Field(
        "auto",
        description="'auto': when GitLab says the service's own MR needs a rebase (a "
        "fast-forward or semi-linear project whose target moved), ask GitLab to rebase it; "
        "'off': leave it as merge_blocker need_rebase for the caller to resubmit",
    )
    merge_retry_max_seconds: float = Field(
        1800,
        gt=0,
        description="longest wait between tries after GitLab refuses a merge (the wait "
        "starts at 30 s and doubles up to this)",
    )
    max_title_chars: int = Field(
        255, ge=1, description="MR title length in characters (GitLab's own limit is 255)"
    )
    max_description_chars: int = Field(
        1_048_576,
        ge=0,
        description="MR description length in characters (GitLab's own limit is 1,048,576)",
    )
    max_commit_message_bytes: int = Field(
        65_536, ge=1, description="commit message length in UTF-8 bytes (64 KiB)"
    )
    max_branch_bytes: int = Field(
        255,
        ge=1,
        description="branch name length in UTF-8 bytes (a ref is a file: 255 is the usual "
        "filesystem name limit)",
    )
    max_path_bytes: int = Field(
        4096, ge=1, description="file path length in UTF-8 bytes (Linux PATH_MAX)"
    )
    max_label_chars: int = Field(
        255, ge=1, description="length of one label in characters (GitLab's own limit is 255)"
    )
    max_labels: int = Field(
        50,
        ge=0,
        le=MAX_LABELS_CEILING,
        description="labels per submission: each unknown label becomes a project label on "
        "GitLab, created as the service's user",
    )
    source_branch_prefix: str = Field(
        DEFAULT_SOURCE_BRANCH_PREFIX,
        description="every source_branch must start with it (and be longer); the service "
        "force-pushes its branches, so they live apart from people's. '' opts out (warned)",
    )
    target_branches: list[str] | None = Field(
        None,
        min_length=1,
        description="globs of the branches MRs may target (`*` within a segment, `**` "
        "across), e.g. [main, 'release/*']; omitted: any branch outside source_branch_prefix",
    )
    allow_mentions: bool = Field(
        default=False,
        description="let title, description and commit_message @-mention users and groups "
        "(@all included): GitLab notifies them in the service's name",
    )
    allow_cross_project_references: bool = Field(
        default=False,
        description="let title, description and commit_message name issues, merge requests, "
        "epics and commits of other projects, closing patterns included: GitLab closes those "
        "issues on merge with the service's rights",
    )
    content: ContentRulesConfig = Field(default_factory=ContentRulesConfig)
    ci_retry: CIRetryConfig = Field(default_factory=CIRetryConfig)
    checks: ChecksConfig = Field(default_factory=ChecksConfig)

    @field_validator("gitlab_url")
    @classmethod
    def _check_gitlab_url(cls, value: str) -> str:
        return check_gitlab_url(value)

    @field_validator("path_blocklist")
    @classmethod
    def _check_blocklist(cls, value: list[str]) -> list[str]:
        for pattern in value:
            check_glob(pattern)
            # A misspelt placeholder would silently block a file of that literal name.
            if pattern != CI_CONFIG_PATH_ENTRY and ("{" in pattern or "}" in pattern):
                raise ValueError(
                    f"path_blocklist pattern {pattern!r}: braces are only allowed in the "
                    f"whole entry {CI_CONFIG_PATH_ENTRY!r}"
                )
        return value

    @field_validator("target_branches")
    @classmethod
    def _check_target_branches(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or []:
            problem = pattern_problem(pattern)
            if problem is None and placeholders(pattern):
                problem = f"target branch pattern {pattern!r} cannot use {{placeholders}}"
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("source_branch_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not value:
            # Allowed as a deliberate opt-out: the branch-head and MR-author
            # checks still protect people's branches, the namespace does not.
            logger.warning(
                "handled_types.mr.source_branch_prefix is empty: callers may name any "
                "branch as their source branch"
            )
            return value
        # A prefix no branch name can start with would refuse every submission.
        problem = branch_problem(f"{value}x")
        if problem is not None:
            raise ValueError(
                f"source_branch_prefix {value!r} cannot start a branch name: {problem}"
            )
        return value

    @model_validator(mode="after")
    def _check_relations(self) -> MRTypeConfig:
        if self.max_file_bytes > self.max_total_bytes:
            raise ValueError(
                "max_file_bytes must not exceed max_total_bytes "
                f"(got {self.max_file_bytes} > {self.max_total_bytes})"
            )
        return self
