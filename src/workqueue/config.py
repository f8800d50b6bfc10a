"""The YAML configuration file, validated fail-closed at startup (DDR-20).

Unknown keys are errors: a misspelt option must stop the service, not be
silently ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workqueue.api.webhooks.config import WebhooksConfig
from workqueue.attention.config import AttentionConfig
from workqueue.auth.config import AuthorizationConfig
from workqueue.queue.audit.config import AuditConfig
from workqueue.queue.outbox.config import NotificationsConfig
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.retention.config import RetentionConfig
from workqueue.signals.sources import SignalsConfig


class ConfigError(Exception):
    """The configuration file is missing or invalid; the message names file and field."""


class ServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    authorization: AuthorizationConfig = Field(default_factory=AuthorizationConfig)
    processing: ProcessingConfig = Field(default_factory=ProcessingConfig)
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
    attention: AttentionConfig = Field(default_factory=AttentionConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    webhooks: WebhooksConfig = Field(default_factory=WebhooksConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    signals: SignalsConfig = Field(default_factory=SignalsConfig)
    # Each item type validates its own section when the registry is built.
    handled_types: dict[str, dict[str, Any] | None] = Field(default_factory=dict)


def load_config(path: Path) -> ServiceConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the configuration file: {error}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    try:
        return ServiceConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(f"{path}: {describe_validation_error(error)}") from None


def describe_validation_error(error: ValidationError) -> str:
    """`field.path: message` for each problem, on one line."""
    problems = []
    for detail in error.errors():
        location = ".".join(str(part) for part in detail["loc"]) or "(top level)"
        problems.append(f"{location}: {detail['msg']}")
    return "; ".join(problems)
