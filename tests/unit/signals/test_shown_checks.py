"""`shown_checks`: what an item shows of its checks, awaited ones included."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workqueue.signals.signal import CheckState, CheckStatus, shown_checks

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def state(name: str, variant: str, status: str) -> CheckState:
    return CheckState(
        name=name,
        variant=variant,
        status=CheckStatus(status),
        url=f"https://ci.example/{name}/{variant}",
        reported_at=AT,
        received_at=AT,
    )


def rows(shown):
    return [(row["name"], row["variant"], row["status"], row["url"] is not None) for row in shown]


@pytest.mark.parametrize(
    ("states", "expected", "result"),
    [
        ([], [], []),
        # nothing reported: each expected variant awaited, without a link
        (
            [],
            [("build", ["api", "worker"])],
            [("build", "api", "pending", False), ("build", "worker", "pending", False)],
        ),
        # one reported: it, and the other awaited
        (
            [state("build", "worker", "success")],
            [("build", ["api", "worker"])],
            [("build", "api", "pending", False), ("build", "worker", "success", True)],
        ),
        # no variants expected: '' awaited until any variant reports
        ([], [("scan", [])], [("scan", "", "pending", False)]),
        ([state("scan", "ui", "failed")], [("scan", [])], [("scan", "ui", "failed", True)]),
        # an unexpected variant reported is shown too, sorted by name and variant
        (
            [state("release", "x", "running"), state("build", "z", "success")],
            [("build", ["a"])],
            [
                ("build", "a", "pending", False),
                ("build", "z", "success", True),
                ("release", "x", "running", True),
            ],
        ),
    ],
)
def test_shown_checks(states, expected, result):
    assert rows(shown_checks(states, expected)) == result


def test_an_awaited_check_has_no_time():
    [row] = shown_checks([], [("build", ["api"])])
    assert row == {
        "name": "build",
        "variant": "api",
        "status": "pending",
        "url": None,
        "updated_at": None,
    }
