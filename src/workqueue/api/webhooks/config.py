"""The `webhooks:` section: which `X-Gitlab-Token` may speak for which projects.

Validated fail-closed at startup like the rest of the file (DDR-20): an entry
with an unknown key, no projects, a malformed pattern, or a secret variable that
is unset or empty stops the service, and the message names the entry
(`webhooks.secrets.<n>.<field>`), never the secret.
"""

from __future__ import annotations

import os
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workqueue.project_patterns import pattern_problem, placeholders

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def secret_from_environment(name: str) -> str:
    """The secret held by variable `name`, without the whitespace a secret file ends in."""
    return os.environ.get(name, "").strip()


class WebhookSecretConfig(BaseModel):
    """One secret and the projects whose deliveries it may carry (`webhooks.secrets[]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    projects: tuple[str, ...] = Field(
        min_length=1, description="globs as in authorization: `*` in a segment, `**` across"
    )
    secret_env: str = Field(description="environment variable holding the hook's secret token")

    @field_validator("projects")
    @classmethod
    def _project_patterns(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            problem = pattern_problem(pattern)
            if problem is None and placeholders(pattern):
                # A delivery carries no token claims to fill them with.
                problem = f"project pattern {pattern!r}: claim placeholders mean nothing here"
            if problem is not None:
                raise ValueError(problem)
        return patterns

    @field_validator("secret_env")
    @classmethod
    def _secret_is_set(cls, name: str) -> str:
        # The message names the variable, never its value.
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if name not in os.environ:
            raise ValueError(f"environment variable {name} is not set")
        if not secret_from_environment(name):
            raise ValueError(f"environment variable {name} is empty")
        return name


class WebhooksConfig(BaseModel):
    """GitLab webhook secrets scoped to projects (API.md "Trust boundary, round 2")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secrets: tuple[WebhookSecretConfig, ...] = ()
