"""`signals:` where external checks come from besides `POST /api/signals`. Pure."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workqueue.signals.config import claimless_patterns, may_report, namespace_bindings
from workqueue.signals.tekton import TektonConfig


class QueueSignals(BaseModel):
    """`signals.sqs`: signals on the events queue (`WORKQUEUE_SERVICE_EVENTS_QUEUE_URL`).

    A queue message carries no credential: whoever may send to the queue reports
    on `projects`, and PipelineRun events of a namespace on `namespaces[it]` (a
    shared cluster's tenants write their runs' annotations: bind each namespace to
    its own projects, and leave `projects` unset). Unset, signal messages are
    refused (deleted with a warning): a queue set up for GitLab's hints gains no
    power to pass checks unasked.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    projects: list[str] | None = Field(
        None,
        min_length=1,
        description="projects any signal message may report on (reports and runs of any namespace)",
    )
    namespaces: dict[str, list[str]] | None = Field(
        None,
        description="per Kubernetes namespace, the projects its PipelineRun events may report on",
    )

    _patterns = field_validator("projects")(claimless_patterns)
    _namespace_patterns = field_validator("namespaces")(namespace_bindings)

    def may_report(self, project: str, namespace: str | None) -> bool:
        return may_report(project, namespace, projects=self.projects, namespaces=self.namespaces)


class SignalsConfig(BaseModel):
    """`signals:` the Tekton receiver and the events queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tekton: TektonConfig = Field(default_factory=TektonConfig)
    sqs: QueueSignals = Field(default_factory=QueueSignals)
    keep_days: int = Field(
        30,
        ge=1,
        le=3650,
        description="days a signal is kept after it was received (with or without an "
        "item for its commit); items keep what they showed",
    )

    @property
    def keep(self) -> timedelta:
        return timedelta(days=self.keep_days)
