"""The SQS consumer against a real SQS/SNS-compatible endpoint (moto in server mode)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest
import sqlalchemy as sa
from moto_sqs import CREDENTIALS, REGION, moto_endpoint
from webhook_support import deliveries, install_context, make_item, mr_registry, pending

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.queue.intake.resolver import IntakeResolver
from workqueue.receivers import sqs as sqs_consumer
from workqueue.receivers.projects import ProjectDirectory
from workqueue.receivers.sqs import (
    PoisonMessageError,
    SqsEventConsumer,
    build_sqs_consumer,
    parse_message,
    sqs_location,
)
from workqueue.settings import Settings


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
    return sqs.create_queue(
        QueueName=f"gitlab-events-{uuid.uuid4().hex[:12]}",
        Attributes={"VisibilityTimeout": "1"},
    )["QueueUrl"]


@pytest.fixture
def registry(simulator):
    return mr_registry(simulator.url)


@pytest.fixture
def projects(registry):
    directory = ProjectDirectory.for_registry(registry, install_context())
    yield directory
    directory.close()


@pytest.fixture
def item(sessions, registry, world):
    return make_item(
        sessions,
        registry,
        project=world.project_path,
        source_branch=world.branch,
        mr_iid=world.iid,
        mr_sha=world.sha,
        head_pipeline_id=world.pipeline_id,
    )


class Woken(list[uuid.UUID]):
    """Items the intake resolver woke; `wake` tells the resolver a delivery was stored."""

    wake: Callable[[], None]
    projects: ProjectDirectory  # the consumers' GitLab check of each body's project


@pytest.fixture
def notified(sessions, registry, projects) -> Iterator[Woken]:
    """The intake resolver runs beside the consumer, as in the service."""
    woken = Woken()
    resolver = IntakeResolver(
        sessions=sessions, registry=registry, on_items=woken.extend, sweep_seconds=60
    )
    woken.wake = resolver.wake
    woken.projects = projects
    resolver.start()
    yield woken
    resolver.stop(timeout=10)


def make_consumer(sqs, queue_url, sessions, registry, notified, **options):
    return SqsEventConsumer(
        client=options.pop("client", sqs),
        queue_url=queue_url,
        sessions=sessions,
        registry=registry,
        projects=notified.projects,
        on_stored=notified.wake,
        wait_seconds=options.pop("wait_seconds", 0),
        **options,
    )


def sns_envelope(payload, *, message_id=None, event_header=None, message=None):
    """An SNS notification as SNS writes it into a subscribed SQS queue."""
    envelope = {
        "Type": "Notification",
        "MessageId": message_id or str(uuid.uuid4()),
        "TopicArn": f"arn:aws:sns:{REGION}:123456789012:gitlab-events",
        "Message": message if message is not None else json.dumps(payload),
        "Timestamp": "2025-03-01T10:05:12.000Z",
        "SignatureVersion": "1",
        "Signature": "c2lnbmF0dXJl",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    }
    if event_header is not None:
        envelope["MessageAttributes"] = {
            "X-Gitlab-Event": {"Type": "String", "Value": event_header}
        }
    return json.dumps(envelope)


def queue_counts(sqs, queue_url) -> tuple[int, int]:
    """(visible, in flight) messages."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_an_event_published_to_sns_is_stored_and_its_message_deleted(
    endpoint, sqs, queue_url, sessions, registry, item, simulator, world, notified
):
    sns = boto3.client("sns", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
    topic = sns.create_topic(Name=f"gitlab-{uuid.uuid4().hex[:8]}")["TopicArn"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    published = sns.publish(
        TopicArn=topic,
        Message=json.dumps(simulator.pipeline_hook(world.pipeline_id)),
        MessageAttributes={
            "X-Gitlab-Event": {"DataType": "String", "StringValue": "Pipeline Hook"}
        },
    )
    sns.close()
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified, wait_seconds=1)

    consumer.start()
    try:
        wait_for(lambda: pending(sessions) and queue_counts(sqs, queue_url) == (0, 0))
    finally:
        assert consumer.stop(timeout=10)

    assert pending(sessions) == [(item, "pipeline", f"{published['MessageId']}:{item}")]
    assert deliveries(sessions) == [(published["MessageId"], "sqs", "pipeline")]
    wait_for(lambda: notified == [item])
    assert not consumer.running


def test_a_message_is_deleted_only_after_its_event_is_committed(
    sqs, queue_url, sessions, registry, item, simulator, world, notified
):
    seen_at_delete: list[list[str]] = []

    class Observing:
        """The real client; deletes first look at what another connection can see."""

        def __getattr__(self, name):
            return getattr(sqs, name)

        def delete_message_batch(self, **request):
            seen_at_delete.append([key for key, _, _ in deliveries(sessions)])
            return sqs.delete_message_batch(**request)

    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=sns_envelope(simulator.note_hook(world.note_id), message_id="sns-1"),
    )
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified, client=Observing())

    assert consumer.poll_once() == 1

    assert seen_at_delete == [["sns-1"]]
    assert [kind for _, kind, _ in pending(sessions)] == ["note"]
    assert queue_counts(sqs, queue_url) == (0, 0)


def test_the_same_sns_message_delivered_twice_is_stored_once(
    sqs, queue_url, sessions, registry, item, simulator, world, notified
):
    body = sns_envelope(simulator.merge_request_hook(world.project_id, world.iid), message_id="m")
    for _ in range(2):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified)

    handled = 0
    while handled < 2:
        handled += consumer.poll_once()

    assert pending(sessions) == [(item, "merge_request", f"m:{item}")]
    wait_for(lambda: notified == [item])
    assert queue_counts(sqs, queue_url) == (0, 0)


def test_poison_messages_are_deleted_with_a_warning(
    sqs, queue_url, sessions, registry, item, notified, caplog
):
    bodies = [
        "not json",
        "[1, 2]",
        sns_envelope(None, message="{broken"),
        sns_envelope(None, message="[]"),
    ]
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified)

    with caplog.at_level(logging.WARNING, logger="workqueue.receivers.sqs"):
        handled = 0
        while handled < len(bodies):
            handled += consumer.poll_once()

    assert queue_counts(sqs, queue_url) == (0, 0)
    assert pending(sessions) == []
    assert deliveries(sessions) == []
    assert caplog.text.count("deleted:") == len(bodies)


def test_irrelevant_and_non_event_messages_are_deleted_without_storing(
    sqs, queue_url, sessions, registry, item, notified
):
    confirmation = json.loads(sns_envelope(None, message="{}"))
    confirmation["Type"] = "SubscriptionConfirmation"
    for body in (
        json.dumps(confirmation),
        sns_envelope({"object_kind": "issue"}),
        sns_envelope({"no": "kind"}),
    ):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified)

    handled = 0
    while handled < 3:
        handled += consumer.poll_once()

    assert queue_counts(sqs, queue_url) == (0, 0)
    assert pending(sessions) == []


def test_raw_gitlab_json_uses_the_sqs_message_id_and_the_event_attribute(
    sqs, queue_url, sessions, registry, item, simulator, world, notified
):
    payload = simulator.job_hook(world.job_id)
    del payload["object_kind"]
    sent = sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(payload),
        MessageAttributes={"x-gitlab-event": {"DataType": "String", "StringValue": "Job Hook"}},
    )
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified)

    assert consumer.poll_once() == 1

    assert pending(sessions) == [(item, "build", f"{sent['MessageId']}:{item}")]


def test_a_message_whose_storage_fails_stays_and_is_redelivered(
    sqs, queue_url, sessions, registry, item, simulator, world, notified, monkeypatch
):
    failures = [RuntimeError("storage failed")]

    def flaky(session, *args, **kwargs):
        if failures:
            session.execute(sa.text("SELECT 1"))  # the failure comes inside the transaction
            raise failures.pop()
        return store_delivery(session, *args, **kwargs)

    monkeypatch.setattr(sqs_consumer, "store_delivery", flaky)
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=sns_envelope(simulator.merge_request_hook(world.project_id, world.iid)),
    )
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified)

    assert consumer.poll_once() == 0
    assert pending(sessions) == []
    assert deliveries(sessions) == []  # rolled back with the failed transaction
    assert queue_counts(sqs, queue_url) == (0, 1)

    deadline = time.monotonic() + 10
    handled = 0
    while not handled and time.monotonic() < deadline:
        handled = consumer.poll_once()  # visible again after the 1 s visibility timeout
        time.sleep(0.1)

    assert handled == 1
    assert [kind for _, kind, _ in pending(sessions)] == ["merge_request"]
    assert queue_counts(sqs, queue_url) == (0, 0)


def test_an_unreachable_database_keeps_the_message_and_backs_off(
    sqs, queue_url, registry, notified, simulator, world
):
    dead = build_engine(sa.engine.make_url("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=sns_envelope(simulator.merge_request_hook(world.project_id, world.iid)),
    )
    consumer = make_consumer(sqs, queue_url, build_sessions(dead), registry, notified)
    try:
        with pytest.raises(sa.exc.OperationalError):
            consumer.poll_once()
    finally:
        dead.dispose()

    assert queue_counts(sqs, queue_url) == (0, 1)


def test_stop_ends_the_thread_within_the_long_poll(sqs, queue_url, sessions, registry, notified):
    consumer = make_consumer(sqs, queue_url, sessions, registry, notified, wait_seconds=1)
    consumer.start()
    time.sleep(0.2)

    started = time.monotonic()
    assert consumer.stop(timeout=5)
    assert time.monotonic() - started < 2.5


def test_build_sqs_consumer_from_the_settings(
    monkeypatch, endpoint, sqs, queue_url, sessions, registry, item, simulator, world, notified
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("WORKQUEUE_SERVICE_EVENTS_QUEUE_URL", raising=False)
    unset = build_sqs_consumer(
        Settings(), sessions=sessions, registry=registry, projects=notified.projects
    )
    assert unset is None
    settings = Settings(WORKQUEUE_SERVICE_EVENTS_QUEUE_URL=queue_url)
    consumer = build_sqs_consumer(
        settings,
        sessions=sessions,
        registry=registry,
        projects=notified.projects,
        on_stored=notified.wake,
        wait_seconds=1,
    )
    assert consumer is not None
    sqs.send_message(
        QueueUrl=queue_url, MessageBody=sns_envelope(simulator.note_hook(world.note_id))
    )

    consumer.start()
    try:
        wait_for(lambda: len(pending(sessions)) == 1)
    finally:
        assert consumer.stop(timeout=5)

    wait_for(lambda: notified == [item])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/events", ("eu-west-1", None)),
        ("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/e", ("cn-north-1", None)),
        ("https://queue.amazonaws.com/123456789012/events", ("us-east-1", None)),
        (
            "https://vpce-1a2b.sqs.us-east-2.vpce.amazonaws.com/123456789012/e",
            ("us-east-2", "https://vpce-1a2b.sqs.us-east-2.vpce.amazonaws.com"),
        ),
        ("http://localhost:4566/000000000000/events", (None, "http://localhost:4566")),
    ],
)
def test_sqs_location(url, expected):
    assert sqs_location(url) == expected


def test_sqs_location_refuses_what_is_not_a_url():
    with pytest.raises(ValueError, match="not a URL"):
        sqs_location("events-queue")


def test_parse_message_shapes():
    payload = {"object_kind": "push", "ref": "refs/heads/main"}
    wrapped = parse_message(
        {"MessageId": "sqs-1", "Body": sns_envelope(payload, message_id="sns-1")}
    )
    raw = parse_message({"MessageId": "sqs-2", "Body": json.dumps(payload)})
    by_attribute = parse_message(
        {"MessageId": "sqs-3", "Body": sns_envelope({"x": 1}, event_header="Note Hook")}
    )

    assert (wrapped.delivery_key, wrapped.event_type, wrapped.body) == ("sns-1", "push", payload)
    assert (raw.delivery_key, raw.event_type) == ("sqs-2", "push")
    assert by_attribute.event_type == "note"
    with pytest.raises(PoisonMessageError):
        parse_message({"MessageId": "x", "Body": "{"})
    with pytest.raises(PoisonMessageError):
        parse_message({"MessageId": "x"})
