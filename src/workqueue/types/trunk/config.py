"""Configuration of the `trunk` type: the `handled_types.trunk` section of the config file.

Unknown keys are errors everywhere. Queues are deployment configuration: the
`trunk_queues` rows hold only runtime state (the seed's "config is not written
by the pipeline").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workqueue.types.gitlab_connection import check_gitlab_url

# CI variable names GitLab accepts (letters, digits, underscore).
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
RESERVED_VARIABLE_PREFIX = "WORKQUEUE_"


class TrunkQueueConfig(BaseModel):
    """One (project, branch) whose landed heads are validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str = Field(min_length=1, description="the project's path (group/sub/name)")
    branch: str = Field(min_length=1, description="the branch whose heads are validated")
    max_concurrent: int = Field(
        1, ge=1, le=64, description="1 = serial; more = speculative validation"
    )
    variables: dict[str, str] = Field(
        default_factory=dict, description="extra CI variables of every validation pipeline"
    )

    @property
    def name(self) -> str:
        """The queue's stable name, `project:branch` (details.queue)."""
        return f"{self.project}:{self.branch}"

    @field_validator("project")
    @classmethod
    def _check_project(cls, value: str) -> str:
        # Normally a path: authorization scopes match it as written. A numeric
        # id also works (push hooks carry both), but then scopes must list the id.
        if value.startswith("/") or value.endswith("/") or "//" in value:
            raise ValueError(f"project must be a path such as group/app, got {value!r}")
        return value

    @field_validator("variables")
    @classmethod
    def _check_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _VARIABLE_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid CI variable name")
            if key.startswith(RESERVED_VARIABLE_PREFIX):
                raise ValueError(f"{key!r}: variables starting with WORKQUEUE_ are the service's")
        return value


class TrunkTypeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gitlab_url: str = Field(
        "https://gitlab.com",
        description="base URL of the GitLab instance; http:// is for local development only",
    )
    queues: list[TrunkQueueConfig] = Field(
        default_factory=list, description="the (project, branch) pairs to validate"
    )
    gate_recheck_seconds: float = Field(
        30, gt=0, description="wait before re-checking a closed gate (burns no attempt)"
    )
    build_deadline_seconds: float = Field(
        7200, gt=0, description="a build with no result by then is failed and its slot freed"
    )
    pipeline_check_seconds: float = Field(
        300,
        gt=0,
        description="how often a running build's pipeline is read when its hooks are missed",
    )

    @field_validator("gitlab_url")
    @classmethod
    def _check_gitlab_url(cls, value: str) -> str:
        return check_gitlab_url(value)

    @model_validator(mode="after")
    def _unique_queues(self) -> TrunkTypeConfig:
        names = [queue.name for queue in self.queues]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"queues listed twice: {', '.join(duplicates)}")
        return self

    def queue(self, project: str, branch: str) -> TrunkQueueConfig | None:
        return next((q for q in self.queues if q.project == project and q.branch == branch), None)

    def queue_named(self, name: str) -> TrunkQueueConfig | None:
        return next((q for q in self.queues if q.name == name), None)
