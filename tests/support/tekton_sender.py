"""Tekton's events controller in miniature: PipelineRun CloudEvents as it sends them.

The runs carry what Pipelines-as-Code and Konflux put on them (the commit, the
repository, the event that started the run, the component), and are sent in
the CloudEvents HTTP binding's binary mode (Tekton's own) or structured mode,
built by the CloudEvents SDK.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import httpx
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent

PATH = "/api/webhooks/tekton"
_ids = itertools.count(1)


def pipeline_run(
    *,
    sha: str,
    project: str = "team/app",
    component: str | None = "api",
    event_type: str = "push",
    reason: str = "Succeeded",
    repo_url: bool = False,
    log_url: str | None = "https://konflux.example/ns/pipelinerun/build-1",
) -> dict[str, Any]:
    org, _, repository = project.rpartition("/")
    annotations = {
        "pipelinesascode.tekton.dev/sha": sha,
        "pipelinesascode.tekton.dev/event-type": event_type,
    }
    if repo_url:
        annotations["pipelinesascode.tekton.dev/repo-url"] = f"https://gitlab.example/{project}"
    else:
        annotations["pipelinesascode.tekton.dev/url-org"] = org
        annotations["pipelinesascode.tekton.dev/url-repository"] = repository
    if log_url:
        annotations["pipelinesascode.tekton.dev/log-url"] = log_url
    labels = {"tekton.dev/pipeline": "build"}
    if component:
        labels["appstudio.openshift.io/component"] = component
    return {
        "pipelineRun": {
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "metadata": {
                "name": f"{component or 'app'}-on-push-x7k2p",
                "namespace": "team-tenant",
                "labels": labels,
                "annotations": annotations,
            },
            "status": {"conditions": [{"type": "Succeeded", "reason": reason}]},
        }
    }


def cloud_event(
    data: dict[str, Any], reason: str = "successful", *, event_id: str | None = None, time=None
) -> CloudEvent:
    name = data.get("pipelineRun", {}).get("metadata", {}).get("name", "run")
    attributes = {
        "type": f"dev.tekton.event.pipelinerun.{reason}.v1",
        "source": f"/apis///namespaces/team-tenant/pipelineruns/{name}",
        "id": event_id or f"event-{next(_ids)}",
        "time": (time or datetime.now(UTC)).isoformat(),
    }
    return CloudEvent(attributes, data)


def send(
    client: httpx.Client,
    event: CloudEvent,
    *,
    structured: bool = False,
    headers: dict[str, str] | None = None,
    token: str | None = None,
) -> httpx.Response:
    if structured:
        event_headers, body = to_structured(event)
    else:
        event_headers, body = to_binary(event)
        event_headers["content-type"] = "application/json"
    params = {"token": token} if token is not None else None
    return client.post(
        PATH, content=body, headers={**event_headers, **(headers or {})}, params=params
    )
