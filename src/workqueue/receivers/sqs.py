"""Optional SQS consumer: GitLab events relayed through SNS into an SQS queue.

Runs when `WORKQUEUE_SERVICE_EVENTS_QUEUE_URL` is set (`build_sqs_consumer`).
One daemon thread long-polls the queue (DDR-36) and stores each event exactly
like the webhook receiver does (`queue.intake.store_delivery`, source `sqs`);
the intake resolver turns it into item events behind it, and items are then
processed by their own work-item threads (DDR-29/30).

* Message body: an SNS notification envelope
  (`{"Type": "Notification", "MessageId": ..., "Message": "<GitLab JSON>",
  "MessageAttributes": ...}`) or, with SNS raw message delivery or a direct
  producer, the GitLab JSON itself.
* Event type: the payload's `object_kind`, else an `X-Gitlab-Event` message
  attribute (SNS or SQS attribute, name case-insensitive). Only kinds GitLab
  sends: a message naming one of the service's own (`trunk.read_head`) holds
  no GitLab event and is deleted unstored.
* Delivery key: the SNS `MessageId` (the SQS `MessageId` for raw messages):
  the same notification delivered twice is stored once.
* A message carries no credential, so its event is a hint like any hook
  (the handlers confirm with GitLab before anything ends, is admitted or
  merged), and one whose project id and path name different projects on
  GitLab, or whose project id is no JSON integer
  (`api.webhook_projects.contradiction`), is deleted with a warning, not
  stored; when GitLab cannot be asked, or the consumer's own budget of
  uncached project look-ups (`SQS_PAYER`, 60 a minute) is spent, the message
  stays and comes back after its visibility timeout.
* A message is deleted only after its delivery is committed (DDR-31): a crash
  in between redelivers it, which the delivery key makes harmless. A message
  that is not JSON (poison) is deleted with a warning; one whose storage fails
  for another reason stays and is redelivered after the visibility timeout
  (configure a redrive policy / DLQ on the queue for messages that never pass).
* Signals (external checks, `signals.sqs`): a body shaped like a report of
  `POST /api/signals`, or a PipelineRun CloudEvent in structured mode, is a
  signal message (`signals.messages`). With no credential in it, whoever may
  send to the queue reports on `signals.sqs.projects`, and a run of a
  namespace on `signals.sqs.namespaces[it]`; without either setting, or for
  another project, or when invalid, the message is deleted with a warning and
  nothing is stored. Its key: the event's source and id for a
  CloudEvent, the delivery key for a report.
* Shutdown: `stop()` before `ProcessingManager.stop()` (DDR-36). Messages
  received after `stop()` was called are not processed: they reappear after
  the visibility timeout, for this or another replica.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable
from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.webhook_bodies import GITLAB_EVENT_TYPES, gitlab_event_type
from workqueue.observability.service_metrics import ServiceMetrics
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.background import BackgroundService, Backoff
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.queue.intake.pending_events import IngestStatus, parse_event_body
from workqueue.queue.registry import TypeRegistry
from workqueue.receivers.lookup_budget import LookupRefused
from workqueue.receivers.projects import (
    ProjectDirectory,
    ProjectLookupUnavailable,
    contradiction,
)
from workqueue.settings import Settings
from workqueue.signals.intake import accept_signal
from workqueue.signals.messages import BadSignalMessageError, MessageSignals, message_signals
from workqueue.signals.sources import SignalsConfig

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import DeleteMessageBatchRequestEntryTypeDef, MessageTypeDef

logger = logging.getLogger(__name__)

SQS_SOURCE = "sqs"  # received_deliveries.source
SQS_PAYER = "sqs"  # whose look-up budget the consumer's project checks spend
# Who reported a signal that came over the queue: a name no token identity takes for
# granted (keys and audit entries are per reporter).
SQS_REPORTER = "workqueue:sqs"
DEFAULT_WAIT_SECONDS = 10  # long poll; also bounds how long stop() may wait for the thread
MAX_BATCH = 10  # SQS limit for receive and delete batches
_EVENT_ATTRIBUTE = "x-gitlab-event"


class PoisonMessageError(ValueError):
    """The message can never be stored (not JSON, not an object); it is deleted."""


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    """A GitLab event read from one SQS message; `event_type` None: nothing to store."""

    delivery_key: str
    event_type: str | None
    body: dict[str, Any]


def parse_message(message: Mapping[str, Any]) -> QueuedEvent:
    """Unwrap one SQS message (SNS envelope or raw GitLab JSON); raises PoisonMessageError."""
    raw = message.get("Body")
    outer = parse_event_body(raw) if isinstance(raw, str) else None
    if outer is None:
        raise PoisonMessageError("the body is not a JSON object")
    key = message.get("MessageId")
    if not isinstance(key, str) or not key:
        key = "sha256:" + hashlib.sha256(str(raw).encode("utf-8", "replace")).hexdigest()
    header = _event_attribute(message.get("MessageAttributes"))
    if not _is_sns_envelope(outer):
        return QueuedEvent(key, gitlab_event_type(outer, header), outer)
    sns_key = outer.get("MessageId")
    if isinstance(sns_key, str) and sns_key:
        key = sns_key
    if outer.get("Type") != "Notification":  # e.g. SubscriptionConfirmation: not an event
        return QueuedEvent(key, None, {})
    inner = parse_event_body(outer["Message"])
    if inner is None:
        raise PoisonMessageError("the SNS Message is not a JSON object")
    header = _event_attribute(outer.get("MessageAttributes")) or header
    return QueuedEvent(key, gitlab_event_type(inner, header), inner)


def _is_sns_envelope(body: Mapping[str, Any]) -> bool:
    # GitLab payloads have neither key; SNS notifications always have both.
    return isinstance(body.get("Type"), str) and isinstance(body.get("Message"), str)


def _event_attribute(attributes: Any) -> str | None:
    """`X-Gitlab-Event` from SNS (`{"Type", "Value"}`) or SQS (`{"StringValue"}`) attributes."""
    if not isinstance(attributes, Mapping):
        return None
    for name, attribute in attributes.items():
        if str(name).lower() != _EVENT_ATTRIBUTE or not isinstance(attribute, Mapping):
            continue
        value = attribute.get("Value", attribute.get("StringValue"))
        if isinstance(value, str) and value.strip() in GITLAB_EVENT_TYPES:
            return value.strip()
    return None


class SqsEventConsumer(BackgroundService):
    """One daemon thread that long-polls an SQS queue and ingests its GitLab events."""

    def __init__(
        self,
        *,
        client: SQSClient,
        queue_url: str,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        projects: ProjectDirectory,
        on_stored: Callable[[], None] | None = None,
        metrics: ServiceMetrics | None = None,
        signals: SignalsConfig | None = None,
        audit: AuditLog | None = None,
        wait_seconds: int = DEFAULT_WAIT_SECONDS,
        max_messages: int = MAX_BATCH,
        max_backoff_seconds: float = 30.0,
        close_client: bool = False,
    ) -> None:
        """`projects` checks each body's project id and path with GitLab; `on_stored`
        is called after a batch stored deliveries (wakes the intake resolver);
        `signals`/`audit`: where signal messages may report, and their audit;
        `close_client`: the consumer owns `client` and closes it once stopped."""
        if not 0 <= wait_seconds <= 20:
            raise ValueError("wait_seconds must be between 0 and 20 (the SQS limit)")
        if not 1 <= max_messages <= MAX_BATCH:
            raise ValueError(f"max_messages must be between 1 and {MAX_BATCH}")
        self._client = client
        self._queue_url = queue_url
        self._sessions = sessions
        self._registry = registry
        self._projects = projects
        self._on_stored = on_stored
        self._metrics = metrics
        self._signals = signals or SignalsConfig()
        self._audit = audit or AuditLog()
        self._wait_seconds = wait_seconds
        self._max_messages = max_messages
        self._close_client = close_client
        super().__init__(
            thread_name="workqueue-sqs-consumer",
            # A maximum below the first delay (tests) caps that too.
            backoff=Backoff(initial=min(0.5, max_backoff_seconds), maximum=max_backoff_seconds),
        )

    def start(self) -> None:
        logger.info("consuming GitLab events from SQS queue %s", self._queue_url)
        super().start()

    def seconds_until_next_round(self) -> float:
        return 0.0  # the long poll is the wait

    def run_round(self) -> None:
        self.poll_once()

    def round_failed(self, error: Exception, failures: int, delay: float) -> None:
        # SQS errors repeat while the queue is unreachable: one traceback is enough.
        logger.warning(
            "SQS consumer: %s; retrying in %.1f s",
            error,
            delay,
            exc_info=not is_database_unavailable(error) and failures == 1,
        )

    def after_stop(self, ended: bool, _timeout: float, /) -> None:
        if ended and self._close_client:
            self._close_client = False
            self._client.close()

    def poll_once(self) -> int:
        """One long poll and the messages it brought; returns how many were deleted."""
        response = self._client.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=self._max_messages,
            WaitTimeSeconds=self._wait_seconds,
            MessageAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages or self._stopping.is_set():
            return 0
        done: list[MessageTypeDef] = []
        try:
            for message in messages:  # one by one: `done` must survive an exception
                if self._handle(message):
                    done.append(message)  # noqa: PERF401
        finally:
            self._delete(done)
        return len(done)

    # -- internals -------------------------------------------------------------

    def _handle(self, message: MessageTypeDef) -> bool:
        """Store one message's event; True when the message may be deleted."""
        message_id = message.get("MessageId", "?")
        try:
            event = parse_message(message)
        except PoisonMessageError as error:
            logger.warning("SQS message %s deleted: %s", message_id, error)
            return True
        event_type = event.event_type
        if event_type is None:
            signals = self._signal_message(message_id, event.body)
            if signals is not None:
                return self._store_signals(message_id, event.delivery_key, signals)
            logger.info("SQS message %s holds no GitLab event type: deleted", message_id)
            return True
        verdict = self._project_verdict(message_id, event_type, event.body)
        if verdict is not None:
            return verdict
        try:
            status: IngestStatus = run_in_transaction(
                self._sessions,
                lambda session: store_delivery(
                    session,
                    self._registry,
                    source=SQS_SOURCE,
                    delivery_key=event.delivery_key,
                    event_type=event_type,
                    body=event.body,
                ),
            )
        except Exception as error:
            if is_database_unavailable(error):
                raise  # back off; this and the rest of the batch come back later
            logger.exception("SQS message %s not stored; it will be redelivered", message_id)
            return False
        # Committed: the delivery is durable, the message may go (DDR-31).
        if status == "accepted":
            if self._on_stored is not None:
                self._on_stored()
            if self._metrics is not None:
                self._metrics.events_received.labels(SQS_SOURCE).inc()
        logger.debug("SQS message %s: %s", message_id, status)
        return True

    def _signal_message(self, message_id: str, body: Mapping[str, Any]) -> MessageSignals | None:
        """The message's signals, None for no signal message; a bad one is logged and
        answered with no signals (deleted unstored)."""
        try:
            return message_signals(body, self._signals.tekton.checks, datetime.now(UTC))
        except BadSignalMessageError as error:
            logger.warning("SQS message %s deleted: %s", message_id, error)
            return MessageSignals([])

    def _store_signals(self, message_id: str, delivery_key: str, found: MessageSignals) -> bool:
        """Store a signal message's signals when the queue may report on their projects;
        True: the message may be deleted."""
        scope = self._signals.sqs
        refused = [
            queued
            for queued in found.signals
            if not scope.may_report(queued.signal.project, queued.namespace)
        ]
        if refused:
            first = refused[0]
            why = (
                "signals.sqs is not configured"
                if scope.projects is None and scope.namespaces is None
                else f"signals.sqs does not let it report on {first.signal.project}"
                + (f" for namespace {first.namespace}" if first.namespace else "")
            )
            logger.warning("SQS message %s deleted unstored: a signal, and %s", message_id, why)
            return True
        changed = False
        for queued in found.signals:
            signal, key = queued.signal, queued.key
            try:
                recorded = accept_signal(
                    self._sessions,
                    self._registry,
                    self._audit,
                    signal,
                    source=SQS_SOURCE,
                    reporter=SQS_REPORTER,
                    key=key or f"sqs:{delivery_key}"[:255],
                )
            except Exception as error:
                if is_database_unavailable(error):
                    raise
                logger.exception("SQS message %s not stored; it will be redelivered", message_id)
                return False
            changed = changed or recorded.changed
        if changed and self._on_stored is not None:
            self._on_stored()
        logger.debug("SQS message %s: %d signals", message_id, len(found.signals))
        return True

    def _project_verdict(self, message_id: str, event_type: str, body: Any) -> bool | None:
        """None: store it. True: delete it unstored (its project id and path contradict
        each other). False: keep it for later (GitLab cannot be asked now)."""
        if not self._registry.routes_event(event_type):
            return None  # stored as "ignored" without a look at it
        try:
            refused = contradiction(self._projects, body, payer=SQS_PAYER)
        except (ProjectLookupUnavailable, LookupRefused) as error:
            logger.warning(
                "SQS message %s kept, its project cannot be checked: %s", message_id, error
            )
            return False
        if refused is None:
            return None
        logger.warning("SQS message %s deleted unstored: %s", message_id, refused)
        return True

    def _delete(self, messages: Sequence[MessageTypeDef]) -> None:
        for start in range(0, len(messages), MAX_BATCH):
            entries: list[DeleteMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                for index, message in enumerate(messages[start : start + MAX_BATCH])
                if "ReceiptHandle" in message
            ]
            if not entries:
                continue
            try:
                response = self._client.delete_message_batch(
                    QueueUrl=self._queue_url, Entries=entries
                )
            except Exception as error:
                # Stored already; a redelivery is answered "duplicate".
                logger.warning("SQS delete failed (%s); the messages will be redelivered", error)
                continue
            for failure in response.get("Failed", []):
                logger.warning(
                    "SQS delete failed for entry %s: %s",
                    failure.get("Id"),
                    failure.get("Message", failure.get("Code")),
                )


def build_sqs_consumer(
    settings: Settings,
    *,
    sessions: sessionmaker[Session],
    registry: TypeRegistry,
    projects: ProjectDirectory,
    on_stored: Callable[[], None] | None = None,
    metrics: ServiceMetrics | None = None,
    signals: SignalsConfig | None = None,
    audit: AuditLog | None = None,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
) -> SqsEventConsumer | None:
    """The consumer for `WORKQUEUE_SERVICE_EVENTS_QUEUE_URL`; None when it is unset.

    Credentials and (for non-AWS endpoints) the region come from the usual
    AWS environment (variables, profile, instance or pod role).
    """
    queue_url = settings.events_queue_url
    if not queue_url:
        return None
    try:
        import boto3  # noqa: PLC0415 - optional dependency, only with a queue configured
        from botocore.config import Config  # noqa: PLC0415
    except ImportError as error:
        raise RuntimeError(
            "WORKQUEUE_SERVICE_EVENTS_QUEUE_URL is set but boto3 is not installed "
            "(pip install 'workqueue-service[s3]')"
        ) from error
    region, endpoint = sqs_location(queue_url)
    client = boto3.client(
        "sqs",
        region_name=region,
        endpoint_url=endpoint,
        # The read timeout must outlast the long poll.
        config=Config(read_timeout=wait_seconds + 20, retries={"mode": "standard"}),
    )
    return SqsEventConsumer(
        client=client,
        queue_url=queue_url,
        sessions=sessions,
        registry=registry,
        projects=projects,
        on_stored=on_stored,
        metrics=metrics,
        signals=signals,
        audit=audit,
        wait_seconds=wait_seconds,
        close_client=True,
    )


def sqs_location(queue_url: str) -> tuple[str | None, str | None]:
    """(region, endpoint) for a queue URL; None: boto3's default (from the environment).

    Standard AWS URLs (`https://sqs.<region>.amazonaws.com/<account>/<name>`)
    name their region and need no endpoint. Other hosts (VPC endpoints,
    LocalStack, moto, ElasticMQ) are the endpoint themselves.
    """
    parts = urlsplit(queue_url)
    host = (parts.hostname or "").lower()
    if not parts.scheme or not host:
        raise ValueError(f"WORKQUEUE_SERVICE_EVENTS_QUEUE_URL is not a URL: {queue_url!r}")
    labels = host.split(".")
    region = None
    if "amazonaws" in labels and "sqs" in labels[:-2]:
        region = labels[labels.index("sqs") + 1]
    if region is not None and host in (
        f"sqs.{region}.amazonaws.com",
        f"sqs.{region}.amazonaws.com.cn",
    ):
        return region, None
    if host == "queue.amazonaws.com":  # legacy us-east-1 form
        return "us-east-1", None
    return region, f"{parts.scheme}://{parts.netloc}"
