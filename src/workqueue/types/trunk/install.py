"""Registers the `trunk` type: config section, decider, executors, events, push creator."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.registry import TypeRegistry
from workqueue.types.catalog import HandledTypeError, InstallContext
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.decider import PROCESS, RECORD, decide_trunk
from workqueue.types.trunk.events import register_trunk_events
from workqueue.types.trunk.executors import TrunkExecutors
from workqueue.types.trunk.hooks import TrunkHooks
from workqueue.types.trunk.ingest import push_creator
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkWorkItem

logger = logging.getLogger(__name__)


def install_trunk(
    registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext
) -> None:
    config = TrunkTypeConfig.model_validate(section)
    if config.gitlab_url.startswith("http://"):
        logger.warning(
            "handled_types.trunk.gitlab_url %s is plain http: the GitLab token crosses the "
            "network unencrypted (acceptable for local development only)",
            config.gitlab_url,
        )
    if not context.gitlab_token:
        raise HandledTypeError(
            "handled_types.trunk needs a GitLab token: set WORKQUEUE_SERVICE_GITLAB_TOKEN"
        )
    if context.gitlab_client_factory is not None:
        client = context.gitlab_client_factory(config.gitlab_url, context.gitlab_token)
    else:
        client = GitLabClient(
            config.gitlab_url, context.gitlab_token, on_call=context.gitlab_on_call
        )
    executors = TrunkExecutors(client, config)
    hooks = TrunkHooks(config)
    registration = registry.register(
        TRUNK_ITEM_TYPE, model=TrunkWorkItem, decider=decide_trunk, config=config
    )
    registration.add_executor(PROCESS, executors.process)
    registration.add_executor(RECORD, executors.record)
    register_trunk_events(registration)
    registration.add_creator("push", push_creator(config))
    registration.cancel_hook = hooks.cancel
    registration.retry_hook = hooks.retry
    registration.failure_hook = hooks.failed
    registration.resolve_project_path = lambda project: client.project(project).path_with_namespace
