"""External checks on an MR item: the merge gate before, the wait for completion after.

Signals are stored as the API stores them (`signals.repository.record_signal`,
then the intake is woken); the real engine, PostgreSQL and the simulator do
the rest.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_merge import green_pipeline
from test_mr_lifecycle_support import gitlab, lifecycle

from workqueue.attention.config import default_queues
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.queue import enqueue
from workqueue.queue.models import Phase, WorkItem
from workqueue.signals.repository import Outcome, record_signal
from workqueue.signals.signal import CheckStatus, Signal

LOGS = "https://konflux.example/pipelineruns/"
BUILD_API_WORKER = {
    "checks": {
        "after_merge": [{"name": "build", "variants": ["api", "worker"], "timeout_seconds": 60}]
    }
}


def report(world, sha, variant, status, *, name="build", at=None, key=None, reporter="konflux"):
    signal = Signal(
        project=PROJECT,
        sha=sha,
        name=name,
        variant=variant,
        status=CheckStatus(status),
        reported_at=at or datetime.now(UTC),
        url=f"{LOGS}{variant}",
    )
    with world.sessions() as session:
        recorded = record_signal(
            session,
            world.registry,
            signal,
            source="api",
            reporter=reporter,
            idempotency_key=key,
        )
        session.commit()
    world.manager.intake.stored_here()
    return recorded


def wait_shown(world, item_id, checks):
    """Until `details.post_merge.checks` shows these (variant, status) pairs."""

    def shown():
        post_merge = world.detail(item_id).post_merge or {}
        return [(c["variant"], c["status"]) for c in post_merge.get("checks", [])]

    wait_until(lambda: shown() == checks, what=f"checks {checks}")


def queues_of(world, item_id) -> set[str]:
    """The default attention queues the item is in, once a reconciler has looked."""
    attention = AttentionReconciler(
        sessions=world.sessions, registry=world.registry, rules=default_queues()
    )
    attention.apply_rules()
    for _ in range(100):
        if not attention.board.pending():
            break
        if not attention.run_due():
            time.sleep(0.02)
    with world.sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT q.name FROM attention_memberships m JOIN attention_queues q "
                "ON q.id = m.queue_id WHERE m.work_item_id = :item AND m.removed_at IS NULL"
            ),
            {"item": item_id},
        )
        return {name for (name,) in rows}


def retry(world, item_id) -> None:
    """What `POST /api/work-items/{id}/retry` does: the type's hook, then reactivation."""
    retry_hook = world.registry.get("mr").retry_hook
    with world.sessions() as session:
        retry_hook(session, session.get(WorkItem, item_id))
        enqueue.mark_actionable(session, item_id, "mr", reactivate=True)
        session.commit()
    world.manager.notify(item_id)


def merge(world):
    """Open the MR, turn its pipeline green and wait until GitLab has merged it."""
    item_id, iid = world.open_mr()
    world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
    wait_until(
        lambda: world.simulator.merge_request(PROJECT, iid)["state"] == "merged", what="merged"
    )
    world.wait_settled()
    return item_id, iid


def test_two_components_green_after_the_merge_complete_the_item(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        detail = world.detail(item_id)
        merge_sha = detail.merge_commit_sha
        assert merge_sha is not None
        assert world.item(item_id).phase == Phase.ACTIVE  # merged, waiting for the builds
        assert detail.post_merge["merge_commit_sha"] == merge_sha
        assert detail.completion_reason is None

        report(world, merge_sha, "api", "running")
        report(world, merge_sha, "api", "success")
        wait_shown(world, item_id, [("api", "success"), ("worker", "pending")])
        world.wait_settled()
        assert world.item(item_id).phase == Phase.ACTIVE  # worker has not reported
        checks = world.detail(item_id).post_merge["checks"]
        assert [(c["variant"], c["status"], c["url"]) for c in checks] == [
            ("api", "success", f"{LOGS}api"),
            ("worker", "pending", None),  # awaited: shown, without a link
        ]

        report(world, merge_sha, "worker", "success")
        row = world.wait_phase(item_id, Phase.COMPLETED)
        assert queues_of(world, item_id) == set()
    assert row.error is None
    detail = world.detail(item_id)
    assert detail.completion_reason == "merged"
    assert detail.post_merge["outcome"] == "green"
    assert [(c["variant"], c["status"]) for c in detail.post_merge["checks"]] == [
        ("api", "success"),
        ("worker", "success"),
    ]
    dimensions = world.dimensions(item_id)
    assert dimensions[("check_build", "api")].status == "false"
    assert dimensions[("check_build", "worker")].status == "false"


def test_a_red_component_fails_the_item_naming_it(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        merge_sha = world.detail(item_id).merge_commit_sha
        requests_before = len(simulator.app.log.records())
        report(world, merge_sha, "api", "success")
        report(world, merge_sha, "worker", "failed")
        row = world.wait_phase(item_id, Phase.FAILED)
        # Waiting and ending on checks never calls GitLab.
        assert len(simulator.app.log.records()) == requests_before
        assert world.detail(item_id).post_merge["outcome"] == "failed"
        assert queues_of(world, item_id) == {"needs-human", "red-checks"}
    assert "build/worker" in row.error
    assert f"{LOGS}worker" in row.error


def test_no_result_by_the_timeout_fails_the_item(sessions):
    quick = {
        "checks": {"after_merge": [{"name": "build", "variants": ["api"], "timeout_seconds": 1}]}
    }
    with gitlab() as simulator, lifecycle(sessions, simulator, **quick) as world:
        item_id, _ = merge(world)
        report(world, world.detail(item_id).merge_commit_sha, "api", "running")
        row = world.wait_phase(item_id, Phase.FAILED, timeout=30)
        assert "red-checks" in queues_of(world, item_id)
    assert "no green result for api" in row.error


def test_an_older_signal_delivered_late_never_regresses_a_newer_one(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        merge_sha = world.detail(item_id).merge_commit_sha
        now = datetime.now(UTC)
        assert report(world, merge_sha, "api", "success", at=now).changed
        # The "running" of a minute earlier arrives after the "success".
        late = report(world, merge_sha, "api", "failed", at=now - timedelta(minutes=1))
        assert (late.outcome, late.changed) == (Outcome.ACCEPTED, False)
        # A resend with the same key is a duplicate and changes nothing either.
        first = report(world, merge_sha, "worker", "success", key="run-7")
        again = report(world, merge_sha, "worker", "failed", key="run-7", at=now + timedelta(1))
        assert (first.outcome, again.outcome) == (Outcome.ACCEPTED, Outcome.DUPLICATE)
        world.wait_phase(item_id, Phase.COMPLETED)


def test_a_signal_before_the_merge_is_seen_after_it(sessions):
    # Fast-forward: the merge puts the MR head itself on the target, so a build of
    # that commit can report before the service has seen the merge at all.
    settings = {"merge_method": "ff"}
    with (
        gitlab(**settings) as simulator,
        lifecycle(sessions, simulator, **BUILD_API_WORKER) as world,
    ):
        item_id, iid = world.open_mr()
        head = world.detail(item_id).mr_sha
        report(world, head, "api", "success")
        report(world, head, "worker", "success")
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_phase(item_id, Phase.COMPLETED)
    assert world.detail(item_id).merge_commit_sha == head


def test_retry_after_a_red_check_waits_again_without_touching_gitlab(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        merge_sha = world.detail(item_id).merge_commit_sha
        report(world, merge_sha, "api", "failed")
        world.wait_phase(item_id, Phase.FAILED)
        writes = [r for r in simulator.app.log.records() if r.method != "GET"]

        retry(world, item_id)
        world.wait_settled()
        # The red result is from before the retry: it waits for a new run.
        assert world.item(item_id).phase == Phase.ACTIVE
        assert "outcome" not in world.detail(item_id).post_merge
        assert "red-checks" not in queues_of(world, item_id)  # pruned: waiting again
        report(world, merge_sha, "worker", "success")
        wait_shown(world, item_id, [("api", "failed"), ("worker", "success")])
        world.wait_settled()
        assert world.item(item_id).phase == Phase.ACTIVE
        report(world, merge_sha, "api", "success")
        world.wait_phase(item_id, Phase.COMPLETED)
        assert [r for r in simulator.app.log.records() if r.method != "GET"] == writes


def test_a_before_merge_check_holds_a_green_mr(sessions):
    gate = {"checks": {"before_merge": ["scan"]}}
    with gitlab() as simulator, lifecycle(sessions, simulator, **gate) as world:
        item_id, iid = world.open_mr()
        head = world.detail(item_id).mr_sha
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        # GitLab would merge it; the check has not reported.
        assert world.merge_calls() == []
        assert world.detail(item_id).merge_blocker["code"] == "checks_pending"
        assert "scan" in world.detail(item_id).merge_blocker["message"]
        # Shown as awaited on the item (`details.checks`), without a link yet.
        assert [(c["name"], c["status"], c["url"]) for c in world.detail(item_id).checks] == [
            ("scan", "pending", None)
        ]

        report(world, head, "", "failed", name="scan")
        wait_until(
            lambda: (world.detail(item_id).merge_blocker or {}).get("code") == "checks_failed",
            what="checks_failed",
        )
        assert world.merge_calls() == []
        assert [(c["status"], c["url"]) for c in world.detail(item_id).checks] == [
            ("failed", f"{LOGS}")
        ]
        # A report on another commit changes nothing for this MR.
        report(world, "f" * 40, "", "success", name="scan")
        world.wait_settled()
        assert world.merge_calls() == []

        report(world, head, "", "success", name="scan")
        world.wait_phase(item_id, Phase.COMPLETED)
        assert len(world.merge_calls()) == 1


def test_retry_with_any_variant_waits_for_the_red_one_again(sessions):
    """With `variants: []`, a variant that was red before the retry is awaited again, never
    dropped: the item does not complete while it has not reported green."""
    any_variant = {
        "checks": {
            "after_merge": [
                {"name": "build", "variants": [], "settle_seconds": 1, "timeout_seconds": 60}
            ]
        }
    }
    with gitlab() as simulator, lifecycle(sessions, simulator, **any_variant) as world:
        item_id, _ = merge(world)
        merge_sha = world.detail(item_id).merge_commit_sha
        report(world, merge_sha, "worker", "success")
        report(world, merge_sha, "api", "failed")
        world.wait_phase(item_id, Phase.FAILED)
        retry(world, item_id)
        time.sleep(2)  # past the new settle window
        world.wait_settled()
        assert world.item(item_id).phase == Phase.ACTIVE
        report(world, merge_sha, "api", "success")
        world.wait_phase(item_id, Phase.COMPLETED)


def test_a_red_result_after_the_retry_counts_whatever_the_reporters_clock(sessions):
    """The retry's cut-off is the service's clock (when a signal arrived), not the
    reporter's: a new red result from a reporter whose clock runs late still fails it."""
    with gitlab() as simulator, lifecycle(sessions, simulator, **BUILD_API_WORKER) as world:
        item_id, _ = merge(world)
        merge_sha = world.detail(item_id).merge_commit_sha
        report(world, merge_sha, "api", "failed", at=datetime.now(UTC) - timedelta(minutes=30))
        world.wait_phase(item_id, Phase.FAILED)
        retry(world, item_id)
        world.wait_settled()
        assert world.item(item_id).phase == Phase.ACTIVE
        # A new run, reported with a clock 10 minutes late (still newer than the first).
        report(world, merge_sha, "api", "failed", at=datetime.now(UTC) - timedelta(minutes=10))
        world.wait_phase(item_id, Phase.FAILED)
