"""The `retention:` section of the config file: how long finished items keep their contents."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field


class RetentionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    content_days: int = Field(
        7,
        ge=1,
        le=3650,
        description="days after an item finished (completed, failed or cancelled) when the "
        "safety sweep drops its contents (mr: file contents, description, commit message); "
        "each file's size and sha256 are kept",
    )

    @property
    def content_age(self) -> timedelta:
        return timedelta(days=self.content_days)
