"""Registers the `mr` type: config section, decider, executors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.registry import TypeRegistry
from workqueue.types.catalog import HandledTypeError, InstallContext
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.executors import MRExecutors
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem


def install_mr(
    registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext
) -> None:
    config = MRTypeConfig.model_validate(section)
    if not context.gitlab_token:
        raise HandledTypeError(
            "handled_types.mr needs a GitLab token: set WORKQUEUE_SERVICE_GITLAB_TOKEN"
        )
    factory = context.gitlab_client_factory or _real_client
    executors = MRExecutors(factory(config.gitlab_url, context.gitlab_token))
    registration = registry.register(
        MR_ITEM_TYPE, model=MRWorkItem, decider=decide_mr, config=config
    )
    registration.add_executor("ensure_mr", executors.ensure_mr)


def _real_client(url: str, token: str) -> GitLabClient:
    return GitLabClient(url, token)
