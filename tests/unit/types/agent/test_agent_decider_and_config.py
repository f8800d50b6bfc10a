"""The agent decider (table) and the config's refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from workqueue.queue.dimensions import Dimensions, DimensionState
from workqueue.queue.models import DimensionStatus
from workqueue.types.agent.config import AgentTypeConfig
from workqueue.types.agent.decider import decide_agent
from workqueue.types.agent.models import AgentState

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
T, F = DimensionStatus.TRUE, DimensionStatus.FALSE


class Task:
    def __init__(self, state: AgentState) -> None:
        self.state = state


def dims(**rows: tuple[DimensionStatus, float | None]) -> Dimensions:
    return Dimensions(
        [
            DimensionState(name, "", status, NOW + timedelta(seconds=delay) if delay else None)
            for name, (status, delay) in rows.items()
        ],
        NOW,
    )


@pytest.mark.parametrize(
    ("state", "rows", "action"),
    [
        (AgentState.QUEUED, {}, "post_placeholder"),
        (AgentState.CALLING, {"needs_placeholder": (F, None)}, "call_agent"),
        # the agent call deferred: nothing after it runs meanwhile
        (AgentState.CALLING, {"needs_placeholder": (F, None), "needs_agent": (T, 30)}, None),
        (
            AgentState.CALLING,
            {"needs_placeholder": (F, None), "needs_agent": (F, None), "needs_changes": (T, None)},
            "apply_changes",
        ),
        (
            AgentState.CALLING,
            {
                "needs_placeholder": (F, None),
                "needs_agent": (F, None),
                "needs_changes": (F, None),
            },
            "post_reply",
        ),
        (AgentState.FAILED, {"needs_reply": (T, None)}, "post_reply"),
        (AgentState.FAILED, {"needs_reply": (F, None)}, None),
        (AgentState.RATE_LIMITED, {}, "post_reply"),
        (AgentState.REPLIED, {}, None),
    ],
)
def test_decide_agent(state, rows, action):
    decided = decide_agent(Task(state), dims(**rows))
    assert (decided.name if decided else None) == action


BASE = {"projects": ["group/**"], "agent_url": "http://agent:8000/v1/tasks", "agent_token_env": "T"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"projects": []}, "projects"),
        ({"projects": ["{sub}/*"]}, "projects"),
        ({"trigger": "/merge"}, "trigger"),
        ({"trigger": "@bot please"}, "trigger"),
        ({"min_access_level": 35}, "min_access_level"),
        ({"agent_url": "ftp://agent/x"}, "agent_url"),
        ({"agent_url": "http://user:pw@agent/x"}, "agent_url"),
        ({"agent_token_env": "lower"}, "agent_token_env"),
        ({"dashboard_url": "javascript:x"}, "dashboard_url"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_config_mistakes_are_refused_naming_the_key(overrides, field):
    with pytest.raises(ValidationError) as raised:
        AgentTypeConfig.model_validate({**BASE, **overrides})
    assert field in str(raised.value)


def test_defaults():
    config = AgentTypeConfig.model_validate(BASE)
    assert (config.trigger, config.min_access_level, config.max_attempts) == (
        "@workqueue-bot",
        30,
        3,
    )
    assert config.rate_limit.per_user_per_hour == 20
