"""Older GitLab releases: MR answers without `detailed_merge_status` (before 15.6) and Job
Hooks without the `project` object (before 16.0) still drive an item to its end."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import gitlab, lifecycle

from workqueue.queue.intake import deliveries as intake
from workqueue.queue.models import Phase
from workqueue.testing.gitlab_simulator import JobSpec

RETRY_ROUTE = "/projects/:id/jobs/:job_id/retry"
# Long enough that no drift check runs during a test: what happens is the hooks' doing.
NO_DRIFT_NOW = 600


def store_delivery(world, event_type, body):
    """Store a delivery the way the receiver does, for the intake resolver to resolve."""
    with world.sessions() as session:
        status = intake.store_delivery(
            session,
            world.registry,
            source="webhook",
            delivery_key=str(uuid.uuid4()),
            event_type=event_type,
            body=body,
        )
        session.commit()
    assert status == "accepted"
    world.manager.intake.stored_here()


def resolved(world):
    with world.sessions() as session:
        waiting = session.execute(sa.text("SELECT count(*) FROM incoming_deliveries"))
        return waiting.scalar_one() == 0 and world.pending_event_count() == 0


def test_an_mr_answer_without_detailed_merge_status_still_merges(sessions):
    with (
        gitlab(gitlab_version="15.5") as simulator,
        lifecycle(sessions, simulator, drift_check_seconds=NO_DRIFT_NOW) as world,
    ):
        item_id, iid = world.open_mr()
        assert "detailed_merge_status" not in simulator.merge_request(PROJECT, iid)
        assert world.merge_calls() == []
        pipeline = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        world.send(item_id, world.pipeline_hook(pipeline))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.detail(item_id).completion_reason == "merged"
        assert len(world.merge_calls()) == 1


def test_a_conflict_without_detailed_merge_status_is_a_conflict(sessions):
    with (
        gitlab(gitlab_version="15.5") as simulator,
        lifecycle(sessions, simulator, drift_check_seconds=NO_DRIFT_NOW) as world,
    ):
        item_id, iid = world.open_mr()
        simulator.push(PROJECT, "main", {"kernel.spec": "Version: 3\n"})  # the target moved
        pipeline = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        world.send(item_id, world.pipeline_hook(pipeline))
        wait_until(
            lambda: (world.detail(item_id).merge_blocker or {}).get("code") == "conflict",
            what="the conflict reported",
        )
        world.wait_settled()
        assert world.merge_calls() == []


def test_a_job_hook_without_project_still_retries_the_job(sessions):
    with (
        gitlab(gitlab_version="15.11") as simulator,
        lifecycle(sessions, simulator, drift_check_seconds=NO_DRIFT_NOW) as world,
    ):
        item_id, iid = world.open_mr()
        pipeline = simulator.create_pipeline(
            PROJECT,
            merge_request_iid=iid,
            jobs=[JobSpec("unit-tests", status="failed", failure_reason="runner_system_failure")],
        )
        [job] = simulator.jobs(pipeline)
        payload = simulator.job_hook(job["id"])
        assert "project" not in payload  # only project_id, as GitLab 15.x sends it
        # The Pipeline Hook was lost; only the Job Hook arrives, through the resolvers.
        store_delivery(world, "build", payload)
        wait_until(
            lambda: simulator.request_count("POST", RETRY_ROUTE) == 1, what="the job retried"
        )
        world.wait_settled()
        assert world.detail(item_id).head_pipeline_id == pipeline
        assert world.item(item_id).phase == Phase.ACTIVE


def test_a_job_hook_naming_another_project_id_reaches_nothing(sessions):
    with (
        gitlab(gitlab_version="15.11") as simulator,
        lifecycle(sessions, simulator, drift_check_seconds=NO_DRIFT_NOW) as world,
    ):
        item_id, iid = world.open_mr()
        pipeline = simulator.create_pipeline(
            PROJECT,
            merge_request_iid=iid,
            jobs=[JobSpec("unit-tests", status="failed", failure_reason="runner_system_failure")],
        )
        [job] = simulator.jobs(pipeline)
        payload = simulator.job_hook(job["id"])
        payload["project_id"] += 1000  # the same pipeline and sha, said of another project
        store_delivery(world, "build", payload)
        wait_until(lambda: resolved(world), what="the delivery resolved")
        world.wait_settled()
        assert simulator.request_count("POST", RETRY_ROUTE) == 0
        assert world.detail(item_id).head_pipeline_id is None
