"""A `Retry-After` answered inside a batched step is honoured from the answer, not from the
step's start (found by the chaos suite's GitLab storm: a replica called about an item
0.07 s before the 503's `Retry-After: 2` had run out).

Several items share one step's transaction, and PostgreSQL's `now()` is that
transaction's start: a backoff counted from it ends early by however long the step
had been running when GitLab answered. Here the answer itself is slow (an injected
1 s latency), so the difference is a whole second, not a race.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from harness import fast_config, item_row, running_manager, settled, wait_until
from mr_harness import body, mr_registry, submit

from workqueue.queue.audit.log import AuditLog
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import ClaimOutcome
from workqueue.queue.processing.item_loop import ItemLoop
from workqueue.testing.gitlab_simulator import GitLabSimulator, RequestRecord

RETRY_AFTER = 2
LATENCY = 1.0
BRANCH_ROUTE = "/projects/:id/repository/branches/:branch"


@pytest.fixture
def registry(simulator):
    return mr_registry(simulator)


def _about(record: RequestRecord, branch: str) -> bool:
    return quote(branch, safe="") in record.path or record.query.get("source_branch") == branch


def _batched_step_told_to_wait(sessions, registry, simulator: GitLabSimulator):
    """Two items stepped in one transaction; the first one's first call is a slow 429."""
    branches = ["workqueue/slow-answer", "workqueue/neighbour"]
    ids = [submit(sessions, registry, body(source_branch=name)).item.id for name in branches]
    simulator.inject_fault(
        "GET",
        BRANCH_ROUTE,
        status=429,
        latency=LATENCY,
        headers={"Retry-After": str(RETRY_AFTER)},
    )
    with sessions() as session:
        claims = lease_repository.claim_due_items(
            session, item_types=["mr"], limit=2, lease_seconds=60, only_ids=ids
        )
        session.commit()
    by_id = {claim.item_id: claim for claim in claims}
    # backoff_initial below the Retry-After: only the Retry-After can set the delay.
    loop = ItemLoop(
        sessions=sessions,
        registry=registry,
        config=fast_config(step_batch_seconds=30, backoff_initial_seconds=0.05),
        audit=AuditLog(),
    )
    results = loop.run_batch(
        [by_id[item_id] for item_id in ids],
        should_stop=lambda: False,
        lease_lost=lambda _item_id: False,
    )
    (told,) = [record for record in simulator.log.records() if record.status == 429]
    assert _about(told, branches[0])
    return ids[0], branches[0], told, results


def test_the_next_attempt_is_due_no_sooner_than_retry_after_from_the_answer(
    sessions, registry, simulator
):
    item_id, _branch, told, results = _batched_step_told_to_wait(sessions, registry, simulator)

    assert results[item_id].outcome is ClaimOutcome.FAILED
    row = item_row(sessions, item_id)
    assert row.attempts == 1
    answered = datetime.fromtimestamp(told.at, UTC)
    assert (row.next_attempt_at - answered).total_seconds() >= RETRY_AFTER


def test_no_call_about_the_item_comes_before_retry_after_has_run_out(sessions, registry, simulator):
    item_id, branch, told, _results = _batched_step_told_to_wait(sessions, registry, simulator)

    with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), timeout=30, what="the items to settle")

    later = sorted(
        (record.started_at, record)
        for record in simulator.log.records()
        if _about(record, branch) and record.started_at is not None and record.at > told.at
    )
    assert later, "the item was never tried again"
    started, first = later[0]
    assert started >= told.at + RETRY_AFTER, (
        f"{first.method} {first.path} came {told.at + RETRY_AFTER - started:.3f} s"
        " before the Retry-After had run out"
    )
    assert item_row(sessions, item_id).attempts == 0  # and then it went through


def test_a_lone_items_step_already_counted_from_the_answer(sessions, registry, simulator):
    """The lone-item path records its failure in a fresh transaction: the control case."""
    item_id = submit(sessions, registry, body()).item.id
    simulator.inject_fault(
        "GET", BRANCH_ROUTE, status=429, latency=LATENCY, headers={"Retry-After": "2"}
    )
    with sessions() as session:
        (claim,) = lease_repository.claim_due_items(
            session, item_types=["mr"], limit=1, lease_seconds=60, only_ids=[item_id]
        )
        session.commit()
    loop = ItemLoop(sessions=sessions, registry=registry, config=fast_config(), audit=AuditLog())
    result = loop.run(claim, should_stop=lambda: False, lease_lost=lambda: False)

    assert result.outcome is ClaimOutcome.FAILED
    (told,) = [record for record in simulator.log.records() if record.status == 429]
    row = item_row(sessions, item_id)
    assert (row.next_attempt_at - datetime.fromtimestamp(told.at, UTC)).total_seconds() >= 2
