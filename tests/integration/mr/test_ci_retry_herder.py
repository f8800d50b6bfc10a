"""`retry_ci` through the engine against the GitLab simulator.

The event handlers that set `needs_ci_retry` are built elsewhere, so these
tests play them: they point the item at its head pipeline and set the
dimension row directly, as a failed-job event would. `reconcile_mr` and
`check_empty_diff` are replaced by stubs that only settle their dimension, so
nothing but the herder acts on the MR.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from harness import dimension_rows, fast_config, item_row, running_manager, settled, wait_until
from mr_harness import PROJECT, TOKEN, body, mr_registry, submit

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import enqueue
from workqueue.queue.contract import ExecutionContext
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.registry import TypeRegistry
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.testing.gitlab_simulator.ci import JobSpec
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.executors.ci_retry import CIRetryExecutor

JOB = "build-job"
TRACE_ROUTE = "/projects/:id/jobs/:job_id/trace"
RETRY_ROUTE = "/projects/:id/jobs/:job_id/retry"


@pytest.fixture
def client(simulator):
    with GitLabClient(simulator.url, TOKEN, timeout=5) as client:
        yield client


def settle_only(dimension: str):
    def executor(context: ExecutionContext) -> None:
        context.set_dimension(dimension, DimensionStatus.FALSE)

    return executor


def herder_registry(simulator, client, **ci_retry) -> tuple[TypeRegistry, CIRetryExecutor]:
    registry = mr_registry(simulator, **({"ci_retry": ci_retry} if ci_retry else {}))
    registration = registry.get("mr")
    config = registration.config
    assert isinstance(config, MRTypeConfig)
    herder = CIRetryExecutor(client, config.ci_retry)
    # Assigned, not add_executor: install may register its own retry_ci (and the
    # other executors) already; these tests exercise this instance alone.
    registration.executors["retry_ci"] = herder.retry_ci
    registration.executors["reconcile_mr"] = settle_only("needs_reconcile")
    registration.executors["check_empty_diff"] = settle_only("needs_empty_check")
    return registry, herder


@dataclass
class Scene:
    sessions: object
    simulator: GitLabSimulator
    manager: ProcessingManager
    registry: TypeRegistry

    def new_item(self, branch: str = "workqueue/sync-kernel") -> tuple[uuid.UUID, int]:
        """An item with its MR open (through ensure_mr); returns (item id, MR iid)."""
        result = submit(self.sessions, self.registry, body(source_branch=branch))
        self.manager.notify(result.item.id)
        wait_until(lambda: settled(self.sessions), timeout=30, what="the MR to be opened")
        row = detail(self.sessions, result.item.id)
        assert row.mr_iid is not None
        return result.item.id, row.mr_iid

    def failed_pipeline(
        self, item_id: uuid.UUID, iid: int, *specs: JobSpec, head: bool = True
    ) -> int:
        pipeline_id = self.simulator.create_pipeline(PROJECT, merge_request_iid=iid, jobs=specs)
        if head:
            self.point_at(item_id, pipeline_id)
        return pipeline_id

    def point_at(self, item_id: uuid.UUID, pipeline_id: int, sha: str | None = None) -> None:
        sha = sha or self.simulator.pipeline(pipeline_id)["sha"]
        with self.sessions() as session:
            session.execute(
                sa.text(
                    "UPDATE mr_details SET head_pipeline_id = :p, head_pipeline_sha = :s "
                    "WHERE id = :id"
                ),
                {"p": pipeline_id, "s": sha, "id": item_id},
            )
            session.commit()

    def job_failed(self, item_id: uuid.UUID, *names: str) -> None:
        """What a failed-job event does: needs_ci_retry "true" for each job name."""
        with self.sessions() as session:
            for name in names:
                enqueue.upsert_dimension(
                    session, item_id, DimensionUpdate("needs_ci_retry", DimensionStatus.TRUE, name)
                )
            enqueue.mark_actionable(session, item_id, "mr")
            session.commit()
        self.manager.notify(item_id)

    def run(self, item_id: uuid.UUID, *names: str) -> None:
        self.job_failed(item_id, *names)
        wait_until(lambda: settled(self.sessions), timeout=30, what="retry_ci to run")


@pytest.fixture
def scene_factory(sessions, simulator, client):
    @contextmanager
    def make(**ci_retry) -> Iterator[tuple[Scene, CIRetryExecutor]]:
        registry, herder = herder_registry(simulator, client, **ci_retry)
        with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
            yield Scene(sessions, simulator, manager, registry), herder

    return make


def detail(sessions, item_id):
    with sessions() as session:
        return session.execute(
            sa.text("SELECT * FROM mr_details WHERE id = :id"), {"id": item_id}
        ).one()


def ci_row(sessions, item_id, name=JOB):
    return {
        variant: row
        for variant, row in dimension_rows(sessions, item_id).items()
        if variant  # the other dimensions have no variant
    }[name]


def jobs_named(simulator, pipeline_id, name=JOB):
    jobs = simulator.jobs(pipeline_id, include_retried=True)
    return sorted((job for job in jobs if job["name"] == name), key=lambda job: job["id"])


def latest(simulator, pipeline_id, name=JOB):
    return jobs_named(simulator, pipeline_id, name)[-1]


def failed(name=JOB, reason="runner_system_failure", stage="build", trace=""):
    return JobSpec(name, stage=stage, status="failed", failure_reason=reason, trace=trace)


# -- the section-8 cases ----------------------------------------------------------------------


def test_runner_system_failure_is_retried_up_to_the_limit(scene_factory, sessions, simulator):
    with scene_factory() as (scene, herder):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        for attempt in range(1, 4):
            scene.run(item_id, JOB)
            jobs = jobs_named(simulator, pipeline_id)
            assert len(jobs) == attempt + 1
            assert jobs[-1]["status"] == "pending"  # the retry GitLab made
            assert detail(sessions, item_id).ci_retry_counts == {JOB: attempt}
            assert ci_row(sessions, item_id).status == DimensionStatus.FALSE
            # The runner breaks again.
            simulator.set_job_status(
                jobs[-1]["id"], "failed", failure_reason="runner_system_failure"
            )
        simulator.reset_requests()
        scene.run(item_id, JOB)
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert len(jobs_named(simulator, pipeline_id)) == 4  # 1 + 3 retries, no more
        assert detail(sessions, item_id).ci_retry_counts == {JOB: 3}
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE
        assert simulator.request_count("GET", TRACE_ROUTE) == 0  # defaults need no log
        assert herder.breaker.state().admitted_total == 3
    row = item_row(sessions, item_id)
    assert (row.phase, row.error, row.attempts) == (Phase.ACTIVE, None, 0)


def test_script_failure_is_never_retried(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(
            item_id, iid, failed(reason="script_failure", trace="AssertionError\n")
        )
        for _ in range(3):
            scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert detail(sessions, item_id).ci_retry_counts == {}
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE
        assert item_row(sessions, item_id).phase == Phase.ACTIVE


def test_retry_counts_are_per_job_name(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(
            item_id, iid, failed("a"), failed("b"), failed("c", reason="script_failure")
        )
        scene.run(item_id, "a", "b", "c")
        assert detail(sessions, item_id).ci_retry_counts == {"a": 1, "b": 1}
        assert [len(jobs_named(simulator, pipeline_id, n)) for n in "abc"] == [2, 2, 1]


# -- never a stale job ------------------------------------------------------------------------


def test_a_pipeline_that_is_no_longer_the_head_is_not_retried(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        old = scene.failed_pipeline(item_id, iid, failed())
        # A newer pipeline on the same sha becomes the MR's head; the item still says `old`.
        scene.failed_pipeline(item_id, iid, JobSpec(JOB, status="running"), head=False)
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, old)) == 1
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE
        assert detail(sessions, item_id).ci_retry_counts == {}


def test_a_job_on_an_old_sha_is_not_retried(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        simulator.push(PROJECT, "workqueue/sync-kernel", {"human.txt": "a human's fix\n"})
        assert (
            simulator.merge_request(PROJECT, iid)["sha"] != simulator.pipeline(pipeline_id)["sha"]
        )
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE


def test_an_item_whose_head_sha_disagrees_is_not_retried(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        scene.point_at(item_id, pipeline_id, sha="0" * 40)
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE


def test_a_skipped_retry_names_what_it_knows_and_never_prints_none(
    scene_factory, sessions, simulator, caplog
):
    with caplog.at_level(logging.INFO, logger="workqueue.audit"), scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        # A human's push: the MR's new head has no pipeline yet, so GitLab names no head pipeline.
        simulator.push(PROJECT, "workqueue/sync-kernel", {"human.txt": "a human's fix\n"})
        assert simulator.merge_request(PROJECT, iid)["head_pipeline"] is None
        scene.run(item_id, JOB)
    (skipped,) = [
        record.getMessage()
        for record in caplog.records
        if "ci_retry_skipped" in record.getMessage()
    ]
    assert (
        f"pipeline {pipeline_id} is no longer the MR's head pipeline (GitLab names none)" in skipped
    )
    assert "None" not in skipped


def test_a_job_that_is_no_longer_failed_is_left_alone(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        simulator.retry_job(latest(simulator, pipeline_id)["id"])  # a human pressed retry
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 2
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert detail(sessions, item_id).ci_retry_counts == {}
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE


def test_a_job_allowed_to_fail_is_not_retried(scene_factory, sessions, simulator):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        spec = JobSpec(
            JOB, status="failed", failure_reason="runner_system_failure", allow_failure=True
        )
        pipeline_id = scene.failed_pipeline(item_id, iid, spec)
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE


def test_a_job_the_pipeline_does_not_have_settles_the_dimension(scene_factory, sessions):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        scene.failed_pipeline(item_id, iid, failed())
        scene.run(item_id, "no-such-job")
        assert ci_row(sessions, item_id, "no-such-job").status == DimensionStatus.FALSE
        assert item_row(sessions, item_id).phase == Phase.ACTIVE


def test_gitlab_refusing_the_retry_settles_the_dimension(scene_factory, sessions, simulator):
    with scene_factory() as (scene, herder):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        simulator.inject_fault(
            "POST",
            RETRY_ROUTE,
            status=403,
            body={"message": "403 Forbidden - Job is not retryable"},
        )
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        assert ci_row(sessions, item_id).status == DimensionStatus.FALSE
        assert detail(sessions, item_id).ci_retry_counts == {}
        row = item_row(sessions, item_id)
        assert (row.phase, row.error) == (Phase.ACTIVE, None)
        assert herder.breaker.state().retries_in_window == 0  # the slot was given back


# -- log patterns -----------------------------------------------------------------------------


def test_log_patterns_read_a_bounded_tail_only_when_needed(scene_factory, sessions, simulator):
    rules = [
        {"name": "infrastructure", "failure_reason": ["runner_system_failure"]},
        {"name": "oom", "failure_reason": ["script_failure"], "log_patterns": [r"^Killed$"]},
    ]
    noise = "x" * 10_000 + "\n"
    with scene_factory(rules=rules, log_tail_bytes=200) as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(
            item_id,
            iid,
            failed("oom", reason="script_failure", trace=noise + "make: ***\nKilled\n"),
            failed("unit", reason="script_failure", trace="Killed\n" + noise),  # beyond the tail
            failed("infra"),
        )
        scene.run(item_id, "oom", "unit", "infra")
        assert detail(sessions, item_id).ci_retry_counts == {"oom": 1, "infra": 1}
        assert len(jobs_named(simulator, pipeline_id, "unit")) == 1
        assert simulator.request_count("GET", TRACE_ROUTE) == 2  # not for "infra"


# -- delays -----------------------------------------------------------------------------------


def test_retry_delay_is_honoured_through_pending_until(scene_factory, sessions, simulator):
    rules = [
        {
            "name": "infrastructure",
            "failure_reason": ["runner_system_failure"],
            "retry_limit": 2,
            "retry_delays": [1.5],
        }
    ]
    with scene_factory(rules=rules) as (scene, _):
        item_id, iid = scene.new_item()
        pipeline_id = scene.failed_pipeline(item_id, iid, failed())
        started = time.monotonic()
        scene.run(item_id, JOB)  # settles as soon as the dimension is deferred
        row = ci_row(sessions, item_id)
        assert (row.status, row.pending_until is not None) == (DimensionStatus.TRUE, True)
        assert len(jobs_named(simulator, pipeline_id)) == 1
        wait_until(
            lambda: len(jobs_named(simulator, pipeline_id)) == 2,
            timeout=15,
            what="the delayed retry",
        )
        assert time.monotonic() - started >= 1.4
        wait_until(lambda: settled(sessions), timeout=15)
        row = ci_row(sessions, item_id)
        assert (row.status, row.pending_until) == (DimensionStatus.FALSE, None)
        assert detail(sessions, item_id).ci_retry_counts == {JOB: 1}

        # The next failure waits its own delay again.
        simulator.set_job_status(
            latest(simulator, pipeline_id)["id"], "failed", failure_reason="runner_system_failure"
        )
        scene.run(item_id, JOB)
        assert ci_row(sessions, item_id).pending_until is not None
        assert len(jobs_named(simulator, pipeline_id)) == 2
        wait_until(lambda: len(jobs_named(simulator, pipeline_id)) == 3, timeout=15)


# -- circuit breaker --------------------------------------------------------------------------


def test_circuit_breaker_pauses_retries_across_items_and_resumes(
    scene_factory, sessions, simulator
):
    window = 3.0
    with scene_factory(circuit_breaker={"max_retries": 2, "window_seconds": window}) as (
        scene,
        herder,
    ):
        items = [scene.new_item(f"workqueue/branch-{n}") for n in range(3)]
        pipelines = {
            item_id: scene.failed_pipeline(item_id, iid, failed()) for item_id, iid in items
        }

        def retried() -> list[uuid.UUID]:
            return [i for i, p in pipelines.items() if len(jobs_named(simulator, p)) == 2]

        for item_id in pipelines:
            scene.job_failed(item_id, JOB)
        wait_until(lambda: settled(sessions), timeout=30)
        assert len(retried()) == 2
        assert herder.breaker.is_open()
        state = herder.breaker.state()
        assert (state.admitted_total, state.refused_total, state.opened_total) == (2, 1, 1)
        (paused,) = set(pipelines) - set(retried())
        row = ci_row(sessions, paused)
        assert (row.status, row.pending_until is not None) == (DimensionStatus.TRUE, True)

        wait_until(lambda: len(retried()) == 3, timeout=window + 10, what="the breaker to close")
        wait_until(lambda: settled(sessions), timeout=15)
        assert not herder.breaker.is_open()
        assert detail(sessions, paused).ci_retry_counts == {JOB: 1}


# -- merged-results pipelines -----------------------------------------------------------------

COMMIT_ROUTE = "/projects/:id/repository/commits/:sha"


def test_a_failed_job_of_a_merged_results_pipeline_of_the_head_is_retried(
    scene_factory, sessions, simulator
):
    with scene_factory() as (scene, _):
        item_id, iid = scene.new_item()
        simulator.push(PROJECT, "main", {"README.md": "# moved on\n"})
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, merged_results=True, jobs=[failed()]
        )
        merge_commit = simulator.pipeline(pipeline_id)["sha"]
        assert merge_commit != detail(sessions, item_id).mr_sha  # a temporary merge commit
        scene.point_at(item_id, pipeline_id)
        simulator.reset_requests()
        scene.run(item_id, JOB)
        jobs = jobs_named(simulator, pipeline_id)
        assert len(jobs) == 2
        assert jobs[-1]["status"] == "pending"  # the retry GitLab made
        assert detail(sessions, item_id).ci_retry_counts == {JOB: 1}
        # The runner breaks again: the merge commit, read once, is not read again.
        simulator.set_job_status(jobs[-1]["id"], "failed", failure_reason="runner_system_failure")
        scene.run(item_id, JOB)
        assert len(jobs_named(simulator, pipeline_id)) == 3
        assert simulator.request_count("GET", COMMIT_ROUTE) == 1
