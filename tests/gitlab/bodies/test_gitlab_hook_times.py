"""Hook timestamps: GitLab mixes ISO `Z`, `... UTC` and offsets; all become aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workqueue.gitlab.webhook_bodies import parse_gitlab_time

TEN = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-01T10:00:00Z", TEN),  # merge request hooks
        ("2025-03-01 10:00:00 UTC", TEN),  # note, pipeline and job hooks
        ("2025-03-01T12:00:00+02:00", TEN),  # commit timestamps
        ("2025-03-01 12:00:00 +0200", TEN),  # system hooks
        ("2025-03-01T05:00:00-05:00", TEN),
        ("2025-03-01T10:00:00", TEN),  # no zone: UTC
        ("2025-03-01 10:00", TEN),
        ("2025-03-01T10:00:00.250Z", TEN.replace(microsecond=250000)),
        ("  2025-03-01T10:00:00z ", TEN),
    ],
)
def test_gitlab_time_formats(text, expected):
    parsed = parse_gitlab_time(text)
    assert parsed == expected
    assert parsed is not None
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "value", [None, "", "yesterday", "2025-13-01T10:00:00Z", "2025-03-01", 1740823200, ["x"]]
)
def test_unreadable_times_are_none(value):
    assert parse_gitlab_time(value) is None
