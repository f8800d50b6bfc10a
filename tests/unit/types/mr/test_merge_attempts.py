"""The merge backoff and the merge-train re-add rule (`merge_attempts`), as tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workqueue.types.mr.executors.merge_attempts import MergeAttempts, refusal_delay

BASE, CAP = timedelta(seconds=30), timedelta(seconds=1800)
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("refusals", "seconds"),
    [(0, 0), (1, 30), (2, 60), (3, 120), (4, 240), (5, 480), (6, 960), (7, 1800), (99, 1800)],
)
def test_the_wait_doubles_from_30_s_up_to_the_cap(refusals, seconds):
    assert refusal_delay(refusals, BASE, CAP) == timedelta(seconds=seconds)


def test_ten_minutes_of_refusals_are_five_calls_not_twenty():
    attempts, clock, calls = MergeAttempts(head="a" * 40), NOW, []
    while clock - NOW <= timedelta(minutes=10):
        if attempts.wait_left(clock) is None:
            calls.append(clock)
            attempts.refused("405 Method Not Allowed", clock, BASE, CAP)
        clock += timedelta(seconds=1)  # someone looks every second: only the backoff decides
    assert [(c - NOW).total_seconds() for c in calls] == [0, 30, 90, 210, 450]


def test_attempts_belong_to_one_head_and_survive_storage():
    attempts = MergeAttempts(head="a" * 40)
    attempts.refused("Branch cannot be merged", NOW, BASE, CAP)
    attempts.dropped(12, "failed")
    attempts.merged_result = (13, "c" * 40)
    stored = attempts.stored()
    assert MergeAttempts.load(stored, "a" * 40) == attempts
    assert MergeAttempts.load(stored, "b" * 40) == MergeAttempts(head="b" * 40)
    assert MergeAttempts.load(None, "a" * 40) == MergeAttempts(head="a" * 40)
    assert stored["retry_at"] == (NOW + BASE).isoformat()


@pytest.mark.parametrize(
    ("drops", "dropped_with", "pipeline", "may"),
    [
        (0, None, (11, "running"), True),  # first add: reconcile_mr checked the pipeline
        (1, (11, "failed"), (11, "failed"), False),  # still the failed train pipeline
        (1, (11, "failed"), (12, "success"), True),  # a new green pipeline
        (1, (11, "failed"), (11, "success"), True),  # the failed one retried to green
        (1, (11, "success"), (11, "success"), False),  # dropped while green: needs a new one
        (1, (11, "success"), (12, "running"), False),
        (2, (12, "failed"), (13, "success"), False),  # dropped twice: never again
    ],
)
def test_a_dropped_car_is_added_again_once_after_a_new_green_pipeline(
    drops, dropped_with, pipeline, may
):
    attempts = MergeAttempts(head="a" * 40, train_drops=drops, dropped_pipeline=dropped_with)
    assert attempts.may_add_to_train(*pipeline) is may
