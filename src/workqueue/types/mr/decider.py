"""The `mr` decider: a priority scan of `needs_*` dimensions (DDR-4/45/48). Pure."""

from __future__ import annotations

from workqueue.queue.dimensions import Dimensions
from workqueue.queue.registry import Action
from workqueue.types.mr.models import MRDimension, MRWorkItem

# Highest priority first. A new concern is a new dimension and executor here;
# the scan itself never changes.
PRIORITY: tuple[tuple[MRDimension, str], ...] = ((MRDimension.NEEDS_MR, "ensure_mr"),)


def decide_mr(item: MRWorkItem, dimensions: Dimensions) -> Action | None:
    del item  # everything this decider needs is in the dimensions
    for dimension, action in PRIORITY:
        if dimensions.needs(dimension):
            return Action(action)
    return None
