"""Tuning of the processing engine (the `processing:` section of the config file)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ProcessingConfig(BaseModel):
    """Numbers are seconds unless the name says otherwise; fractions are allowed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(10, ge=1, le=256, description="size of the bounded worker pool (DDR-41)")
    lease_seconds: float = Field(60, gt=0, description="how long a claim holds an item")
    heartbeat_seconds: float = Field(20, gt=0, description="lease extension interval")
    item_deadline_seconds: float = Field(
        60, gt=0, description="wall-clock budget of one claim (DDR-44)"
    )
    safety_sweep_seconds: float = Field(300, gt=0, description="interval of the slow safety sweep")
    max_attempts: int = Field(5, ge=1, description="consecutive failures before phase=failed")
    backoff_initial_seconds: float = Field(1, gt=0)
    backoff_max_seconds: float = Field(300, gt=0)
    step_batch_size: int = Field(
        32,
        ge=1,
        le=1000,
        description="most claims of one type a worker steps in one transaction when a backlog "
        "waits (1: one item per transaction)",
    )
    step_batch_seconds: float = Field(
        0.05,
        gt=0,
        description="a batched step takes no further items after running this long "
        "(slow actions end up one per transaction)",
    )

    @model_validator(mode="after")
    def _check_relations(self) -> ProcessingConfig:
        if self.heartbeat_seconds * 3 > self.lease_seconds:
            raise ValueError(
                "heartbeat_seconds must be at most lease_seconds / 3 "
                f"(got {self.heartbeat_seconds} for a {self.lease_seconds} s lease)"
            )
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must not be below backoff_initial_seconds")
        return self
