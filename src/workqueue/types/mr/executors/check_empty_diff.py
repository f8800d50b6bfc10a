"""`check_empty_diff`: end the item when its bot branch adds nothing to the target (DDR-43).

Runs when `needs_empty_check` is due: periodically
(`empty_check_interval_seconds` through `pending_until`) and at once after a
push to the target branch. It first reads the MR, so an MR merged or closed
meanwhile is reflected instead of being taken for "empty", and any other news it
shows (a head pipeline or merge status no webhook reported) raises `needs_reconcile`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import DimensionStatus, ExecutionContext
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.executors.outcomes import (
    branch_differs,
    finish_empty,
    record_observed,
    reflect_terminal,
)
from workqueue.types.mr.models import MRDimension, MRWorkItem


class CheckEmptyDiff:
    """The `check_empty_diff` executor, bound to one GitLab client."""

    def __init__(self, gitlab: GitLabClient, config: MRTypeConfig) -> None:
        self._gitlab = gitlab
        self._interval = timedelta(seconds=config.empty_check_interval_seconds)
        self._checks = config.checks

    def check_empty_diff(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if item.target_branch is None:
            # ensure_mr has not resolved the target yet (it checks on its own).
            context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._interval)
            return
        if item.mr_iid is not None:
            merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
            if reflect_terminal(self._gitlab, context, item, merge_request, self._checks):
                context.set_dimension(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.FALSE)
                return
            if record_observed(context, item, merge_request):
                # News no webhook brought (a lost Pipeline Hook): once stored here, a
                # drift check would take it for known and nothing would act on it.
                context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
        if branch_differs(self._gitlab, item):
            context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._interval)
            return
        context.audit("empty_diff", mr_iid=item.mr_iid, target_branch=item.target_branch)
        finish_empty(self._gitlab, context, item, [] if item.mr_iid is None else [item.mr_iid])
        context.set_dimension(MRDimension.NEEDS_EMPTY_CHECK, DimensionStatus.FALSE)
