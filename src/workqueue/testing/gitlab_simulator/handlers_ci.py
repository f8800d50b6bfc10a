"""Pipeline and job routes (`lib/api/ci/pipelines.rb`, `lib/api/ci/jobs.rb`)."""

from __future__ import annotations

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.ci import (
    JOB_STATUSES,
    RETRYABLE_STATUSES,
    all_jobs,
    cancel_job,
    latest_jobs,
    pipeline_status,
    retry_job,
)
from workqueue.testing.gitlab_simulator.entities import job_entity, pipeline_basic, pipeline_entity
from workqueue.testing.gitlab_simulator.errors import forbidden, param_error
from workqueue.testing.gitlab_simulator.params import (
    bool_param,
    list_param,
    parse_api_time,
    str_param,
)
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import SimulatorState
from workqueue.testing.gitlab_simulator.trains import settle


def list_pipelines(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    params = request.params
    found = [p for p in state.pipelines.values() if p.project_id == project.id]
    for name in ("ref", "sha", "source"):
        wanted = str_param(params, name)
        if wanted is not None:
            found = [p for p in found if getattr(p, name) == wanted]
    status = str_param(params, "status")
    if status is not None:
        found = [p for p in found if pipeline_status(state, p) == status]
    updated_after = str_param(params, "updated_after")
    if updated_after is not None:
        since = parse_api_time(updated_after)
        found = [p for p in found if p.updated_at >= since]
    descending = (str_param(params, "sort") or "desc") != "asc"
    found.sort(key=lambda p: p.id, reverse=descending)
    return paginate(request, [pipeline_basic(state, p) for p in found])


def get_pipeline(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    return json_response(pipeline_entity(state, lookups.pipeline(state, project, request)))


def list_pipeline_jobs(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    pipeline = lookups.pipeline(state, project, request)
    include_retried = bool_param(request.params, "include_retried") is True
    jobs = all_jobs(state, pipeline) if include_retried else latest_jobs(state, pipeline)
    scope = list_param(request.params, "scope")
    if scope:
        unknown = [s for s in scope if s not in JOB_STATUSES]
        if unknown:
            raise param_error("scope does not have a valid value")
        jobs = [job for job in jobs if job.status in scope]
    return paginate(request, [job_entity(state, job) for job in jobs])


def retry_pipeline(state: SimulatorState, request: Request) -> Response:
    """`Ci::RetryPipelineService`: every failed or canceled latest job gets a new attempt."""
    project = lookups.project(state, request)
    pipeline = lookups.pipeline(state, project, request)
    for job in latest_jobs(state, pipeline):
        if job.status in {"failed", "canceled"}:
            retry_job(state, job, request.current_user)
    return json_response(pipeline_entity(state, pipeline), status=201)


def get_job(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    return json_response(job_entity(state, lookups.job(state, project, request)))


def post_retry_job(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    job = lookups.job(state, project, request)
    if job.status not in RETRYABLE_STATUSES or job.retried:
        raise forbidden("Job is not retryable")
    new_job = retry_job(state, job, request.current_user)
    return json_response(job_entity(state, new_job), status=201)


def post_cancel_job(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    job = lookups.job(state, project, request)
    cancel_job(state, job)
    settle(state, project)
    return json_response(job_entity(state, job), status=201)


def get_trace(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    job = lookups.job(state, project, request)
    return Response(
        status=200, body=job.trace.encode("utf-8"), content_type="text/plain; charset=utf-8"
    )


def register(router: Router) -> None:
    router.add("GET", "/projects/:id/pipelines", list_pipelines)
    router.add("GET", "/projects/:id/pipelines/:pipeline_id", get_pipeline)
    router.add("GET", "/projects/:id/pipelines/:pipeline_id/jobs", list_pipeline_jobs)
    router.add("POST", "/projects/:id/pipelines/:pipeline_id/retry", retry_pipeline)
    router.add("GET", "/projects/:id/jobs/:job_id", get_job)
    router.add("POST", "/projects/:id/jobs/:job_id/retry", post_retry_job)
    router.add("POST", "/projects/:id/jobs/:job_id/cancel", post_cancel_job)
    router.add("GET", "/projects/:id/jobs/:job_id/trace", get_trace)
