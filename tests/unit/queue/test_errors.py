"""Which `retry_after` an exception may carry for the engine to honour."""

from __future__ import annotations

import pytest

from workqueue.gitlab.errors import RetryableGitLabError
from workqueue.queue.errors import retry_after_seconds


def carrying(value: object) -> Exception:
    error = RuntimeError("trouble")
    error.retry_after = value  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "seconds"),
    [
        (RuntimeError("no hint"), 0.0),
        (carrying(7), 7.0),
        (carrying(2.5), 2.5),
        (carrying(None), 0.0),
        (carrying(0), 0.0),
        (carrying(-3), 0.0),
        (carrying(value=True), 0.0),
        (carrying("5"), 0.0),
        (carrying(float("nan")), 0.0),
        (carrying(10**9), 0.0),  # nonsense from a server is not a reason to stall a day
    ],
)
def test_only_a_sane_number_of_seconds_counts(error, seconds):
    assert retry_after_seconds(error) == seconds


def test_the_gitlab_adapters_retryable_errors_carry_it():
    error = RetryableGitLabError("GitLab merge: 429 Retry later", status=429, retry_after=4.0)
    assert retry_after_seconds(error) == 4.0
