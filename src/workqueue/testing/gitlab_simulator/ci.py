"""Pipelines and jobs: creation, status changes, retries and the derived pipeline status.

A pipeline's status follows its latest (non-retried) jobs with the precedence of
GitLab's `Ci::Status::Composite`; a test can also force a pipeline status, which
holds until a job of that pipeline changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workqueue.testing.gitlab_simulator.state import (
    Job,
    MergeRequest,
    Pipeline,
    Project,
    SimulatorState,
    User,
)

JOB_STATUSES = frozenset(
    {
        "created",
        "pending",
        "preparing",
        "running",
        "success",
        "failed",
        "canceled",
        "canceling",
        "skipped",
        "manual",
        "scheduled",
        "waiting_for_resource",
        "waiting_for_callback",
    }
)
PIPELINE_STATUSES = frozenset(
    {
        "created",
        "waiting_for_resource",
        "preparing",
        "pending",
        "running",
        "success",
        "failed",
        "canceled",
        "canceling",
        "skipped",
        "manual",
        "scheduled",
    }
)
ACTIVE_STATUSES = frozenset(
    {"created", "waiting_for_resource", "preparing", "pending", "running", "scheduled", "canceling"}
)
FINISHED_STATUSES = frozenset({"success", "failed", "canceled", "skipped"})
RETRYABLE_STATUSES = frozenset({"success", "failed", "canceled"})


@dataclass(frozen=True)
class JobSpec:
    """A job to put in a simulated pipeline (`create_pipeline(jobs=[...])`)."""

    name: str
    stage: str = "test"
    status: str = "pending"
    failure_reason: str | None = None
    trace: str = ""
    allow_failure: bool = False
    when: str = "on_success"


def latest_jobs(state: SimulatorState, pipeline: Pipeline) -> list[Job]:
    """The jobs GitLab lists by default: retried ones excluded, newest id first."""
    jobs = [state.jobs[job_id] for job_id in pipeline.job_ids]
    return sorted((job for job in jobs if not job.retried), key=lambda j: j.id, reverse=True)


def all_jobs(state: SimulatorState, pipeline: Pipeline) -> list[Job]:
    return sorted((state.jobs[i] for i in pipeline.job_ids), key=lambda j: j.id, reverse=True)


def _effective(job: Job) -> str:
    # Failures of allow_failure jobs and optional manual jobs do not block the pipeline.
    if job.allow_failure and job.status in {"failed", "canceled", "manual"}:
        return "ignored"
    return job.status


def composite_status(jobs: list[Job]) -> str:
    """`Ci::Status::Composite#status` over the given jobs."""
    if not jobs:
        return "created"
    statuses = {_effective(job) for job in jobs}

    def only(*allowed: str) -> bool:
        return statuses <= {*allowed, "ignored"}

    checks: list[tuple[bool, str]] = [
        (only("skipped"), "skipped"),
        (only("success", "skipped"), "success"),
        (only("created"), "created"),
        (only("preparing"), "preparing"),
        (only("canceled", "success", "skipped"), "canceled"),
        (only("pending", "created", "skipped"), "pending"),
        (bool(statuses & {"running", "pending", "canceling"}), "running"),
        ("waiting_for_resource" in statuses, "waiting_for_resource"),
        ("manual" in statuses, "manual"),
        ("scheduled" in statuses, "scheduled"),
        ("preparing" in statuses, "preparing"),
        ("created" in statuses, "running"),
    ]
    return next((status for matched, status in checks if matched), "failed")


def pipeline_status(state: SimulatorState, pipeline: Pipeline) -> str:
    if pipeline.status_override is not None:
        return pipeline.status_override
    return composite_status(latest_jobs(state, pipeline))


def pipeline_times(
    state: SimulatorState, pipeline: Pipeline
) -> tuple[datetime | None, datetime | None]:
    """(started_at, finished_at) derived from the jobs, None where not reached."""
    jobs = latest_jobs(state, pipeline)
    starts = [job.started_at for job in jobs if job.started_at is not None]
    started = min(starts) if starts else None
    finished = None
    if pipeline_status(state, pipeline) in FINISHED_STATUSES:
        ends = [job.finished_at for job in jobs if job.finished_at is not None]
        finished = max(ends) if ends else pipeline.updated_at
    return started, finished


def head_pipeline(state: SimulatorState, project: Project, mr: MergeRequest) -> Pipeline | None:
    """`diff_head_pipeline`: the newest branch or MR pipeline for the MR's head sha."""
    candidates = [
        pipeline
        for pipeline in state.pipelines_for_sha(project.id, mr.sha)
        if pipeline.ref == mr.source_branch or pipeline.merge_request_iid == mr.iid
    ]
    return max(candidates, key=lambda p: p.id, default=None)


def add_job(state: SimulatorState, pipeline: Pipeline, spec: JobSpec, user: User) -> Job:
    job = Job(
        id=state.next_id("job"),
        pipeline_id=pipeline.id,
        project_id=pipeline.project_id,
        name=spec.name,
        stage=spec.stage,
        status="created",
        user=user,
        created_at=state.now(),
        trace=spec.trace,
        allow_failure=spec.allow_failure,
        when=spec.when,
    )
    state.jobs[job.id] = job
    pipeline.job_ids.append(job.id)
    set_job_status(state, job, spec.status, failure_reason=spec.failure_reason)
    return job


def set_job_status(
    state: SimulatorState,
    job: Job,
    status: str,
    *,
    failure_reason: str | None = None,
    trace: str | None = None,
) -> None:
    """Move a job to `status`, stamping start/finish times the way a runner would."""
    if status not in JOB_STATUSES:
        raise ValueError(f"unknown job status {status!r}")
    now = state.now()
    job.status = status
    if status in {"running", "success", "failed", "canceled"} and job.started_at is None:
        job.started_at = now
    job.finished_at = now if status in FINISHED_STATUSES else None
    # GitLab fills failure_reason for every failed job; a failing script is the usual one.
    job.failure_reason = (failure_reason or "script_failure") if status == "failed" else None
    if trace is not None:
        job.trace = trace
    pipeline = state.pipelines[job.pipeline_id]
    pipeline.status_override = None
    pipeline.updated_at = now


def retry_job(state: SimulatorState, job: Job, user: User) -> Job:
    """`Ci::RetryJobService`: a new pending job with a new id; the old one becomes retried."""
    pipeline = state.pipelines[job.pipeline_id]
    spec = JobSpec(
        name=job.name,
        stage=job.stage,
        status="pending",
        allow_failure=job.allow_failure,
        when=job.when,
    )
    job.retried = True
    return add_job(state, pipeline, spec, user)


def cancel_job(state: SimulatorState, job: Job) -> None:
    if job.status in ACTIVE_STATUSES:
        set_job_status(state, job, "canceled")
