"""Pipelines and jobs through `GitLabClient`: reads, every page of jobs, retry, trace tail."""

from __future__ import annotations

import pytest
from gitlab_client_support import PROJECT

from workqueue.gitlab import JobInfo, PermanentGitLabError, PipelineInfo
from workqueue.testing.gitlab_simulator import JobSpec

JOBS_ROUTE = "/projects/:id/pipelines/:pipeline_id/jobs"
TRACE_ROUTE = "/projects/:id/jobs/:job_id/trace"


@pytest.fixture
def pipeline_id(sim, project_id):
    return sim.create_pipeline(
        project_id,
        ref="main",
        jobs=[
            JobSpec("build", stage="build", status="success"),
            JobSpec(
                "unit",
                stage="test",
                status="failed",
                failure_reason="runner_system_failure",
                trace="line 1\nERROR: Job failed: exit code 1\n",
            ),
        ],
    )


def jobs_by_name(sim, pipeline_id):
    return {job["name"]: job["id"] for job in sim.jobs(pipeline_id)}


def test_pipeline(sim, client, project_id, pipeline_id, calls):
    info = client.pipeline(PROJECT, pipeline_id)
    assert info == PipelineInfo(
        id=pipeline_id,
        sha=sim.branch_head(project_id, "main"),
        status="failed",
        ref="main",
        source="push",
        web_url=f"{sim.url}/{PROJECT}/-/pipelines/{pipeline_id}",
    )
    assert calls.calls == [("pipelines.get", 200)]


def test_pipeline_jobs_and_job(sim, client, project_id, pipeline_id, calls):
    ids = jobs_by_name(sim, pipeline_id)
    jobs = client.pipeline_jobs(PROJECT, pipeline_id)
    sha = sim.branch_head(project_id, "main")
    assert {job.name: job for job in jobs} == {
        "build": JobInfo(
            id=ids["build"],
            name="build",
            stage="build",
            status="success",
            failure_reason=None,
            pipeline_id=pipeline_id,
            sha=sha,
            ref="main",
            allow_failure=False,
            web_url=f"{sim.url}/{PROJECT}/-/jobs/{ids['build']}",
        ),
        "unit": JobInfo(
            id=ids["unit"],
            name="unit",
            stage="test",
            status="failed",
            failure_reason="runner_system_failure",
            pipeline_id=pipeline_id,
            sha=sha,
            ref="main",
            allow_failure=False,
            web_url=f"{sim.url}/{PROJECT}/-/jobs/{ids['unit']}",
        ),
    }
    assert client.job(PROJECT, ids["unit"]) == next(job for job in jobs if job.name == "unit")
    assert calls.calls == [("pipeline_jobs.list", 200), ("jobs.get", 200)]


def test_pipeline_jobs_follows_every_page(sim, client, project_id):
    many = sim.create_pipeline(
        project_id, ref="main", jobs=[JobSpec(f"job-{n:03d}") for n in range(130)]
    )
    jobs = client.pipeline_jobs(PROJECT, many)
    assert len(jobs) == 130
    assert len({job.id for job in jobs}) == 130
    assert sim.request_count("GET", JOBS_ROUTE) == 2


def test_retry_job_returns_the_new_job(sim, client, project_id, pipeline_id, calls):
    old_id = jobs_by_name(sim, pipeline_id)["unit"]
    new = client.retry_job(PROJECT, old_id)
    assert new.id != old_id
    assert (new.name, new.status, new.pipeline_id) == ("unit", "pending", pipeline_id)
    assert new.failure_reason is None
    assert calls.calls == [("jobs.retry", 201)]

    latest = client.pipeline_jobs(PROJECT, pipeline_id)
    assert {job.id for job in latest if job.name == "unit"} == {new.id}
    everything = client.pipeline_jobs(PROJECT, pipeline_id, include_retried=True)
    assert {job.id for job in everything if job.name == "unit"} == {new.id, old_id}

    # The superseded job cannot be retried again: GitLab's 403, permanent.
    with pytest.raises(PermanentGitLabError) as caught:
        client.retry_job(PROJECT, old_id)
    assert (caught.value.status, caught.value.message) == (
        403,
        "403 Forbidden - Job is not retryable",
    )


def test_unknown_pipeline_and_job_are_404(client, pipeline_id):
    for call in (lambda: client.pipeline(PROJECT, 999), lambda: client.job(PROJECT, 999)):
        with pytest.raises(PermanentGitLabError) as caught:
            call()
        assert (caught.value.status, caught.value.message) == (404, "404 Not found")


def test_trace_tail_small_log_is_returned_whole(sim, client, pipeline_id, calls):
    unit = jobs_by_name(sim, pipeline_id)["unit"]
    assert (
        client.job_trace_tail(PROJECT, unit, 10_000) == "line 1\nERROR: Job failed: exit code 1\n"
    )
    assert client.job_trace_tail(PROJECT, unit, 12) == "exit code 1\n"
    assert calls.calls == [("jobs.trace", 200), ("jobs.trace", 200)]


def test_trace_tail_is_bounded_for_a_large_log(sim, client, project_id):
    lines = "".join(f"log line {n:06d}\n" for n in range(20_000))  # ~340 KB, several chunks
    job_pipeline = sim.create_pipeline(
        project_id, ref="main", jobs=[JobSpec("big", status="failed", trace=lines)]
    )
    big = jobs_by_name(sim, job_pipeline)["big"]
    tail = client.job_trace_tail(PROJECT, big, 1000)
    assert len(tail.encode()) == 1000
    assert tail == lines[-1000:]
    assert tail.endswith("log line 019999\n")
    assert sim.request_count("GET", TRACE_ROUTE) == 1


def test_trace_tail_drops_a_character_cut_by_the_window(sim, client, project_id):
    job_pipeline = sim.create_pipeline(
        project_id, ref="main", jobs=[JobSpec("utf8", status="failed", trace="é" * 10)]
    )
    job_id = jobs_by_name(sim, job_pipeline)["utf8"]
    assert client.job_trace_tail(PROJECT, job_id, 5) == "éé"  # 5 bytes: half an é, then two
    assert client.job_trace_tail(PROJECT, job_id, 4) == "éé"


def test_trace_tail_of_an_empty_log_and_bad_bounds(sim, client, project_id):
    empty_pipeline = sim.create_pipeline(project_id, ref="main", jobs=[JobSpec("quiet")])
    job_id = jobs_by_name(sim, empty_pipeline)["quiet"]
    assert client.job_trace_tail(PROJECT, job_id, 100) == ""
    with pytest.raises(ValueError, match="max_bytes"):
        client.job_trace_tail(PROJECT, job_id, 0)
    with pytest.raises(PermanentGitLabError) as caught:
        client.job_trace_tail(PROJECT, 999, 100)
    assert caught.value.status == 404
