"""The `agent` decider: placeholder, then the agent, then its changes, then the reply. Pure."""

from __future__ import annotations

from workqueue.queue import Action, Dimensions, DimensionStatus
from workqueue.types.agent.executors import APPLY_CHANGES, CALL_AGENT, POST_PLACEHOLDER, POST_REPLY
from workqueue.types.agent.models import AgentDimension, AgentState, AgentWorkItem

_ORDER = (
    (AgentDimension.NEEDS_PLACEHOLDER, POST_PLACEHOLDER),
    (AgentDimension.NEEDS_AGENT, CALL_AGENT),
    (AgentDimension.NEEDS_CHANGES, APPLY_CHANGES),
    (AgentDimension.NEEDS_REPLY, POST_REPLY),
)


def decide_agent(item: AgentWorkItem, dimensions: Dimensions) -> Action | None:
    """The first needed step, in order; a missing dimension row counts as needed. Past
    the agent call, a task that failed or was refused only replies."""
    if item.state in (AgentState.FAILED, AgentState.RATE_LIMITED):
        return Action(POST_REPLY) if dimensions.needs(AgentDimension.NEEDS_REPLY) else None
    if item.state is AgentState.REPLIED:
        return None
    for dimension, action in _ORDER:
        if dimensions.needs(dimension):
            return Action(action)
        if _not_done(dimensions, dimension):
            return None  # deferred (the agent is tried again later): nothing after it yet
    return None


def _not_done(dimensions: Dimensions, dimension: str) -> bool:
    row = dimensions.get((dimension, ""))
    return row is not None and row.status != DimensionStatus.FALSE
