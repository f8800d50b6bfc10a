"""Registers the `mr` type: config section, decider, one executor per action (each in its
own module), cancel/retry hooks, event handlers, resolvers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import ProjectSubmissionCheck, TypeRegistry
from workqueue.types.gitlab_connection import connect_gitlab
from workqueue.types.mr import repository
from workqueue.types.mr.config import CI_CONFIG_PATH_ENTRY, MRTypeConfig
from workqueue.types.mr.decider import (
    AWAIT_CHECKS,
    CHECK_DRIFT,
    CHECK_EMPTY_DIFF,
    ENSURE_MR,
    RECONCILE_MR,
    RETRY_CI,
    decide_mr,
)
from workqueue.types.mr.events import register_mr_event_handlers
from workqueue.types.mr.executors.check_empty_diff import CheckEmptyDiff
from workqueue.types.mr.executors.ci_retry import CIRetryExecutor
from workqueue.types.mr.executors.drift_check import DriftCheck, DriftCounts, push_back_on_events
from workqueue.types.mr.executors.ensure_mr import EnsureMR
from workqueue.types.mr.executors.post_merge import AwaitChecks
from workqueue.types.mr.executors.reconcile_mr import ReconcileMR
from workqueue.types.mr.lifecycle_hooks import MRCancelRetryHooks
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem
from workqueue.types.mr.resolvers import register_mr_resolvers
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.content_rules import ci_config_violations
from workqueue.types.plugin import InstallContext


def install_mr(registry: TypeRegistry, section: Mapping[str, Any], context: InstallContext) -> None:
    config = MRTypeConfig.model_validate(section)
    client = connect_gitlab("mr", config.gitlab_url, context)
    hooks = MRCancelRetryHooks(client)
    ci_retry = CIRetryExecutor(client, config.ci_retry)
    registration = registry.register(
        MR_ITEM_TYPE, model=MRWorkItem, decider=decide_mr, config=config
    )
    registration.add_executor(ENSURE_MR, EnsureMR(client, config).ensure_mr)
    registration.add_executor(RECONCILE_MR, ReconcileMR(client, config=config).reconcile_mr)
    registration.add_executor(RETRY_CI, ci_retry.retry_ci)
    registration.add_executor(CHECK_EMPTY_DIFF, CheckEmptyDiff(client, config).check_empty_diff)
    registration.add_executor(AWAIT_CHECKS, AwaitChecks(config.checks).await_checks)
    drift = DriftCounts()
    registration.add_executor(CHECK_DRIFT, DriftCheck(client, config, drift).check_drift)
    register_mr_event_handlers(registration)
    push_back_on_events(registration, config)
    register_mr_resolvers(registration)
    registration.set_cancel_hook(hooks.on_cancel)
    breaker = ci_retry.breaker
    registration.add_gauge("ci_retry_breaker_open", lambda: float(breaker.is_open()))
    registration.add_gauge(
        "ci_retry_breaker_retries_in_window", lambda: float(breaker.state().retries_in_window)
    )
    registration.add_gauge("ci_retry_breaker_refused", lambda: float(breaker.state().refused_total))
    registration.add_counter("drift_checks", "MR re-reads for lack of GitLab news", drift.checks)
    registration.add_counter(
        "drift_corrections",
        "GitLab state no webhook reported, found by drift checks",
        drift.corrections,
        labels=("kind",),
    )
    registration.set_retry_hook(hooks.reopen_on_retry)
    registration.set_content_dropper(repository.drop_contents)
    registration.set_project_path_resolver(
        lambda project: client.project(project).path_with_namespace
    )
    if CI_CONFIG_PATH_ENTRY in config.path_blocklist:
        registration.set_project_submission_check(_ci_config_check(client))


def _ci_config_check(client: GitLabClient) -> ProjectSubmissionCheck:
    """Refuses writes to the project's CI configuration file, which GitLab names in the
    project's `ci_config_path`: the same cached project read as the path resolver's, so
    it costs no GitLab call of its own."""

    def check(project: str, body: Any) -> list[dict[str, Any]]:
        if not isinstance(body, MRWorkItemCreate):
            raise TypeError(f"expected an mr submission, got {type(body).__name__}")
        info = client.project(project)
        violations = ci_config_violations(
            body.file_actions, info.ci_config_path, info.path_with_namespace
        )
        return [violation.as_error() for violation in violations]

    return check
