"""The `mr` decider: a priority scan of `needs_*` dimensions (DDR-4/45/48). Pure."""

from __future__ import annotations

from workqueue.queue import Action, Dimensions
from workqueue.types.mr.models import MRDimension, MRWorkItem

ENSURE_MR = "ensure_mr"
RECONCILE_MR = "reconcile_mr"
RETRY_CI = "retry_ci"
CHECK_EMPTY_DIFF = "check_empty_diff"
CHECK_DRIFT = "check_drift"
AWAIT_CHECKS = "await_checks"

# Highest priority first. A new concern is a new dimension and executor here;
# the scan itself never changes. Absent rows read as "needed" (DDR-48), so a
# new item first gets its MR, then one reconcile and one empty-diff check,
# unless ensure_mr schedules them otherwise.
SINGLE_DIMENSIONS: tuple[tuple[MRDimension, str], ...] = (
    (MRDimension.NEEDS_MR, ENSURE_MR),
    (MRDimension.NEEDS_RECONCILE, RECONCILE_MR),
)
# Per-variant dimensions only exist as rows: one variant per failed CI job name.
VARIANT_DIMENSIONS: tuple[tuple[MRDimension, str], ...] = ((MRDimension.NEEDS_CI_RETRY, RETRY_CI),)
LAST_DIMENSIONS: tuple[tuple[MRDimension, str], ...] = (
    (MRDimension.NEEDS_EMPTY_CHECK, CHECK_EMPTY_DIFF),
    (MRDimension.NEEDS_DRIFT_CHECK, CHECK_DRIFT),
)


def decide_mr(item: MRWorkItem, dimensions: Dimensions) -> Action | None:
    del item  # everything this decider needs is in the dimensions
    # Merged, waiting for the checks after the merge: nothing else is left to do.
    if (MRDimension.NEEDS_POST_MERGE, "") in dimensions:
        return Action(AWAIT_CHECKS) if dimensions.needs(MRDimension.NEEDS_POST_MERGE) else None
    for dimension, action in SINGLE_DIMENSIONS:
        if dimensions.needs(dimension):
            return Action(action)
    for dimension, action in VARIANT_DIMENSIONS:
        variants = dimensions.variants_needing(dimension)
        if variants:
            return Action(action, variants[0])
    for dimension, action in LAST_DIMENSIONS:
        if dimensions.needs(dimension):
            return Action(action)
    return None
