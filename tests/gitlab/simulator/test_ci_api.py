"""Pipelines and jobs through python-gitlab: status, jobs list, retry, trace."""

from __future__ import annotations

import gitlab
import pytest

from workqueue.testing.gitlab_simulator import JobSpec


@pytest.fixture
def mr_iid(project, bot_branch):
    return project.mergerequests.create(
        {"source_branch": "bot/bump-requests", "target_branch": "main", "title": "Bump"}
    ).iid


@pytest.fixture
def pipeline_id(sim, project_id, mr_iid):
    return sim.create_pipeline(
        project_id,
        merge_request_iid=mr_iid,
        jobs=[
            JobSpec("ruff", stage="lint", status="success"),
            JobSpec(
                "unit-tests",
                status="failed",
                failure_reason="script_failure",
                trace="collected 3 items\nE   AssertionError\n1 failed\n",
            ),
            JobSpec(
                "deploy-preview",
                stage="deploy",
                status="skipped",
                when="manual",
                allow_failure=True,
            ),
        ],
    )


def test_pipeline_get_and_jobs(project, pipeline_id, mr_iid):
    pipeline = project.pipelines.get(pipeline_id)
    assert pipeline.status == "failed"
    assert pipeline.source == "merge_request_event"
    assert pipeline.ref == f"refs/merge-requests/{mr_iid}/head"
    assert pipeline.sha == project.mergerequests.get(mr_iid).sha

    jobs = pipeline.jobs.list(get_all=True)
    assert [job.name for job in jobs] == ["deploy-preview", "unit-tests", "ruff"]  # id desc
    by_name = {job.name: job for job in jobs}
    assert by_name["unit-tests"].failure_reason == "script_failure"
    # failure_reason is only exposed on failed jobs.
    assert "failure_reason" not in by_name["ruff"].attributes
    assert [job.name for job in pipeline.jobs.list(get_all=True, scope=["failed"])] == [
        "unit-tests"
    ]


def test_job_retry_creates_a_new_job_and_hides_the_old_one(sim, project, pipeline_id):
    failed = next(
        j
        for j in project.pipelines.get(pipeline_id).jobs.list(get_all=True)
        if j.name == "unit-tests"
    )
    job = project.jobs.get(failed.id, lazy=True)

    retried = job.retry()

    assert retried["id"] != failed.id
    assert retried["name"] == "unit-tests"
    assert retried["status"] == "pending"
    pipeline = project.pipelines.get(pipeline_id)
    assert pipeline.status == "running"
    latest = pipeline.jobs.list(get_all=True)
    assert failed.id not in [j.id for j in latest]
    everything = pipeline.jobs.list(get_all=True, include_retried=True)
    assert {failed.id, retried["id"]} <= {j.id for j in everything}

    with pytest.raises(gitlab.GitlabJobRetryError) as caught:
        project.jobs.get(retried["id"], lazy=True).retry()  # pending jobs are not retryable
    assert caught.value.response_code == 403
    assert caught.value.error_message == "403 Forbidden - Job is not retryable"

    sim.set_job_status(retried["id"], "success")
    assert project.pipelines.get(pipeline_id).status == "success"


def test_job_trace_and_get(sim, project, pipeline_id):
    failed = next(
        j
        for j in project.pipelines.get(pipeline_id).jobs.list(get_all=True)
        if j.name == "unit-tests"
    )
    job = project.jobs.get(failed.id)
    assert job.status == "failed"
    assert job.pipeline["id"] == pipeline_id
    assert job.trace() == b"collected 3 items\nE   AssertionError\n1 failed\n"

    sim.append_trace(failed.id, "more\n")
    assert job.trace().endswith(b"more\n")

    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.jobs.get(1)
    assert (caught.value.response_code, caught.value.error_message) == (404, "404 Not found")


def test_pipeline_status_follows_jobs_unless_forced(sim, project_id, project):
    pipeline_id = sim.create_pipeline(
        project_id,
        ref="main",
        jobs=[JobSpec("a", status="pending"), JobSpec("b", status="created")],
    )
    assert project.pipelines.get(pipeline_id).status == "pending"
    a, b = sorted(sim.jobs(pipeline_id), key=lambda j: j["id"])
    sim.set_job_status(a["id"], "running")
    assert project.pipelines.get(pipeline_id).status == "running"
    sim.set_job_status(a["id"], "success")
    sim.set_job_status(b["id"], "canceled")
    assert project.pipelines.get(pipeline_id).status == "canceled"
    sim.set_pipeline_status(pipeline_id, "success")
    assert project.pipelines.get(pipeline_id).status == "success"
    sim.set_job_status(b["id"], "failed", failure_reason="runner_system_failure")
    pipeline = project.pipelines.get(pipeline_id)
    assert pipeline.status == "failed"
    assert pipeline.finished_at is not None


def test_pipeline_retry_retries_failed_jobs(sim, project, pipeline_id):
    pipeline = project.pipelines.get(pipeline_id)
    pipeline.retry()
    statuses = {
        j.name: j.status for j in project.pipelines.get(pipeline_id).jobs.list(get_all=True)
    }
    assert statuses == {"ruff": "success", "unit-tests": "pending", "deploy-preview": "skipped"}
