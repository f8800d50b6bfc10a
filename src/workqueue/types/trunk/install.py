"""Registers the `trunk` type: config section, decider, executors, events, push creators."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workqueue.queue import TypeRegistry
from workqueue.types.gitlab_connection import connect_gitlab
from workqueue.types.plugin import InstallContext
from workqueue.types.trunk.branch_heads import PushHeadReads, read_head
from workqueue.types.trunk.config import TrunkQueueConfig, TrunkTypeConfig
from workqueue.types.trunk.decider import PROCESS, RECORD, decide_trunk
from workqueue.types.trunk.events import register_trunk_events
from workqueue.types.trunk.executors.process_and_record import TrunkExecutors
from workqueue.types.trunk.landed_heads import READ_HEAD_EVENT, kept_hint_creator, push_creator
from workqueue.types.trunk.lifecycle_hooks import TrunkHooks
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkWorkItem


@dataclass(frozen=True, slots=True)
class InstalledTrunk:
    """What the type's routes get as `registration.config`: the validated section, and
    the queue's branch head as GitLab reports it now (None: no such branch; GitLab
    errors propagate)."""

    config: TrunkTypeConfig
    read_head: Callable[[TrunkQueueConfig], str | None]

    @property
    def gitlab_url(self) -> str:
        """The instance the type talks to: generic code reads it from every type's
        registered config (e.g. to check a webhook's project with that instance)."""
        return self.config.gitlab_url


def install_trunk(
    registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext
) -> None:
    config = TrunkTypeConfig.model_validate(section)
    client = connect_gitlab("trunk", config.gitlab_url, context)
    executors = TrunkExecutors(client, config)
    hooks = TrunkHooks(config)
    installed = InstalledTrunk(config, lambda queue: read_head(client, queue))
    registration = registry.register(
        TRUNK_ITEM_TYPE, model=TrunkWorkItem, decider=decide_trunk, config=installed
    )
    registration.add_executor(PROCESS, executors.process)
    registration.add_executor(RECORD, executors.record)
    register_trunk_events(registration)
    reads = PushHeadReads(client)
    registration.add_creator("push", push_creator(config, reads))
    registration.add_creator(READ_HEAD_EVENT, kept_hint_creator(config, reads))
    registration.set_cancel_hook(hooks.cancel)
    registration.set_retry_hook(hooks.retry)
    registration.set_failure_hook(hooks.failed)
    registration.set_project_path_resolver(
        lambda project: client.project(project).path_with_namespace
    )
