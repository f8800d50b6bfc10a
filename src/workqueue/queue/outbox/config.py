"""The `notifications:` section: who receives outbound events, and how hard we try.

Validated fail-closed at startup like the rest of the file (DDR-20): a
subscriber whose secret is missing or malformed stops the service instead of
sending unsigned or unverifiable events.
"""

from __future__ import annotations

import enum
import logging
import os
import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from standardwebhooks import Webhook

from workqueue.project_patterns import pattern_problem, placeholders

logger = logging.getLogger(__name__)

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format marker, not a secret
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OutboundEvent(enum.StrEnum):
    """Every event type a subscriber may ask for."""

    WORK_ITEM_COMPLETED = "work_item.completed"
    WORK_ITEM_FAILED = "work_item.failed"
    WORK_ITEM_CANCELLED = "work_item.cancelled"
    VALIDATION_REPOSITORY_STARTED = "validation.repository.started"
    VALIDATION_REPOSITORY_FINISHED = "validation.repository.finished"
    ATTENTION_ADDED = "attention.added"


class SubscriberConfig(BaseModel):
    """One receiver of outbound events (`notifications.subscribers[]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    url: str
    secret_env: str = Field(
        description="environment variable holding the Standard Webhooks secret (whsec_...)"
    )
    events: tuple[OutboundEvent, ...] = Field(min_length=1)
    item_types: tuple[str, ...] | None = Field(None, min_length=1)
    projects: tuple[str, ...] | None = Field(
        None, min_length=1, description="globs as in authorization: `*` in a segment, `**` across"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise ValueError("must not embed credentials; events are signed instead")
        if parts.scheme == "http":
            logger.warning("notification subscriber URL %s is plain http: events travel clear", url)
        return url

    @field_validator("secret_env")
    @classmethod
    def _secret_is_set(cls, name: str) -> str:
        # The message names the variable, never its value.
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        value = os.environ.get(name)
        if not value:
            raise ValueError(f"environment variable {name} is not set")
        if not value.startswith(SECRET_PREFIX):
            raise ValueError(
                f"environment variable {name} must hold a Standard Webhooks secret "
                f"({SECRET_PREFIX}...)"
            )
        try:
            Webhook(value)
        except Exception:
            raise ValueError(
                f"environment variable {name} is not a valid Standard Webhooks secret "
                f"({SECRET_PREFIX} followed by base64)"
            ) from None
        return name

    @field_validator("projects")
    @classmethod
    def _project_patterns(cls, patterns: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for pattern in patterns or ():
            problem = pattern_problem(pattern)
            if problem is None and placeholders(pattern):
                problem = f"project pattern {pattern!r}: claim placeholders mean nothing here"
            if problem is not None:
                raise ValueError(problem)
        return patterns


class NotificationsConfig(BaseModel):
    """Outbound events (Standard Webhooks). Numbers are seconds unless named otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subscribers: tuple[SubscriberConfig, ...] = ()
    max_age_seconds: float = Field(86400, gt=0, description="give up on a delivery after this")
    timeout_seconds: float = Field(10, gt=0, description="one delivery attempt's HTTP timeout")
    backoff_initial_seconds: float = Field(1, gt=0)
    backoff_max_seconds: float = Field(3600, gt=0)
    workers: int = Field(4, ge=1, le=64, description="deliveries in flight per replica")
    retention_days: float = Field(7, gt=0, description="delivered rows are pruned after this")

    @model_validator(mode="after")
    def _check(self) -> NotificationsConfig:
        names = [subscriber.name for subscriber in self.subscribers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"subscriber names must be unique: {', '.join(duplicates)}")
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must not be below backoff_initial_seconds")
        return self
