"""The `audit:` section of the config file: how long the database history is kept."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field


class AuditConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    retention_days: int = Field(
        30,
        ge=1,
        le=3650,
        description="days an audit entry stays in the database history "
        "(GET /api/work-items/{id}/history); the log and S3 keep their own",
    )

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self.retention_days)
