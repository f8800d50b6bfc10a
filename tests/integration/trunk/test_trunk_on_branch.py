"""Before a validation pipeline is triggered, the head must still be on its branch: the
head itself or an ancestor of it. Otherwise it is superseded, unbuilt, and its slot
comes back; a GitLab error during that check only defers the build."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from mr_harness import TOKEN
from trunk_harness import (
    BRANCH,
    PROJECT,
    building,
    head,
    in_flight,
    land,
    state_is,
    trunk_registry,
)

from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.client import GitLabClient
from workqueue.queue import enqueue
from workqueue.queue.audit.history import AuditHistory
from workqueue.queue.audit.log import AuditLog
from workqueue.types.trunk import repository as trunk_repository
from workqueue.types.trunk.landed_heads import WEBHOOK_SUBMITTER, ingest_head
from workqueue.types.trunk.models import BuildStrategy, TrunkWorkItem

BRANCH_ROUTE = "/projects/:id/repository/branches/:branch"


def ingest(sessions, registry, sha: str):
    config = registry.get("trunk").config.config
    return run_in_transaction(
        sessions,
        lambda session: ingest_head(session, config.queues[0], sha, submitter=WEBHOOK_SUBMITTER),
    ).item.id


@contextmanager
def manager(sessions, registry, conninfo):
    """A processing manager whose audit entries are kept in the database (history)."""
    audit = AuditLog(history=AuditHistory(sessions, retention=timedelta(days=1)))
    try:
        with running_manager(
            sessions,
            registry,
            fast_config(),
            handled_types=["trunk"],
            conninfo=conninfo,
            audit=audit,
        ) as running:
            yield running
    finally:
        audit.close()


def audit_reasons(sessions, item_id, event_type: str) -> list[str]:
    with sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT reason FROM audit_entries WHERE work_item_id = :id "
                "AND event_type = :event_type ORDER BY id"
            ),
            {"id": item_id, "event_type": event_type},
        ).all()
    return [row.reason for row in rows]


def test_an_ancestor_of_the_branch_head_is_still_built(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url)
    a = land(simulator)
    ingest(sessions, registry, a)
    newer = land(simulator)  # landed after A, its hook not (yet) resolved
    with manager(sessions, registry, conninfo):
        wait_until(lambda: building(sessions, a), what="A building")
    variables = simulator.pipeline_variables(head(sessions, a).pipeline_id)
    assert variables["WORKQUEUE_TRUNK_SHA"] == a
    assert simulator.branch_head(PROJECT, BRANCH) == newer


def test_a_branch_deleted_before_the_build_supersedes_the_head(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url)
    a = land(simulator)
    item_id = ingest(sessions, registry, a)
    simulator.delete_branch(PROJECT, BRANCH)
    with manager(sessions, registry, conninfo):
        wait_until(lambda: state_is(sessions, a, "superseded"), what="A superseded")
        wait_until(lambda: settled(sessions), what="settled")
    found = head(sessions, a)
    assert (found.phase, found.completion_reason, found.pipeline_id) == (
        "completed",
        "superseded",
        None,
    )
    assert in_flight(sessions) == 0
    assert simulator.pipeline_ids(PROJECT, source="api") == []
    (reason,) = audit_reasons(sessions, item_id, "trunk_left_branch")
    assert reason == f"{a} is no longer on {BRANCH}: the branch does not exist"


def test_a_gitlab_error_while_checking_the_branch_defers_the_build(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url)
    a = land(simulator)
    item_id = ingest(sessions, registry, a)
    fault = simulator.inject_fault("GET", BRANCH_ROUTE, status=503, times=1)
    with manager(sessions, registry, conninfo):
        wait_until(lambda: fault.hits == 1, what="the failed branch read")
        wait_until(
            lambda: audit_reasons(sessions, item_id, "trunk_build_deferred") != [],
            what="the build deferred",
        )
        assert state_is(sessions, a, "processing")
        assert in_flight(sessions) == 1
        _wake_process(sessions, item_id)  # stand in for the deferral's end
        wait_until(lambda: building(sessions, a), what="A built once GitLab answers")
    assert len(simulator.pipeline_ids(PROJECT, source="api")) == 1


def test_a_pipeline_for_the_head_that_validates_another_sha_is_not_adopted(
    sessions, conninfo, simulator
):
    """Someone who may run pipelines on the branch triggers one carrying the head's
    request id but another sha, between the admission and the build: the build does
    not take it for its own (its green would make the head green), it triggers one."""
    registry = trunk_registry(simulator.url)
    a = land(simulator)
    item_id = ingest(sessions, registry, a)

    def admit(session) -> None:
        item = session.get(TrunkWorkItem, item_id)
        row = trunk_repository.read_queue(session, item.queue)
        assert trunk_repository.take_slot(session, item.queue, version=row.version, rewrite=False)
        trunk_repository.record_admission(
            session, item, strategy=BuildStrategy.FULL, base_sha=None, now=datetime.now(UTC)
        )

    run_in_transaction(sessions, admit)
    elsewhere = simulator.push(PROJECT, "workqueue/evil", {"evil.sh": "x\n"})
    with GitLabClient(simulator.url, TOKEN, timeout=5) as client:
        forged = client.trigger_pipeline(
            PROJECT,
            ref=BRANCH,
            variables={
                "WORKQUEUE_TRUNK_REQUEST": str(item_id),
                "WORKQUEUE_TRUNK_SHA": elsewhere,
                "WORKQUEUE_BUILD_STRATEGY": "full",
                "WORKQUEUE_BASE_SHA": "",
            },
        )
    with manager(sessions, registry, conninfo):
        wait_until(lambda: building(sessions, a), what="A built")
    own = head(sessions, a).pipeline_id
    assert own != forged.id
    assert simulator.pipeline_variables(own)["WORKQUEUE_TRUNK_SHA"] == a


def _wake_process(sessions, item_id) -> None:
    def work(session) -> None:
        session.execute(
            sa.text(
                "UPDATE work_item_statuses SET pending_until = NULL, status = 'true' "
                "WHERE work_item_id = :id AND dimension = 'needs_process'"
            ),
            {"id": item_id},
        )
        enqueue.mark_actionable(session, item_id, "trunk")

    run_in_transaction(sessions, work)
