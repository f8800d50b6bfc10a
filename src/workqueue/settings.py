"""Settings from the environment (secrets, locations); the YAML file is `config.py`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from workqueue.db.url import normalize_database_url

DEFAULT_CONFIG_PATH = Path("/etc/workqueue/config.yml")


class Settings(BaseSettings):
    """Environment of the service process. Secrets are `SecretStr`: never printed."""

    # Other variables in the environment are none of our business.
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    database_url: str | None = Field(None, validation_alias="DATABASE_URL")
    config_path: Path = Field(DEFAULT_CONFIG_PATH, validation_alias="WORKQUEUE_SERVICE_CONFIG")
    data_dir: Path | None = Field(
        None,
        validation_alias="WORKQUEUE_SERVICE_DATA_DIR",
        description="embedded PostgreSQL location when DATABASE_URL is unset",
    )
    local_auth_user: str | None = Field(None, validation_alias="WORKQUEUE_SERVICE_LOCAL_AUTH_USER")
    gitlab_token: SecretStr | None = Field(None, validation_alias="WORKQUEUE_SERVICE_GITLAB_TOKEN")
    gitlab_webhook_secret: SecretStr | None = Field(
        None, validation_alias="WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET"
    )
    openshift_api_url: str | None = Field(
        None,
        validation_alias="WORKQUEUE_SERVICE_OPENSHIFT_API_URL",
        description="where opaque sha256~ tokens are checked (default: in-cluster API)",
    )
    audit_s3_bucket: str | None = Field(None, validation_alias="WORKQUEUE_SERVICE_AUDIT_S3_BUCKET")
    events_queue_url: str | None = Field(
        None, validation_alias="WORKQUEUE_SERVICE_EVENTS_QUEUE_URL"
    )
    sentry_dsn: SecretStr | None = Field(None, validation_alias="SENTRY_DSN")

    @field_validator("gitlab_token", "gitlab_webhook_secret", mode="before")
    @classmethod
    def _secret_without_surrounding_whitespace(cls, value: object) -> object:
        # A secret file written by `echo` or `kubectl create secret --from-file` ends in a
        # newline that is no part of the token (and breaks the header it is sent in).
        return value.strip() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _database_url_is_usable(cls, value: str | None) -> str | None:
        if value:
            normalize_database_url(value)  # raises with the password masked
        return value or None
