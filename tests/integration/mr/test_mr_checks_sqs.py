"""External checks over the events queue: reports and PipelineRun CloudEvents as SQS
messages (raw or in an SNS envelope) reach the merged MR item as the API's do. A queue
message carries no credential, so signals over SQS report only on `signals.sqs.projects`.
Real SQS API (moto in server mode), PostgreSQL, the engine and the simulator."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import sqlalchemy as sa
from cloudevents.conversion import to_structured
from moto_sqs import CREDENTIALS, REGION, moto_endpoint
from mr_harness import PROJECT, TOKEN
from tekton_sender import cloud_event, pipeline_run
from test_mr_checks import BUILD_API_WORKER, merge
from test_mr_lifecycle_support import gitlab, lifecycle

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.models import Phase
from workqueue.receivers.projects import ProjectDirectory
from workqueue.receivers.sqs import SqsEventConsumer
from workqueue.signals.sources import SignalsConfig
from workqueue.types.plugin import InstallContext

LOGS = "https://ci.example/runs/"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_endpoint() as url:
        yield url


@pytest.fixture
def sqs(endpoint):
    client = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
    yield client
    client.close()


@pytest.fixture
def queue_url(sqs) -> str:
    return sqs.create_queue(QueueName=f"checks-{uuid.uuid4().hex[:12]}")["QueueUrl"]


def consumer(
    world,
    sqs,
    queue_url,
    projects: list[str] | None,
    namespaces: dict[str, list[str]] | None = None,
) -> SqsEventConsumer:
    directory = ProjectDirectory.for_registry(
        world.registry,
        InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    return SqsEventConsumer(
        client=sqs,
        queue_url=queue_url,
        sessions=world.sessions,
        registry=world.registry,
        projects=directory,
        on_stored=world.manager.intake.stored_here,
        signals=SignalsConfig.model_validate(
            {"sqs": {"projects": projects, "namespaces": namespaces}}
        ),
        wait_seconds=0,
    )


def drain(reader: SqsEventConsumer) -> int:
    deleted = 0
    while handled := reader.poll_once():
        deleted += handled
    return deleted


def report(sha: str, variant: str, status: str, **overrides: object) -> str:
    return json.dumps(
        {
            "project": PROJECT,
            "sha": sha,
            "name": "build",
            "variant": variant,
            "status": status,
            "url": f"{LOGS}{variant}",
            **overrides,
        }
    )


def in_sns(body: str) -> str:
    return json.dumps({"Type": "Notification", "MessageId": str(uuid.uuid4()), "Message": body})


def structured(event) -> str:
    _, body = to_structured(event)
    return body.decode()


def stored(world) -> list[tuple[str, str]]:
    with world.sessions() as session:
        rows = session.execute(sa.text("SELECT variant, status FROM check_signals ORDER BY 1"))
        return [tuple(row) for row in rows]


def queue_empty(sqs, queue_url) -> bool:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return attributes == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }


def test_a_report_and_a_cloudevent_over_sqs_complete_the_merged_item(sessions, sqs, queue_url):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        sha = world.detail(item_id).merge_commit_sha
        reader = consumer(world, sqs, queue_url, [PROJECT])
        # A report, raw; the same one again in an SNS envelope (SNS redelivers).
        sqs.send_message(QueueUrl=queue_url, MessageBody=report(sha, "api", "success"))
        event = cloud_event(pipeline_run(sha=sha, project=PROJECT, component="worker"))
        sqs.send_message(QueueUrl=queue_url, MessageBody=in_sns(structured(event)))
        sqs.send_message(QueueUrl=queue_url, MessageBody=in_sns(structured(event)))
        assert drain(reader) == 3
        assert queue_empty(sqs, queue_url)
        row = world.wait_phase(item_id, Phase.COMPLETED)
        assert row.error is None
        assert world.detail(item_id).completion_reason == "merged"
        assert stored(world) == [("api", "success"), ("worker", "success")]


def test_a_red_build_over_sqs_fails_the_item_naming_it(sessions, sqs, queue_url):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        sha = world.detail(item_id).merge_commit_sha
        reader = consumer(world, sqs, queue_url, ["group/**"])
        data = pipeline_run(sha=sha, project=PROJECT, component="worker", reason="Failed")
        sqs.send_message(QueueUrl=queue_url, MessageBody=structured(cloud_event(data, "failed")))
        assert drain(reader) == 1
        row = world.wait_phase(item_id, Phase.FAILED)
        assert "build" in row.error
        assert "worker" in row.error


@pytest.mark.parametrize(
    ("projects", "message"),
    [
        (None, "report"),  # signals over SQS not configured: nothing is stored
        (["other/*"], "report"),  # the queue may not report on this project
        ([PROJECT], "bad_sha"),
        ([PROJECT], "future"),
        ([PROJECT], "bad_event"),
    ],
)
def test_signal_messages_the_queue_may_not_send_are_deleted_and_change_nothing(
    sessions, sqs, queue_url, projects, message
):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        sha = world.detail(item_id).merge_commit_sha
        reader = consumer(world, sqs, queue_url, projects)
        bodies = {
            "report": report(sha, "api", "success"),
            "bad_sha": report("abc", "api", "success"),
            "future": report(
                sha, "api", "success", timestamp=(datetime.now(UTC) + timedelta(days=1)).isoformat()
            ),
            "bad_event": json.dumps({"specversion": "1.0", "type": "x"}),  # no id, no source
        }
        sqs.send_message(QueueUrl=queue_url, MessageBody=bodies[message])
        assert drain(reader) == 1  # deleted: it can never be stored
        assert queue_empty(sqs, queue_url)
        world.wait_settled()
        assert stored(world) == []
        assert world.item(item_id).phase == Phase.ACTIVE


def test_a_gitlab_event_is_still_a_gitlab_event(sessions, sqs, queue_url):
    """A body with `object_kind` is never read as a signal, even with report-like keys."""
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        reader = consumer(world, sqs, queue_url, [PROJECT])
        body = {
            "object_kind": "pipeline",
            "project": PROJECT,
            "sha": "a" * 40,
            "name": "build",
            "status": "success",
        }
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
        assert drain(reader) == 1
        world.wait_settled()
        assert stored(world) == []


def test_relayed_runs_report_only_for_the_projects_of_their_namespace(sessions, sqs, queue_url):
    """Tenants write their runs' annotations: with `signals.sqs.namespaces`, a run relayed
    over the queue reports only on the projects its own namespace is bound to."""
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        reader = consumer(world, sqs, queue_url, None, {"team-tenant": [PROJECT]})
        forged = pipeline_run(sha="c" * 40, project=PROJECT, component="api")
        forged["pipelineRun"]["metadata"]["namespace"] = "evil-tenant"
        sqs.send_message(QueueUrl=queue_url, MessageBody=structured(cloud_event(forged)))
        assert drain(reader) == 1
        assert stored(world) == []
        own = pipeline_run(sha="c" * 40, project=PROJECT, component="api")  # team-tenant
        sqs.send_message(QueueUrl=queue_url, MessageBody=structured(cloud_event(own)))
        assert drain(reader) == 1
        assert stored(world) == [("api", "success")]
        # A report carries no namespace: `namespaces` alone admits none.
        sqs.send_message(QueueUrl=queue_url, MessageBody=report("c" * 40, "worker", "success"))
        assert drain(reader) == 1
        assert stored(world) == [("api", "success")]
