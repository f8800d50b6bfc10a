"""Registers the `trunk` type: config section, decider, executors, events, push creator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workqueue.queue.registry import TypeRegistry
from workqueue.types.catalog import InstallContext
from workqueue.types.gitlab_connection import connect_gitlab
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.decider import PROCESS, RECORD, decide_trunk
from workqueue.types.trunk.event_handlers import register_trunk_events
from workqueue.types.trunk.executors import TrunkExecutors
from workqueue.types.trunk.hooks import TrunkHooks
from workqueue.types.trunk.ingest import push_creator
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkWorkItem


def install_trunk(
    registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext
) -> None:
    config = TrunkTypeConfig.model_validate(section)
    client = connect_gitlab("trunk", config.gitlab_url, context)
    executors = TrunkExecutors(client, config)
    hooks = TrunkHooks(config)
    registration = registry.register(
        TRUNK_ITEM_TYPE, model=TrunkWorkItem, decider=decide_trunk, config=config
    )
    registration.add_executor(PROCESS, executors.process)
    registration.add_executor(RECORD, executors.record)
    register_trunk_events(registration)
    registration.add_creator("push", push_creator(config))
    registration.set_cancel_hook(hooks.cancel)
    registration.set_retry_hook(hooks.retry)
    registration.set_failure_hook(hooks.failed)
    registration.set_project_path_resolver(
        lambda project: client.project(project).path_with_namespace
    )
