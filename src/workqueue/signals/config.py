"""What checks are called and where signals come from: the config's shapes. Pure."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workqueue.project_patterns import path_matches, pattern_problem, placeholders, scope_regexes

# A check's name as dimensions (`check_<name>`) and configs spell it.
CHECK_NAME_PATTERN = r"^[a-z0-9_-]+$"
CheckName = Annotated[str, Field(pattern=CHECK_NAME_PATTERN, min_length=1, max_length=64)]
# A variant (component): Konflux component names are DNS labels; allow a little more.
VARIANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Variant = Annotated[str, Field(pattern=VARIANT_PATTERN, max_length=128)]


def claimless_patterns(value: list[str] | None) -> list[str] | None:
    """Project patterns for a sender that carries no claims (a shared secret, a queue):
    valid patterns without `{placeholders}`."""
    for pattern in value or []:
        problem = pattern_problem(pattern)
        if problem is None and placeholders(pattern):
            problem = f"{pattern!r}: this sender carries no claims for {{placeholders}}"
        if problem:
            raise ValueError(problem)
    return value


NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # an RFC 1123 label


def namespace_bindings(value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
    """`{namespace: [project patterns]}`: Kubernetes namespace names, claimless patterns."""
    for namespace, patterns in (value or {}).items():
        if not NAMESPACE.fullmatch(namespace):
            raise ValueError(f"{namespace!r} is no Kubernetes namespace name")
        if not patterns:
            raise ValueError(f"namespace {namespace!r}: list at least 1 project pattern")
        claimless_patterns(patterns)
    return value


def may_report(
    project: str,
    namespace: str | None,
    *,
    projects: list[str] | None,
    namespaces: dict[str, list[str]] | None,
) -> bool:
    """Whether a sender without claims (a shared secret, a queue) may report on `project`
    for a run of `namespace` (None: no run, a plain report): `projects` for anything,
    `namespaces[namespace]` for the runs of that namespace."""
    if path_matches(scope_regexes(projects or [], {}), project):
        return True
    patterns = (namespaces or {}).get(namespace) if namespace else None
    return patterns is not None and path_matches(scope_regexes(patterns, {}), project)


class AfterMergeCheck(BaseModel):
    """A check the merge commit must pass before a merged item completes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: CheckName
    variants: list[Variant] = Field(
        default_factory=list,
        description="expected variants (components); [] = whichever report within "
        "settle_seconds of the merge",
    )
    settle_seconds: float = Field(
        120, ge=0, description="with variants: [], how long reports are awaited"
    )
    timeout_seconds: float = Field(
        7200, gt=0, description="no green result by then: the item fails"
    )

    @field_validator("variants")
    @classmethod
    def _unique_variants(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("variants must be unique")
        return value


class ChecksConfig(BaseModel):
    """`handled_types.mr.checks`: external checks that gate the merge and completion."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    before_merge: list[CheckName] = Field(
        default_factory=list,
        description="names that must be green on the MR head sha before merging",
    )
    after_merge: list[AfterMergeCheck] = Field(
        default_factory=list,
        description="names that must be green on the merge commit before the item completes",
    )

    @field_validator("before_merge")
    @classmethod
    def _unique_names(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("before_merge names must be unique")
        return value

    @field_validator("after_merge")
    @classmethod
    def _unique_checks(cls, value: list[AfterMergeCheck]) -> list[AfterMergeCheck]:
        names = [check.name for check in value]
        if len(set(names)) != len(names):
            raise ValueError("after_merge names must be unique")
        return value
