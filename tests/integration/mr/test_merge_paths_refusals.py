"""Merges GitLab refuses: `merge_refused` with GitLab's reason, retried with a backoff of
30 s doubling up to `merge_retry_max_seconds`, never in a fixed loop; a sha mismatch
re-reads the MR first.

Time is controlled, not waited for: `reconcile_mr` takes its backoff decisions on an
injected clock (`ReconcileMR(clock=...)`), which the test moves forward by each delay
the service chose, then wakes the item as its deferral would. Ten minutes of GitLab
refusing take a second of wall time, and the count of merge calls is exact.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mr_harness import PROJECT
from test_mr_lifecycle_merge import green_pipeline
from test_mr_lifecycle_support import BRANCH, MR_ROUTE, gitlab, lifecycle

from workqueue.queue.models import DimensionStatus, Phase

TEN_MINUTES = timedelta(minutes=10)


class FakeClock:
    def __init__(self) -> None:
        self._now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, delay: timedelta) -> None:
        self._now += delay


def retry_at(world, item_id) -> datetime:
    return datetime.fromisoformat(world.detail(item_id).merge_attempts["retry_at"])


def test_405_on_every_merge_is_a_handful_of_calls_in_ten_minutes_not_twenty(sessions):
    clock = FakeClock()
    options = {"clock": clock, "merge_retry_base": timedelta(seconds=30)}
    with (
        gitlab() as simulator,
        lifecycle(sessions, simulator, reconcile_options=options) as world,
    ):
        simulator.refuse_merges(405)
        item_id, iid = world.open_mr()
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        elapsed, delays = timedelta(0), []
        while True:
            delay = retry_at(world, item_id) - clock()
            if elapsed + delay > TEN_MINUTES:
                break
            delays.append(delay)
            # Webhooks meanwhile make the service look, never merge before its time.
            world.send(item_id, world.mr_hook(iid, "update"))
            world.wait_settled()
            clock.advance(delay)
            elapsed += delay
            world.set_dimension(item_id, "needs_reconcile", DimensionStatus.TRUE)
            world.wait_settled()
        calls = len(world.merge_calls())
        detail, row = world.detail(item_id), world.item(item_id)
    # Calls at 0, 30, 90, 210 and 450 s; the next would be at 930 s. A fixed 30 s loop: 20.
    assert calls == 5
    assert [d.total_seconds() for d in delays] == [30, 60, 120, 240]
    assert detail.merge_blocker["code"] == "merge_refused"
    assert detail.merge_blocker["message"] == "405 Method Not Allowed"
    assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)


def test_the_backoff_stops_at_merge_retry_max_seconds(sessions):
    clock = FakeClock()
    options = {"clock": clock, "merge_retry_base": timedelta(seconds=30)}
    with (
        gitlab() as simulator,
        lifecycle(
            sessions, simulator, reconcile_options=options, merge_retry_max_seconds=100
        ) as world,
    ):
        simulator.refuse_merges(422)
        item_id, iid = world.open_mr()
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        delays = []
        for _ in range(4):
            delay = retry_at(world, item_id) - clock()
            delays.append(delay.total_seconds())
            clock.advance(delay)
            world.set_dimension(item_id, "needs_reconcile", DimensionStatus.TRUE)
            world.wait_settled()
        message = world.detail(item_id).merge_blocker["message"]
    assert delays == [30, 60, 100, 100]
    assert message == "Branch cannot be merged"


def test_a_refusal_that_passes_merges_without_any_event(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        simulator.refuse_merges(406, times=2)
        item_id, iid = world.open_mr()
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        row = world.wait_phase(item_id, Phase.COMPLETED)
        assert len(world.merge_calls()) == 3
    assert (row.attempts, row.error) == (0, None)
    assert world.detail(item_id).merge_blocker is None


def test_a_sha_mismatch_with_the_head_unchanged_is_a_refusal_retried_later(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.refuse_merges(409, times=1)  # GitLab's answer lagged behind its own head
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_phase(item_id, Phase.COMPLETED)
        reads_per_merge = simulator.request_count("GET", MR_ROUTE)
        assert len(world.merge_calls()) == 2
    assert reads_per_merge >= 3  # the read, the re-read after the 409, the retry's read


def test_a_sha_mismatch_because_a_person_pushed_stops_without_retrying(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pipeline = green_pipeline(world, iid)
        # The person's push lands between the service's read and its merge call: the
        # read still shows the tested head, the merge names it and GitLab says 409.
        before_the_push = simulator.merge_request(PROJECT, iid)
        simulator.push(PROJECT, BRANCH, {"mine.txt": "a person's\n"})
        simulator.inject_fault("GET", MR_ROUTE, status=200, body=before_the_push, times=1)
        world.send(item_id, world.pipeline_hook(pipeline))
        world.wait_settled()
        detail = world.detail(item_id)
        assert detail.merge_blocker["code"] == "foreign_commits"
        assert world.dimensions(item_id)[("needs_reconcile", "")].status == "false"
        assert len(world.merge_calls()) == 1
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
