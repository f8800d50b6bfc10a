"""After the merge: the merge commit's checks (`checks.after_merge`) end the item.

Merged with such checks, an item stays `active` with `details.post_merge`
(the merge commit, since when it waits, and each check per variant) and
`needs_post_merge`, from then on its only concern. `await_checks` reads the
checks from the signal store (never from an event), shows them, and ends the
item when `signals.verdicts.post_merge_verdict` says: `completed`
(`completion_reason: merged`) once every expected variant is green, `failed`
on a red one or at the timeout. Otherwise it looks again when a signal about
the commit arrives (the `check_signal` event) or when a settle window or the
timeout ends. None of it calls GitLab.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from workqueue.queue import DimensionStatus, ExecutionContext, Phase
from workqueue.signals.config import AfterMergeCheck, ChecksConfig
from workqueue.signals.repository import checks_on
from workqueue.signals.signal import CheckState, shown_checks
from workqueue.signals.verdicts import Ending, post_merge_verdict
from workqueue.types.mr.models import CompletionReason, MRDimension, MRWorkItem


def start_waiting(context: ExecutionContext, item: MRWorkItem) -> None:
    """(Re)start the wait for the merge commit's checks from now."""
    item.post_merge = {
        "merge_commit_sha": item.merge_commit_sha,
        "waiting_since": context.now.isoformat(),
        "checks": (item.post_merge or {}).get("checks", []),
    }
    context.set_dimension(MRDimension.NEEDS_POST_MERGE, DimensionStatus.TRUE)


class PostMergeOutcome(StrEnum):
    """`details.post_merge.outcome` once the checks ended the item; absent while waiting."""

    GREEN = "green"
    FAILED = "failed"  # a red check, or none green by the timeout


class AwaitChecks:
    """The `await_checks` executor for one type configuration."""

    def __init__(self, checks: ChecksConfig) -> None:
        self._checks = checks

    def await_checks(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        post_merge = dict(item.post_merge or {})
        sha = item.merge_commit_sha
        if sha is None or not post_merge:  # pragma: no cover - written together at the merge
            context.set_dimension(MRDimension.NEEDS_POST_MERGE, DimensionStatus.FALSE)
            return
        names = {check.name for check in self._checks.after_merge}
        states = checks_on(context.session, item.project, sha, names)
        _show(context, item, post_merge, states, self._checks.after_merge)
        verdict = post_merge_verdict(
            self._checks.after_merge,
            states,
            waiting_since=datetime.fromisoformat(post_merge["waiting_since"]),
            now=context.now,
            retried_at=_time(post_merge.get("retried_at")),
        )
        if verdict.ending is Ending.COMPLETE:
            context.set_dimension(MRDimension.NEEDS_POST_MERGE, DimensionStatus.FALSE)
            item.post_merge = {**(item.post_merge or {}), "outcome": PostMergeOutcome.GREEN}
            item.completion_reason = CompletionReason.MERGED
            context.set_phase(Phase.COMPLETED, verdict.message)
        elif verdict.ending is Ending.FAIL:
            context.set_dimension(MRDimension.NEEDS_POST_MERGE, DimensionStatus.FALSE)
            # The `red-checks` attention queue holds the items failed so.
            item.post_merge = {**(item.post_merge or {}), "outcome": PostMergeOutcome.FAILED}
            context.fail(verdict.message)
        else:
            look_again_at = verdict.look_again_at or context.now
            context.defer(MRDimension.NEEDS_POST_MERGE, look_again_at - context.now)


def _time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _show(
    context: ExecutionContext,
    item: MRWorkItem,
    post_merge: dict[str, Any],
    states: list[CheckState],
    expected: list[AfterMergeCheck],
) -> None:
    """`details.post_merge.checks` (expected variants not reported yet as `pending`) and
    the `check_<name>` dimensions of the reported ones (false once green)."""
    shown = shown_checks(states, [(check.name, check.variants) for check in expected])
    if shown != post_merge.get("checks"):
        item.post_merge = {**post_merge, "checks": shown}
    for state in states:
        green = DimensionStatus.FALSE if state.status == "success" else DimensionStatus.TRUE
        context.set_dimension(f"check_{state.name}", green, variant=state.variant)
