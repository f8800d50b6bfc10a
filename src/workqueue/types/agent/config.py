"""`handled_types.agent`: which notes call the agent, where it lives, how often.

Unknown keys are errors. The agent's token is named by an environment variable
(`agent_token_env`), never written in the file.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workqueue.project_patterns import pattern_problem, placeholders
from workqueue.types.gitlab_connection import check_gitlab_url

# GitLab's access levels (`Gitlab::Access`).
GUEST, REPORTER, DEVELOPER, MAINTAINER, OWNER = 10, 20, 30, 40, 50


class RateLimits(BaseModel):
    """Tasks a person, and a project, may start in a rolling hour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_user_per_hour: int = Field(20, ge=1, le=100_000)
    per_project_per_hour: int = Field(100, ge=1, le=1_000_000)


class AgentTypeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gitlab_url: str = Field("https://gitlab.com", description="the GitLab instance")
    trigger: str = Field(
        "@workqueue-bot",
        min_length=1,
        max_length=64,
        description="a note that starts with this (after leading blanks) calls the agent",
    )
    projects: list[str] = Field(
        min_length=1, description="project patterns whose notes are honoured"
    )
    min_access_level: int = Field(
        DEVELOPER,
        description="the note author's access on the project (10 Guest … 50 Owner)",
    )
    agent_url: str = Field(description="the agent's task endpoint (POST)")
    agent_token_env: str = Field(
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="environment variable holding the bearer token sent to the agent",
    )
    timeout_seconds: float = Field(900, gt=0, le=86_400, description="one agent call")
    max_attempts: int = Field(
        3, ge=1, le=20, description="agent calls per task before it fails (5xx, timeouts)"
    )
    rate_limit: RateLimits = Field(default_factory=RateLimits)
    retry_initial_seconds: float = Field(
        5, gt=0, le=3600, description="wait after the first failed agent call, doubled after each"
    )
    dashboard_url: str | None = Field(
        None,
        description="the service's address as people reach it (https://workqueue.example.com): "
        "placeholders link the task's dashboard page",
    )
    history_turns: int = Field(
        20, ge=0, le=200, description="earlier turns of the discussion sent as history"
    )

    @field_validator("gitlab_url")
    @classmethod
    def _gitlab_url(cls, value: str) -> str:
        return check_gitlab_url(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        if value != value.strip() or any(ch.isspace() for ch in value):
            raise ValueError("trigger must be one word without blanks, such as @workqueue-bot")
        if value.startswith("/"):
            raise ValueError("trigger must not start with '/': GitLab reads that as a quick action")
        return value

    @field_validator("projects")
    @classmethod
    def _projects(cls, value: list[str]) -> list[str]:
        for pattern in value:
            problem = pattern_problem(pattern)
            if problem is None and placeholders(pattern):
                problem = f"{pattern!r}: notes carry no claims for {{placeholders}}"
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("min_access_level")
    @classmethod
    def _access_level(cls, value: int) -> int:
        if value not in {GUEST, REPORTER, DEVELOPER, MAINTAINER, OWNER}:
            raise ValueError("min_access_level must be 10, 20, 30, 40 or 50")
        return value

    @field_validator("dashboard_url")
    @classmethod
    def _dashboard_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname or parts.query:
            raise ValueError(f"dashboard_url must be an http(s) URL with a host, got {value!r}")
        return value.rstrip("/")

    @field_validator("agent_url")
    @classmethod
    def _agent_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"agent_url must be an http(s) URL with a host, got {value!r}")
        if parts.username or parts.password:
            raise ValueError("agent_url must not hold credentials: use agent_token_env")
        return value
