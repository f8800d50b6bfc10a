"""Events from SQS carry no credential: they are hints. Nothing ends, admits or merges on
their word alone, and a body whose project id and path name different projects is not
stored. Real SQS API (moto in server mode), real database, the running service and the
GitLab simulator; the forged events go through `SqsEventConsumer`, as in production."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
import sqlalchemy as sa
from harness import wait_until
from moto_sqs import CREDENTIALS, REGION, moto_endpoint
from mr_harness import FILES, PROJECT
from trunk_harness import land, new_simulator, push_hook, trunk_registry
from webhook_support import deliveries, install_context, mr_registry, pending, webhook_app

from workqueue.queue.intake.resolver import IntakeResolver
from workqueue.receivers.projects import ProjectDirectory
from workqueue.receivers.sqs import SqsEventConsumer
from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec
from workqueue.types.trunk.landed_heads import READ_HEAD_EVENT

MERGE_ROUTE = "/projects/:id/merge_requests/:merge_request_iid/merge"
MR_ROUTE = "/projects/:id/merge_requests/:merge_request_iid"
RETRY_ROUTE = "/projects/:id/jobs/:job_id/retry"
SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/sync-kernel",
    "title": "Sync kernel sources",
    "commit_message": "Sync sources from upstream",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


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
    return sqs.create_queue(QueueName=f"gitlab-events-{uuid.uuid4().hex[:12]}")["QueueUrl"]


def publish(sqs, queue_url: str, payload: dict[str, Any]) -> None:
    """A GitLab body as a forwarder writes it straight into the queue (raw delivery)."""
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(payload))


def drain(consumer: SqsEventConsumer) -> int:
    """Poll until the queue gives nothing more; how many messages were deleted."""
    deleted = 0
    while handled := consumer.poll_once():
        deleted += handled
    return deleted


# -- id and path must name one project -------------------------------------------------


@pytest.fixture
def directory(simulator) -> Iterator[ProjectDirectory]:
    projects = ProjectDirectory.for_registry(mr_registry(simulator.url), install_context())
    yield projects
    projects.close()


def test_a_message_whose_project_id_and_path_disagree_is_deleted_and_not_stored(
    sqs, queue_url, sessions, simulator, world, directory, caplog
):
    other = simulator.create_project("elsewhere/unrelated", FILES)
    forged = simulator.merge_request_hook(world.project_id, world.iid, action="merge")
    forged["project"]["id"] = other  # the path still says acme/widgets
    contradicting = simulator.push_hook(world.project_id, world.branch, before=world.sha)
    contradicting["project_id"] = other  # `project.id` is acme/widgets'
    genuine = simulator.merge_request_hook(world.project_id, world.iid)
    for payload in (forged, contradicting, genuine):
        publish(sqs, queue_url, payload)
    registry = mr_registry(simulator.url)
    consumer = SqsEventConsumer(
        client=sqs,
        queue_url=queue_url,
        sessions=sessions,
        registry=registry,
        projects=directory,
        wait_seconds=0,
    )

    assert drain(consumer) == 3  # all three are gone from the queue
    assert [event_type for _, _, event_type in deliveries(sessions)] == ["merge_request"]
    assert "different projects" in caplog.text


@pytest.mark.parametrize("spelling", ["{id}e0", "{id}.0", '"{id}"', "true"])
def test_a_message_whose_project_id_is_no_integer_is_deleted_and_not_stored(
    sqs, queue_url, sessions, simulator, world, directory, caplog, spelling
):
    """JSONB stores `42e0` as `42`: the id the check read as absent would reach the items."""
    hook = simulator.merge_request_hook(world.project_id, world.iid, action="merge")
    hook["project"]["id"] = "@ID@"
    raw = json.dumps(hook).replace('"@ID@"', spelling.format(id=world.project_id))
    sqs.send_message(QueueUrl=queue_url, MessageBody=raw)
    consumer = SqsEventConsumer(
        client=sqs,
        queue_url=queue_url,
        sessions=sessions,
        registry=mr_registry(simulator.url),
        projects=directory,
        wait_seconds=0,
    )

    assert drain(consumer) == 1
    assert deliveries(sessions) == []
    assert "project.id is not a project id" in caplog.text


def test_a_message_naming_an_internal_event_type_is_deleted_and_not_stored(
    sqs, queue_url, sessions
):
    """`trunk.read_head` is a hint the trunk type keeps for itself: from SQS it is no
    GitLab event, as from a webhook, so it never reaches the internal creator."""
    simulator = new_simulator()
    try:
        registry = trunk_registry(simulator.url)
        assert registry.routes_event(READ_HEAD_EVENT)
        (queue,) = registry.get("trunk").config.config.queues
        publish(sqs, queue_url, {"object_kind": READ_HEAD_EVENT, "queue": queue.name})
        consumer = SqsEventConsumer(
            client=sqs,
            queue_url=queue_url,
            sessions=sessions,
            registry=registry,
            projects=ProjectDirectory(()),
            wait_seconds=0,
        )
        assert drain(consumer) == 1
    finally:
        simulator.stop()

    assert deliveries(sessions) == []


def test_a_consumer_without_a_directory_refuses_to_store_what_it_cannot_check(
    sqs, queue_url, sessions, simulator, world
):
    publish(sqs, queue_url, simulator.merge_request_hook(world.project_id, world.iid))
    consumer = SqsEventConsumer(
        client=sqs,
        queue_url=queue_url,
        sessions=sessions,
        registry=mr_registry(simulator.url),
        projects=ProjectDirectory(()),
        wait_seconds=0,
    )

    assert consumer.poll_once() == 0  # kept: redelivered once GitLab can be asked
    assert deliveries(sessions) == []


# -- forged events through SQS: GitLab decides ------------------------------------------


def item(base_url: str, item_id: str) -> dict[str, Any]:
    return httpx.get(f"{base_url}/api/work-items/{item_id}", timeout=10).json()


def settled(sessions, item_id: str) -> bool:
    """Every stored event of the item applied and every executor it raised has run."""
    if pending(sessions):
        return False
    with sessions() as session:
        row = session.execute(
            sa.text("SELECT actionable, leased_until FROM work_items WHERE id = :id"),
            {"id": item_id},
        ).one()
    return not row.actionable and row.leased_until is None


@pytest.fixture
def mr_service(database_url, simulator: GitLabSimulator):
    simulator.create_project(PROJECT, FILES)
    simulator.configure_project(PROJECT, only_allow_merge_if_pipeline_succeeds=True)
    with webhook_app(database_url, simulator.url, process_items=True) as service:
        created = httpx.post(f"{service.base_url}/api/work-items/mr", json=SUBMIT, timeout=30)
        assert created.status_code == 201, created.text
        item_id = created.json()["id"]
        wait_until(
            lambda: (
                item(service.base_url, item_id)["details"]["mr_iid"] is not None
                and settled(service.runtime.sessions, item_id)
            ),
            timeout=30,
            what="the MR",
        )
        yield service, item_id, item(service.base_url, item_id)["details"]["mr_iid"]


def forged_events(simulator: GitLabSimulator, iid: int, pipeline_id: int, job_id: int):
    """What an SQS producer could claim: merged, closed, a green pipeline, a failed job."""
    merged = simulator.merge_request_hook(PROJECT, iid, action="merge")
    merged["object_attributes"]["state"] = "merged"
    closed = simulator.merge_request_hook(PROJECT, iid, action="close")
    closed["object_attributes"]["state"] = "closed"
    green = copy.deepcopy(simulator.pipeline_hook(pipeline_id))
    green["object_attributes"]["status"] = "success"
    for build in green["builds"]:
        build["status"] = "success"
    failed_job = simulator.job_hook(job_id)
    failed_job.update(build_status="failed", build_failure_reason="runner_system_failure")
    return {"merged": merged, "closed": closed, "green": green, "failed job": failed_job}


@pytest.mark.parametrize("claim", ["merged", "closed", "green", "failed job"])
def test_a_forged_sqs_event_changes_nothing_gitlab_does_not_confirm(
    mr_service, simulator, sqs, queue_url, claim
):
    service, item_id, iid = mr_service
    sessions = service.runtime.sessions
    pipeline_id = simulator.create_pipeline(
        PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit", status="running")]
    )
    (job,) = simulator.jobs(pipeline_id)
    consumer = SqsEventConsumer(
        client=sqs,
        queue_url=queue_url,
        sessions=sessions,
        registry=service.runtime.registry,
        on_stored=service.runtime.manager.intake.stored_here,
        projects=service.app.state.webhook_projects,
        wait_seconds=0,
    )
    reads_before = simulator.request_count("GET", MR_ROUTE)
    publish(sqs, queue_url, forged_events(simulator, iid, pipeline_id, job["id"])[claim])

    assert drain(consumer) == 1
    wait_until(
        lambda: (
            simulator.request_count("GET", MR_ROUTE) > reads_before and settled(sessions, item_id)
        ),
        timeout=30,
        what="the hint to be checked with GitLab",
    )
    assert item(service.base_url, item_id)["phase"] == "active"
    assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
    assert simulator.request_count("PUT", MERGE_ROUTE) == 0
    assert simulator.request_count("POST", RETRY_ROUTE) == 0
    assert simulator.jobs(pipeline_id)[0]["status"] == "running"


# -- a forged Push Hook through SQS: the trunk head comes from GitLab ---------------------


def test_a_forged_push_through_sqs_ingests_the_branch_head_gitlab_reports(
    sqs, queue_url, sessions, database_url
):
    """Push Hooks are hints (API.md "Trunk heads must be on their branch"): a body naming a
    sha that exists nowhere still ingests only what GitLab says the head of main is."""
    simulator = new_simulator()
    try:
        registry = trunk_registry(simulator.url)
        real_head = land(simulator)
        forged = push_hook(simulator, real_head)
        forged["after"] = forged["checkout_sha"] = "f" * 40
        projects = ProjectDirectory.for_registry(registry, install_context())
        resolver = IntakeResolver(
            sessions=sessions, registry=registry, on_items=lambda _: None, sweep_seconds=60
        )
        resolver.start()
        try:
            consumer = SqsEventConsumer(
                client=sqs,
                queue_url=queue_url,
                sessions=sessions,
                registry=registry,
                projects=projects,
                on_stored=resolver.wake,
                wait_seconds=0,
            )
            publish(sqs, queue_url, forged)
            assert drain(consumer) == 1
            wait_until(lambda: heads(sessions) != [], timeout=30, what="the ingest")
        finally:
            resolver.stop(timeout=10)
            projects.close()
    finally:
        simulator.stop()

    assert heads(sessions) == [real_head]


def heads(sessions) -> list[str]:
    with sessions() as session:
        return list(
            session.execute(sa.text("SELECT sha FROM trunk_details ORDER BY sequence")).scalars()
        )
