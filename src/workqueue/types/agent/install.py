"""Registers the `agent` type: config section, decider, executors, the note creator."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from workqueue.queue import TypeRegistry
from workqueue.types.agent.agent_call import AgentClient
from workqueue.types.agent.config import AgentTypeConfig
from workqueue.types.agent.creation import AccessLevels, note_creator
from workqueue.types.agent.decider import decide_agent
from workqueue.types.agent.executors import (
    APPLY_CHANGES,
    CALL_AGENT,
    POST_PLACEHOLDER,
    POST_REPLY,
    AgentExecutors,
)
from workqueue.types.agent.models import AGENT_ITEM_TYPE, AgentWorkItem
from workqueue.types.gitlab_connection import connect_gitlab
from workqueue.types.plugin import HandledTypeError, InstallContext

NOTE_EVENT = "note"  # Note Hooks and Confidential Note Hooks alike (`object_kind`)


def install_agent(
    registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext
) -> None:
    config = AgentTypeConfig.model_validate(section)
    token = os.environ.get(config.agent_token_env, "").strip()
    if not token:
        raise HandledTypeError(
            f"handled_types.agent.agent_token_env: {config.agent_token_env} is not set"
        )
    gitlab = connect_gitlab(AGENT_ITEM_TYPE, config.gitlab_url, context)
    agent = AgentClient(config.agent_url, token, config.timeout_seconds)
    executors = AgentExecutors(gitlab, config, agent, registry)
    registration = registry.register(
        AGENT_ITEM_TYPE, model=AgentWorkItem, decider=decide_agent, config=config
    )
    registration.add_executor(POST_PLACEHOLDER, executors.post_placeholder)
    registration.add_executor(CALL_AGENT, executors.call_agent)
    registration.add_executor(APPLY_CHANGES, executors.apply_changes)
    registration.add_executor(POST_REPLY, executors.post_reply)
    registration.add_creator(NOTE_EVENT, note_creator(config, gitlab, AccessLevels(gitlab)))
    registration.set_failure_hook(executors.failed)
    registration.set_retry_hook(executors.retry)
    registration.set_project_path_resolver(
        lambda project: gitlab.project(project).path_with_namespace
    )
