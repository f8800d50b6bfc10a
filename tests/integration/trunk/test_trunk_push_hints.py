"""Push Hooks are hints: the intake reads the branch head from GitLab and ingests that.

Driven through the real intake (`store_delivery`, then `resolve_stored`, as the
receivers and the intake resolver do) on real PostgreSQL and the simulator:

* the body's `after` (foreign, made up) and a project id that names another
  project change nothing: the head read from GitLab is ingested;
* a deleted branch creates nothing, a deletion push reads nothing;
* a batch of hints for one queue costs one branch read;
* while GitLab fails the hint is kept (a `trunk.read_head` delivery), the other
  deliveries of the batch are resolved all the same, and once GitLab answers
  the kept hint ingests the head;
* `PushHeadReads` reads once per transaction and backs off after a failure.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import sqlalchemy as sa
from harness import wait_until
from mr_harness import TOKEN
from trunk_harness import BRANCH, PROJECT, heads, land, push_hook, trunk_registry

from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.client import GitLabClient
from workqueue.queue.intake import deliveries as intake
from workqueue.queue.intake.repository import INTAKE_CHANNEL
from workqueue.types.trunk.branch_heads import Backoff, NoHead, PushHeadReads
from workqueue.types.trunk.config import TrunkQueueConfig
from workqueue.types.trunk.landed_heads import READ_HEAD_EVENT, WEBHOOK_SUBMITTER, ingest_head

BRANCH_ROUTE = "/projects/:id/repository/branches/:branch"
QUEUE = TrunkQueueConfig(project=PROJECT, branch=BRANCH)


def store(sessions, registry, payload: dict[str, Any], event_type: str | None = None) -> str:
    return run_in_transaction(
        sessions,
        lambda session: intake.store_delivery(
            session,
            registry,
            source="webhook",
            delivery_key=str(uuid.uuid4()),
            event_type=event_type or payload["object_kind"],
            body=payload,
        ),
    )


def resolve(sessions, registry) -> intake.ResolvedBatch:
    return run_in_transaction(
        sessions, lambda session: intake.resolve_stored(session, registry, limit=100)
    )


def waiting(sessions) -> list[tuple[str, dict[str, Any]]]:
    with sessions() as session:
        rows = session.execute(
            sa.text("SELECT event_type, body FROM incoming_deliveries ORDER BY id")
        ).all()
    return [(row.event_type, row.body) for row in rows]


def forged(simulator, after: str, **project: Any) -> dict[str, Any]:
    payload = push_hook(simulator, simulator.branch_head(PROJECT, BRANCH))
    payload["after"] = payload["checkout_sha"] = after
    payload["project"].update(project)
    return payload


def branch_reads(simulator) -> int:
    return simulator.request_count("GET", BRANCH_ROUTE)


def test_the_head_read_from_gitlab_is_ingested_not_the_bodys_after(sessions, simulator):
    registry = trunk_registry(simulator.url)
    other = simulator.create_project("other/prod", {"README.md": "# other\n"})
    foreign = simulator.push("other/prod", "main", {"evil.sh": "x\n"})
    real = land(simulator)
    # `after` names a commit of another project, and `project.id` that project too.
    store(sessions, registry, forged(simulator, foreign, id=other))
    assert resolve(sessions, registry).deliveries == 1
    assert list(heads(sessions)) == [real]
    assert heads(sessions)[real].state == "accepted"

    store(sessions, registry, forged(simulator, "f" * 40))  # a sha that exists nowhere
    assert resolve(sessions, registry).item_ids == []  # the head is known: nothing new
    assert list(heads(sessions)) == [real]


def test_a_deleted_branch_creates_nothing(sessions, simulator):
    registry = trunk_registry(simulator.url)
    before = land(simulator)
    moved = push_hook(simulator, before)  # the hook of a push that came before the deletion
    simulator.delete_branch(PROJECT, BRANCH)
    deleted = push_hook(simulator, "0" * 40, before=before)
    reads = branch_reads(simulator)
    store(sessions, registry, moved)
    store(sessions, registry, deleted)
    resolve(sessions, registry)
    assert heads(sessions) == {}
    assert waiting(sessions) == []
    assert branch_reads(simulator) == reads + 1  # the deletion push reads nothing


def test_a_batch_of_hints_for_one_queue_reads_the_branch_once(sessions, simulator):
    registry = trunk_registry(simulator.url)
    shas = [land(simulator) for _ in range(5)]
    for sha in shas:
        store(sessions, registry, push_hook(simulator, sha))
    reads = branch_reads(simulator)
    resolve(sessions, registry)
    assert list(heads(sessions)) == [shas[-1]]  # landed before the batch was read: one head
    assert branch_reads(simulator) == reads + 1


def test_a_gitlab_outage_keeps_the_hint_and_holds_up_nothing_else(sessions, simulator):
    registry = trunk_registry(simulator.url)
    building = land(simulator)
    config = registry.get("trunk").config.config
    head_id = run_in_transaction(
        sessions,
        lambda session: (
            ingest_head(session, config.queues[0], building, submitter=WEBHOOK_SUBMITTER).item.id
        ),
    )
    pipeline = simulator.create_pipeline(PROJECT, sha=building, ref=BRANCH)
    run_in_transaction(
        sessions,
        lambda session: session.execute(
            sa.text(
                "UPDATE trunk_details SET state = 'processing', pipeline_id = :pipeline "
                "WHERE id = :id"
            ),
            {"pipeline": pipeline, "id": head_id},
        ),
    )
    fault = simulator.inject_fault("GET", BRANCH_ROUTE, status=503, times=None)
    real = land(simulator)
    store(sessions, registry, push_hook(simulator, real))
    store(sessions, registry, push_hook(simulator, real))  # GitLab's resend: same hint
    store(sessions, registry, simulator.pipeline_hook(pipeline))

    resolved = resolve(sessions, registry)
    assert resolved.deliveries == 3
    assert resolved.item_ids == [head_id]  # the pipeline hook reached its head
    assert list(heads(sessions)) == [building]  # nothing from the unread hints
    assert waiting(sessions) == [(READ_HEAD_EVENT, {"queue": f"{PROJECT}:{BRANCH}"})]
    assert fault.hits == 1  # one failed read for the batch, not one per hint

    simulator.faults.clear()

    def kept_hint_ingested() -> bool:
        resolve(sessions, registry)  # a round: a new delivery, or the safety sweep
        return real in heads(sessions)

    wait_until(kept_hint_ingested, timeout=10, what="the kept hint, once GitLab answers")
    assert waiting(sessions) == []
    assert heads(sessions)[real].sequence == 2


def test_push_head_reads_share_one_read_per_transaction_and_back_off(sessions, simulator):
    now = [100.0]
    client = GitLabClient(simulator.url, TOKEN, timeout=5)
    reads = PushHeadReads(client, backoff=Backoff(initial=1.0, maximum=8.0), clock=lambda: now[0])
    real = land(simulator)

    def twice(session) -> tuple[object, object]:
        return reads.head(session, QUEUE), reads.head(session, QUEUE)

    before = branch_reads(simulator)
    assert run_in_transaction(sessions, twice) == (real, real)
    assert run_in_transaction(sessions, twice) == (real, real)
    assert branch_reads(simulator) == before + 2  # one per transaction

    simulator.inject_fault("GET", BRANCH_ROUTE, status=502, times=1)
    assert run_in_transaction(sessions, twice) == (NoHead.NOT_NOW, NoHead.NOT_NOW)
    now[0] += 0.5  # inside the backoff: GitLab is left alone
    assert run_in_transaction(sessions, twice) == (NoHead.NOT_NOW, NoHead.NOT_NOW)
    assert branch_reads(simulator) == before + 3
    now[0] += 0.5
    assert run_in_transaction(sessions, twice) == (real, real)

    simulator.delete_branch(PROJECT, BRANCH)
    assert run_in_transaction(sessions, lambda session: reads.head(session, QUEUE)) is (
        NoHead.BRANCH_GONE
    )
    unknown = TrunkQueueConfig(project="nobody/here", branch=BRANCH)
    assert run_in_transaction(sessions, lambda session: reads.head(session, unknown)) is (
        NoHead.REFUSED
    )

    def kept_once(session) -> list[bool]:
        return [reads.keep_once(session, QUEUE), reads.keep_once(session, QUEUE)]

    assert run_in_transaction(sessions, kept_once) == [True, False]
    assert run_in_transaction(sessions, kept_once) == [True, False]  # a new transaction


def test_a_kept_hint_wakes_no_resolver(sessions, conninfo, simulator):
    """Kept for a later round without a NOTIFY (a resolver woken by its own kept hint
    would spin while GitLab is down); a stored delivery notifies as before."""
    registry = trunk_registry(simulator.url)
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute(f"LISTEN {INTAKE_CHANNEL}")
        listener.execute("LISTEN kept_hint_test")
        run_in_transaction(
            sessions,
            lambda session: intake.store_for_later(
                session, source="trunk", event_type=READ_HEAD_EVENT, body={"queue": "x:y"}
            ),
        )
        listener.execute("SELECT pg_notify('kept_hint_test', 'marker')")
        store(sessions, registry, push_hook(simulator, land(simulator)))
        # NOTIFYs arrive in commit order: a kept hint's would come before the marker.
        received = [n.channel for n in listener.notifies(timeout=10, stop_after=2)]
        assert received == ["kept_hint_test", INTAKE_CHANNEL]
    assert [event_type for event_type, _ in waiting(sessions)] == [READ_HEAD_EVENT, "push"]
