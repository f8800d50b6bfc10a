"""Registers the `mr` type: config section, decider, executors."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.registry import TypeRegistry
from workqueue.types.catalog import HandledTypeError, InstallContext
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.executors import MRExecutors
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem

logger = logging.getLogger(__name__)


def install_mr(registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext) -> None:
    config = MRTypeConfig.model_validate(section)
    if config.gitlab_url.startswith("http://"):
        logger.warning(
            "handled_types.mr.gitlab_url %s is plain http: the GitLab token crosses the "
            "network unencrypted (acceptable for local development only)",
            config.gitlab_url,
        )
    if not context.gitlab_token:
        raise HandledTypeError(
            "handled_types.mr needs a GitLab token: set WORKQUEUE_SERVICE_GITLAB_TOKEN"
        )
    if context.gitlab_client_factory is not None:
        client = context.gitlab_client_factory(config.gitlab_url, context.gitlab_token)
    else:
        client = GitLabClient(
            config.gitlab_url, context.gitlab_token, on_call=context.gitlab_on_call
        )
    executors = MRExecutors(client)
    registration = registry.register(
        MR_ITEM_TYPE, model=MRWorkItem, decider=decide_mr, config=config
    )
    registration.add_executor("ensure_mr", executors.ensure_mr)
    registration.cancel_hook = executors.close_on_cancel
