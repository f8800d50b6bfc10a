"""Shared helpers of the `test_mr_lifecycle_*` tests (no tests here).

An MR item goes through the real engine (ProcessingManager, PostgreSQL) against
the GitLab simulator; GitLab's webhooks are stored as pending events the way the
receiver stores them (`insert_pending_event` + commit + notify), with payloads
built by the simulator from its current state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, settled, wait_until
from mr_harness import FILES, PROJECT, TOKEN, body, mr_registry, submit
from sqlalchemy.orm import Session, sessionmaker

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import enqueue
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.registry import TypeRegistry
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.testing.gitlab_simulator.versions import DEFAULT_GITLAB_VERSION
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.decider import CHECK_EMPTY_DIFF, ENSURE_MR, RECONCILE_MR, RETRY_CI
from workqueue.types.mr.events import register_mr_event_handlers
from workqueue.types.mr.executors.check_empty_diff import CheckEmptyDiff
from workqueue.types.mr.executors.ensure_mr import EnsureMR
from workqueue.types.mr.executors.reconcile_mr import ReconcileMR
from workqueue.types.mr.models import MRDimension

BRANCH = "workqueue/sync-kernel"
# What body() changes on top of FILES: pushing exactly this to main empties the MR.
MR_CONTENT = {"kernel.spec": "Version: 2\n", "patches/new.patch": "+fix\n"}
MERGE_ROUTE = "/projects/:id/merge_requests/:merge_request_iid/merge"
MR_ROUTE = "/projects/:id/merge_requests/:merge_request_iid"
COMMITS_ROUTE = "/projects/:id/repository/commits"
COMPARE_ROUTE = "/projects/:id/repository/compare"


@contextmanager
def gitlab(**project_settings: Any) -> Iterator[GitLabSimulator]:
    """A running simulator with PROJECT (FILES on main); fails the test on simulator errors.
    `checking_reads` and `gitlab_version` go to the simulator, the rest to the project."""
    checking_reads = project_settings.pop("checking_reads", 0)
    version = project_settings.pop("gitlab_version", DEFAULT_GITLAB_VERSION)
    simulator = GitLabSimulator(token=TOKEN, checking_reads=checking_reads, gitlab_version=version)
    simulator.start()
    simulator.create_project(PROJECT, FILES, **project_settings)
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []


def _no_ci_retry(context: ExecutionContext) -> None:
    # Stands in for the CI retry herder until it is installed: never retries.
    context.set_dimension(
        MRDimension.NEEDS_CI_RETRY, DimensionStatus.FALSE, variant=context.action.variant
    )


def _reconcile_stub(context: ExecutionContext) -> None:
    context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.FALSE)


def lifecycle_registry(
    simulator: GitLabSimulator,
    *,
    recheck_seconds: float = 0.2,
    stub_reconcile: bool = False,
    reconcile_options: dict[str, Any] | None = None,
    **section: Any,
) -> TypeRegistry:
    """The `mr` registry with this work's executors and handlers, fast re-checks.

    Executors are replaced rather than added so the helper keeps working once
    `install_mr` registers them itself (with production delays). The backoff after a
    refused merge starts at `recheck_seconds` too, unless `reconcile_options` (more
    `ReconcileMR` arguments: `merge_retry_base`, `clock`) say otherwise.
    """
    registry = mr_registry(simulator, **section)
    registration = registry.get("mr")
    config = registration.config
    assert isinstance(config, MRTypeConfig)
    client = GitLabClient(simulator.url, TOKEN, timeout=5)
    options = {"merge_retry_base": timedelta(seconds=recheck_seconds), **(reconcile_options or {})}
    reconciler = ReconcileMR(
        client, config=config, recheck_delay=timedelta(seconds=recheck_seconds), **options
    )
    registration.executors[ENSURE_MR] = EnsureMR(client, config).ensure_mr
    registration.executors[RECONCILE_MR] = (
        _reconcile_stub if stub_reconcile else reconciler.reconcile_mr
    )
    registration.executors[CHECK_EMPTY_DIFF] = CheckEmptyDiff(client, config).check_empty_diff
    registration.executors.setdefault(RETRY_CI, _no_ci_retry)
    if not registration.event_handlers:
        register_mr_event_handlers(registration)
    return registry


@dataclass
class Lifecycle:
    """One test's world: database sessions, the running manager and the simulator."""

    sessions: sessionmaker[Session]
    registry: TypeRegistry
    manager: ProcessingManager
    simulator: GitLabSimulator

    def submit(self, **overrides: Any) -> uuid.UUID:
        result = submit(self.sessions, self.registry, body(**overrides))
        self.manager.notify(result.item.id)
        return result.item.id

    def open_mr(self, **overrides: Any) -> tuple[uuid.UUID, int]:
        """Submit and wait until the MR is open and the item idle; (item id, MR iid)."""
        item_id = self.submit(**overrides)
        self.wait_settled()
        iid = self.detail(item_id).mr_iid
        assert iid is not None, "the MR was not opened"
        return item_id, iid

    def send(self, item_id: uuid.UUID, *events: tuple[str, dict[str, Any]]) -> None:
        """Store events (event type, hook body) for the item in ONE commit, then wake it."""
        with self.sessions() as session:
            for event_type, payload in events:
                enqueue.insert_pending_event(
                    session,
                    item_id=item_id,
                    item_type="mr",
                    event_type=event_type,
                    body=payload,
                    dedupe_key=str(uuid.uuid4()),
                )
            session.commit()
        self.manager.notify(item_id)

    def set_dimension(self, item_id: uuid.UUID, dimension: str, status: DimensionStatus) -> None:
        """Raise or clear a dimension from outside (as a submission or the API would)."""
        with self.sessions() as session:
            enqueue.upsert_dimension(session, item_id, DimensionUpdate(dimension, status))
            enqueue.mark_actionable(session, item_id, "mr")
            session.commit()
        self.manager.notify(item_id)

    def detail(self, item_id: uuid.UUID) -> Any:
        with self.sessions() as session:
            return session.execute(
                sa.text("SELECT * FROM mr_details WHERE id = :id"), {"id": item_id}
            ).one()

    def item(self, item_id: uuid.UUID) -> Any:
        return item_row(self.sessions, item_id)

    def dimensions(self, item_id: uuid.UUID) -> dict[tuple[str, str], Any]:
        with self.sessions() as session:
            rows = session.execute(
                sa.text(
                    "SELECT dimension, variant, status, pending_until FROM work_item_statuses "
                    "WHERE work_item_id = :id"
                ),
                {"id": item_id},
            ).all()
        return {(row.dimension, row.variant): row for row in rows}

    def pending_event_count(self) -> int:
        with self.sessions() as session:
            return int(session.execute(sa.text("SELECT count(*) FROM pending_events")).scalar_one())

    def wait_settled(self, timeout: float = 30) -> None:
        wait_until(lambda: settled(self.sessions), timeout=timeout, what="the items to settle")

    def wait_phase(self, item_id: uuid.UUID, phase: str, timeout: float = 30) -> Any:
        wait_until(
            lambda: self.item(item_id).phase == phase, timeout=timeout, what=f"phase {phase}"
        )
        self.wait_settled(timeout)
        return self.item(item_id)

    def merge_calls(self) -> list[Any]:
        return self.simulator.app.log.records("PUT", MERGE_ROUTE)

    def mr_hook(self, iid: int, action: str, **options: Any) -> tuple[str, dict[str, Any]]:
        return "merge_request", self.simulator.merge_request_hook(
            PROJECT, iid, action=action, **options
        )

    def pipeline_hook(self, pipeline_id: int) -> tuple[str, dict[str, Any]]:
        return "pipeline", self.simulator.pipeline_hook(pipeline_id)

    def push_hook(self, branch: str, before: str, **options: Any) -> tuple[str, dict[str, Any]]:
        return "push", self.simulator.push_hook(PROJECT, branch, before=before, **options)


@contextmanager
def lifecycle(
    sessions: sessionmaker[Session], simulator: GitLabSimulator, **registry_options: Any
) -> Iterator[Lifecycle]:
    registry = lifecycle_registry(simulator, **registry_options)
    with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
        yield Lifecycle(sessions, registry, manager, simulator)
