"""What the stored checks of a commit mean for an item: before and after its merge. Pure.

Before the merge, every `before_merge` name must have reported, and every
variant reported for it must be green. After the merge, each `after_merge`
check waits for its expected variants (or, with `variants: []`, for those that
reported within `settle_seconds`): all green completes the item, a red one
fails it at once, and nothing green by `timeout_seconds` fails it too.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from workqueue.signals.config import AfterMergeCheck
from workqueue.signals.signal import CheckState


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """Why the checks hold a merge: `pending` or `failed`, in one sentence."""

    failed: bool
    message: str


def before_merge_gate(names: Sequence[str], checks: Sequence[CheckState]) -> GateVerdict | None:
    """None: every named check reported and all its variants are green."""
    for name in names:
        reported = [check for check in checks if check.name == name]
        red = [check for check in reported if check.status.red]
        if red:
            return GateVerdict(
                failed=True, message=f"check {_label(red[0])} is {red[0].status}{_at(red[0])}"
            )
    for name in names:
        reported = [check for check in checks if check.name == name]
        if not reported:
            return GateVerdict(
                failed=False, message=f"check {name} has not reported on the MR head yet"
            )
        waiting = [check for check in reported if check.status != "success"]
        if waiting:
            return GateVerdict(
                failed=False, message=f"check {_label(waiting[0])} is {waiting[0].status}"
            )
    return None


class Ending(enum.StrEnum):
    WAIT = "wait"
    COMPLETE = "complete"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class PostMergeVerdict:
    ending: Ending
    message: str
    # WAIT: when to look again by itself (a settle window or the timeout ends).
    look_again_at: datetime | None = None


def post_merge_verdict(
    expected: Sequence[AfterMergeCheck],
    checks: Sequence[CheckState],
    *,
    waiting_since: datetime,
    now: datetime,
    retried_at: datetime | None = None,
) -> PostMergeVerdict:
    """What the merge commit's checks say now, `waiting_since` the merge (or a retry).

    After a retry (`retried_at`), a red result that arrived before it is waited on
    again: the retry asks for a new run; green ones stand. Such a variant stays
    awaited (never dropped, also with `variants: []`) until it reports anew. The
    cut-off is the service's clock (`received_at`), not the reporter's.
    """
    waits: list[tuple[str, datetime]] = []
    for check in expected:
        mine = [state for state in checks if state.name == check.name]
        again = {
            state.variant
            for state in mine
            if retried_at and state.status.red and state.received_at < retried_at
        }
        reported = {state.variant: state for state in mine if state.variant not in again}
        deadline = waiting_since + timedelta(seconds=check.timeout_seconds)
        settled_at = waiting_since + timedelta(seconds=check.settle_seconds)
        counted = (
            [state for variant, state in reported.items() if variant in check.variants]
            if check.variants
            else list(reported.values())
        )
        red = [state for state in counted if state.status.red]
        if red:
            first = red[0]
            return PostMergeVerdict(
                Ending.FAIL, f"check {_label(first)} is {first.status}{_at(first)}"
            )
        if check.variants:
            missing = [variant for variant in check.variants if not _green(reported.get(variant))]
        elif now < settled_at:
            waits.append((f"check {check.name}: waiting for reports", settled_at))
            continue
        elif reported or again:
            # Whichever reported (within the settle window, or since): all must be green,
            # and those red before a retry must report again.
            missing = [variant for variant, state in reported.items() if not _green(state)]
            missing += sorted(again)
        else:
            missing = ["any variant"]
        if not missing:
            continue
        if now >= deadline:
            what = ", ".join(missing)
            return PostMergeVerdict(
                Ending.FAIL,
                f"check {check.name} had no green result for {what} within "
                f"{check.timeout_seconds:g} s of the merge",
            )
        waits.append((f"check {check.name}: waiting for {', '.join(missing)}", deadline))
    if not waits:
        return PostMergeVerdict(Ending.COMPLETE, "every check after the merge is green")
    message, look_again_at = min(waits, key=lambda wait: wait[1])
    return PostMergeVerdict(Ending.WAIT, message, look_again_at=look_again_at)


def _green(state: CheckState | None) -> bool:
    return state is not None and state.status == "success"


def _label(check: CheckState) -> str:
    return f"{check.name}/{check.variant}" if check.variant else check.name


def _at(check: CheckState) -> str:
    return f" ({check.url})" if check.url else ""
