"""The `agent` item type as the service assembles it: GitLab notes answered by an agent."""

from __future__ import annotations

from workqueue.types.agent.config import AgentTypeConfig
from workqueue.types.agent.install import install_agent
from workqueue.types.agent.models import AGENT_ITEM_TYPE, AgentWorkItem
from workqueue.types.plugin import ItemTypePlugin

PLUGIN = ItemTypePlugin(
    name=AGENT_ITEM_TYPE,
    config_model=AgentTypeConfig,
    install=install_agent,
    models=(AgentWorkItem,),
)
