"""Tekton PipelineRun CloudEvents as signals: the mapping and its configuration. Pure.

Tekton's events controller sends `dev.tekton.event.pipelinerun.<reason>.v1`
events whose data is `{"pipelineRun": <the PipelineRun>}`. Pipelines-as-Code
(and so Konflux) annotates each run with the commit it builds and where that
commit lives; Konflux labels it with the component it builds:

* sha: `pipelinesascode.tekton.dev/sha`;
* project: `url-org` + `/` + `url-repository`, or the path of `repo-url`;
* the event that started it: `pipelinesascode.tekton.dev/event-type`
  (`push` after a merge, `pull_request`/`Merge_Request` on an MR);
* the component (the variant): label `appstudio.openshift.io/component`.

Each configured check whose `match` the run meets becomes one signal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workqueue.signals.config import (
    CheckName,
    claimless_patterns,
    may_report,
    namespace_bindings,
)
from workqueue.signals.signal import CheckStatus

PAC = "pipelinesascode.tekton.dev/"
SHA_ANNOTATION = PAC + "sha"
ORG_ANNOTATION = PAC + "url-org"
REPOSITORY_ANNOTATION = PAC + "url-repository"
REPO_URL_ANNOTATION = PAC + "repo-url"
EVENT_TYPE_ANNOTATION = PAC + "event-type"
LOG_URL_ANNOTATION = PAC + "log-url"
COMPONENT_LABEL = "appstudio.openshift.io/component"

PIPELINERUN_EVENT = "dev.tekton.event.pipelinerun."
EVENT_STATUSES = {
    "started": CheckStatus.PENDING,
    "running": CheckStatus.RUNNING,
    "successful": CheckStatus.SUCCESS,
    "failed": CheckStatus.FAILED,
    "unknown": CheckStatus.RUNNING,
}
# The `Succeeded` condition's reasons of a run someone stopped rather than one that failed.
CANCELLED_REASONS = frozenset(
    {"Cancelled", "PipelineRunCancelled", "CancelledRunningFinally", "StoppedRunningFinally"}
)


class TektonMatch(BaseModel):
    """What a PipelineRun must carry for a check to take it: every pair must be equal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


class TektonCheck(BaseModel):
    """One check fed by PipelineRuns: which runs, and where their variant comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: CheckName
    match: TektonMatch = Field(default_factory=TektonMatch)
    variant_from: str = Field(
        f"labels.{COMPONENT_LABEL}",
        description="`labels.<key>` or `annotations.<key>` of the PipelineRun; "
        "a run without it reports variant ''",
    )

    @field_validator("variant_from")
    @classmethod
    def _known_source(cls, value: str) -> str:
        source, _, key = value.partition(".")
        if source not in {"labels", "annotations"} or not key:
            raise ValueError("variant_from must be labels.<key> or annotations.<key>")
        return value


def _konflux_build() -> list[TektonCheck]:
    return [
        TektonCheck(
            name="build",
            match=TektonMatch(annotations={EVENT_TYPE_ANNOTATION: "push"}),
        )
    ]


class TektonConfig(BaseModel):
    """`signals.tekton`: PipelineRun events on `POST /api/webhooks/tekton`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checks: list[TektonCheck] = Field(
        default_factory=_konflux_build,
        description="default: Konflux's push builds as check `build`, one variant per component",
    )
    secret_env: str | None = Field(
        None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="environment variable holding the secret senders that cannot set "
        "headers pass as `?token=`",
    )
    projects: list[str] | None = Field(
        None,
        min_length=1,
        description="projects a run of any namespace may report on with the secret",
    )
    namespaces: dict[str, list[str]] | None = Field(
        None,
        description="per Kubernetes namespace, the projects its runs may report on with the "
        "secret (tenants write their runs' annotations: bind each to its own projects)",
    )

    _patterns = field_validator("projects")(claimless_patterns)

    _namespace_patterns = field_validator("namespaces")(namespace_bindings)

    @model_validator(mode="after")
    def _secret_is_scoped(self) -> TektonConfig:
        if self.secret_env is not None and self.projects is None and self.namespaces is None:
            raise ValueError(
                "secret_env needs projects or namespaces: the secret reports on those only"
            )
        return self

    def secret_may_report(self, project: str, namespace: str | None) -> bool:
        """Whether a run of `namespace` (the controller's word: the run's own) sent with
        the secret may report on `project`."""
        return may_report(project, namespace, projects=self.projects, namespaces=self.namespaces)


@dataclass(frozen=True, slots=True)
class RunReport:
    """What one PipelineRun event says, before it is checked like any signal."""

    project: str | None
    namespace: str | None  # the run's Kubernetes namespace
    sha: str | None
    name: str
    variant: str
    status: CheckStatus
    url: str | None
    reported_at: datetime | None


class NotAPipelineRunError(ValueError):
    """The event is no PipelineRun event Tekton sends."""


def run_reports(
    event_type: str, data: Any, time: datetime | None, checks: Sequence[TektonCheck]
) -> list[RunReport]:
    """The signals one PipelineRun event makes: one per configured check it matches."""
    status = _status(event_type, data)
    run = data.get("pipelineRun") if isinstance(data, Mapping) else None
    metadata = run.get("metadata") if isinstance(run, Mapping) else None
    if not isinstance(metadata, Mapping):
        raise NotAPipelineRunError("the event's data holds no pipelineRun.metadata")
    annotations = _strings(metadata.get("annotations"))
    labels = _strings(metadata.get("labels"))
    reports = []
    for check in checks:
        if not _matches(check.match, annotations, labels):
            continue
        source, _, key = check.variant_from.partition(".")
        variant = (labels if source == "labels" else annotations).get(key, "")
        reports.append(
            RunReport(
                project=project_of(annotations),
                namespace=_namespace(metadata),
                sha=annotations.get(SHA_ANNOTATION),
                name=check.name,
                variant=variant,
                status=status,
                url=annotations.get(LOG_URL_ANNOTATION),
                reported_at=time,
            )
        )
    return reports


def project_of(annotations: Mapping[str, str]) -> str | None:
    """The GitLab project path Pipelines-as-Code names, or None."""
    org, repository = annotations.get(ORG_ANNOTATION), annotations.get(REPOSITORY_ANNOTATION)
    if org and repository:
        return f"{org.strip('/')}/{repository.strip('/')}"
    url = annotations.get(REPO_URL_ANNOTATION)
    if not url:
        return None
    path = urlsplit(url).path.strip("/")
    return path.removesuffix(".git") or None


def _namespace(metadata: Mapping[str, Any]) -> str | None:
    namespace = metadata.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else None


def _status(event_type: str, data: Any) -> CheckStatus:
    if not event_type.startswith(PIPELINERUN_EVENT) or not event_type.endswith(".v1"):
        raise NotAPipelineRunError(f"not a PipelineRun event: {event_type!r}")
    reason = event_type.removeprefix(PIPELINERUN_EVENT).removesuffix(".v1")
    status = EVENT_STATUSES.get(reason)
    if status is None:
        raise NotAPipelineRunError(f"not a PipelineRun event: {event_type!r}")
    if status is CheckStatus.FAILED and _condition_reason(data) in CANCELLED_REASONS:
        return CheckStatus.CANCELED
    return status


def _condition_reason(data: Any) -> str | None:
    try:
        conditions = data["pipelineRun"]["status"]["conditions"]
    except (KeyError, TypeError):
        return None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "Succeeded":
            reason = condition.get("reason")
            return reason if isinstance(reason, str) else None
    return None


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _matches(match: TektonMatch, annotations: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(annotations.get(k) == v for k, v in match.annotations.items()) and all(
        labels.get(k) == v for k, v in match.labels.items()
    )


def event_time(value: Any) -> datetime | None:
    """A CloudEvent's `time` as an aware datetime; None when absent or without a zone."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    return None


def event_key(attributes: Mapping[str, Any], check: str) -> str | None:
    """The key that makes a resent event a duplicate: its source and id name the
    delivery (CloudEvents: unique per source), one key per check it feeds. Hashed:
    unambiguous and of bounded length whatever the attributes hold."""
    event_id = attributes.get("id")
    if not event_id:
        return None
    named = json.dumps([str(attributes.get("source", "")), str(event_id), check])
    return "tekton:" + hashlib.sha256(named.encode()).hexdigest()
