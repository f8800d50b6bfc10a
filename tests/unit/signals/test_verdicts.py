"""What stored checks mean before and after a merge: table tests of the pure verdicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workqueue.signals.config import AfterMergeCheck
from workqueue.signals.signal import CheckState, CheckStatus
from workqueue.signals.verdicts import Ending, before_merge_gate, post_merge_verdict

MERGED = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def state(name, variant, status, *, at=MERGED, url=None):
    return CheckState(name, variant, CheckStatus(status), url, at, at)


def later(seconds):
    return MERGED + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("names", "checks", "expected"),
    [
        ([], [], None),
        (["scan"], [], (False, "check scan has not reported on the MR head yet")),
        (["scan"], [state("scan", "", "running")], (False, "check scan is running")),
        (["scan"], [state("scan", "", "success")], None),
        (["scan"], [state("other", "", "success")], (False, "check scan has not reported")),
        (
            ["scan"],
            [state("scan", "a", "success"), state("scan", "b", "pending")],
            (False, "check scan/b is pending"),
        ),
        (
            ["scan", "lint"],
            [state("scan", "", "success"), state("lint", "", "failed", url="https://x/1")],
            (True, "check lint is failed (https://x/1)"),
        ),
        # A red one anywhere is named before a missing one elsewhere.
        (["scan", "lint"], [state("lint", "", "canceled")], (True, "check lint is canceled")),
    ],
)
def test_before_merge_gate(names, checks, expected):
    gate = before_merge_gate(names, checks)
    if expected is None:
        assert gate is None
    else:
        assert gate is not None
        assert gate.failed is expected[0]
        assert gate.message.startswith(expected[1])


BUILD = AfterMergeCheck(name="build", variants=["api", "worker"], timeout_seconds=600)
ANY = AfterMergeCheck(name="build", settle_seconds=60, timeout_seconds=600)


@pytest.mark.parametrize(
    ("expected", "checks", "now", "ending", "message", "look_again_at"),
    [
        ([], [], later(1), Ending.COMPLETE, "every check", None),
        ([BUILD], [], later(1), Ending.WAIT, "waiting for api, worker", later(600)),
        (
            [BUILD],
            [state("build", "api", "success")],
            later(1),
            Ending.WAIT,
            "waiting for worker",
            later(600),
        ),
        (
            [BUILD],
            [state("build", "api", "success"), state("build", "worker", "success")],
            later(1),
            Ending.COMPLETE,
            "every check",
            None,
        ),
        (
            [BUILD],
            [state("build", "worker", "failed", url="https://k/2")],
            later(1),
            Ending.FAIL,
            "check build/worker is failed (https://k/2)",
            None,
        ),
        # An unexpected component's red result does not count.
        (
            [BUILD],
            [
                state("build", "api", "success"),
                state("build", "worker", "success"),
                state("build", "docs", "failed"),
            ],
            later(1),
            Ending.COMPLETE,
            "every check",
            None,
        ),
        (
            [BUILD],
            [state("build", "api", "running")],
            later(600),
            Ending.FAIL,
            "check build had no green result for api, worker within 600 s",
            None,
        ),
        # variants: []: within the settle window, wait for reports to come in.
        ([ANY], [state("build", "api", "success")], later(10), Ending.WAIT, "reports", later(60)),
        ([ANY], [state("build", "api", "success")], later(61), Ending.COMPLETE, "every", None),
        (
            [ANY],
            [state("build", "api", "success"), state("build", "ui", "running")],
            later(61),
            Ending.WAIT,
            "waiting for ui",
            later(600),
        ),
        ([ANY], [], later(61), Ending.WAIT, "waiting for any variant", later(600)),
        ([ANY], [], later(600), Ending.FAIL, "no green result for any variant", None),
        ([ANY], [state("build", "x", "canceled")], later(10), Ending.FAIL, "build/x is", None),
    ],
)
def test_post_merge_verdict(expected, checks, now, ending, message, look_again_at):
    verdict = post_merge_verdict(expected, checks, waiting_since=MERGED, now=now)
    assert verdict.ending is ending
    assert message in verdict.message
    assert verdict.look_again_at == look_again_at


def test_after_a_retry_red_results_from_before_it_are_waited_on_again():
    retried = later(100)
    checks = [state("build", "api", "failed"), state("build", "worker", "success")]
    verdict = post_merge_verdict(
        [BUILD], checks, waiting_since=retried, now=later(101), retried_at=retried
    )
    assert (verdict.ending, verdict.message) == (Ending.WAIT, "check build: waiting for api")
    rerun = [state("build", "api", "success", at=later(150)), checks[1]]
    verdict = post_merge_verdict(
        [BUILD], rerun, waiting_since=retried, now=later(151), retried_at=retried
    )
    assert verdict.ending is Ending.COMPLETE
    red_again = [state("build", "api", "failed", at=later(150)), checks[1]]
    verdict = post_merge_verdict(
        [BUILD], red_again, waiting_since=retried, now=later(151), retried_at=retried
    )
    assert verdict.ending is Ending.FAIL


def test_after_a_retry_with_any_variant_the_red_one_stays_awaited():
    retried = later(100)
    checks = [state("build", "api", "failed"), state("build", "worker", "success")]
    waiting = post_merge_verdict(
        [ANY], checks, waiting_since=retried, now=later(100 + 61), retried_at=retried
    )
    assert (waiting.ending, waiting.message) == (Ending.WAIT, "check build: waiting for api")
    timed_out = post_merge_verdict(
        [ANY], checks, waiting_since=retried, now=later(100 + 601), retried_at=retried
    )
    assert timed_out.ending is Ending.FAIL
    assert "api" in timed_out.message


def test_the_retry_cut_off_is_when_a_signal_arrived_not_the_reporters_clock():
    retried = later(100)
    # A new run's red result, from a reporter whose clock runs 10 minutes late.
    late_clock = CheckState("build", "api", CheckStatus.FAILED, None, later(100 - 600), later(150))
    verdict = post_merge_verdict(
        [BUILD],
        [late_clock, state("build", "worker", "success")],
        waiting_since=retried,
        now=later(151),
        retried_at=retried,
    )
    assert verdict.ending is Ending.FAIL
