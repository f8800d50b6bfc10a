"""Merge train routes (`ee/lib/api/merge_trains.rb`); the train itself is `trains`.

Every route answers 403 when the project has merge trains disabled. Adding
checks the `sha` first (409 naming the real head), then whether the merge-train
strategy is available (`AutoMerge::MergeTrainService#available_for?`: open,
mergeable, its head pipeline complete and, when the project requires it,
successful), else 400 `Failed to merge`; success is 201 with the cars of the
target branch. `auto_merge` / `when_pipeline_succeeds` (add once the pipeline
passes) are not modelled: they add the car at once like a plain add.
"""

from __future__ import annotations

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.ci import FINISHED_STATUSES, head_pipeline, pipeline_status
from workqueue.testing.gitlab_simulator.errors import (
    bad_request,
    conflict,
    forbidden,
    not_found,
    param_error,
)
from workqueue.testing.gitlab_simulator.mergeability import git_check, state_check
from workqueue.testing.gitlab_simulator.params import str_param
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import MergeTrainCar, Project, SimulatorState
from workqueue.testing.gitlab_simulator.trains import (
    ACTIVE_CAR_STATUSES,
    COMPLETE_CAR_STATUSES,
    active_cars,
    add_car,
    car_entity,
)


def _trains_project(state: SimulatorState, request: Request) -> Project:
    project = lookups.project(state, request)
    if not project.merge_trains_enabled:
        raise forbidden()
    return project


def _listed(
    state: SimulatorState, request: Request, project: Project, cars: list[MergeTrainCar]
) -> Response:
    scope = str_param(request.params, "scope")
    if scope is not None and scope not in {"active", "complete"}:
        raise param_error("scope does not have a valid value")
    sort = str_param(request.params, "sort") or "desc"
    if sort not in {"asc", "desc"}:
        raise param_error("sort does not have a valid value")
    wanted = {"active": ACTIVE_CAR_STATUSES, "complete": COMPLETE_CAR_STATUSES}.get(scope or "")
    chosen = [car for car in cars if wanted is None or car.status in wanted]
    chosen.sort(key=lambda car: car.id, reverse=sort == "desc")
    response = paginate(request, chosen)
    response.body = [car_entity(state, project, car) for car in response.body]
    return response


def list_cars(state: SimulatorState, request: Request) -> Response:
    project = _trains_project(state, request)
    return _listed(state, request, project, list(project.train_cars))


def list_branch_cars(state: SimulatorState, request: Request) -> Response:
    project = _trains_project(state, request)
    branch = request.path_params["target_branch"]
    return _listed(
        state, request, project, [car for car in project.train_cars if car.target_branch == branch]
    )


def get_car(state: SimulatorState, request: Request) -> Response:
    project = _trains_project(state, request)
    mr = lookups.merge_request(project, request)
    car = project.train_car(mr.iid)
    if car is None:
        raise not_found("Merge Train Merge Request")
    return json_response(car_entity(state, project, car))


def add_to_train(state: SimulatorState, request: Request) -> Response:
    project = _trains_project(state, request)
    mr = lookups.merge_request(project, request)
    sha = str_param(request.params, "sha")
    if sha and sha != mr.sha:
        raise conflict(f"SHA does not match HEAD of source branch: {mr.sha}")
    car = project.train_car(mr.iid)
    if car is None or car.status not in ACTIVE_CAR_STATUSES:
        if not _available(state, project, mr.iid):
            raise bad_request("Failed to merge")
        add_car(state, project, mr, request.current_user)
    train = reversed(active_cars(project, mr.target_branch))
    return json_response([car_entity(state, project, car) for car in train], status=201)


def _available(state: SimulatorState, project: Project, iid: int) -> bool:
    mr = project.merge_requests[iid]
    pipeline = head_pipeline(state, project, mr)
    if pipeline is None or pipeline_status(state, pipeline) not in FINISHED_STATUSES:
        return False
    return state_check(state, project, mr) is None and git_check(project, mr) is None


def register(router: Router) -> None:
    base = "/projects/:id/merge_trains"
    router.add("GET", base, list_cars)
    router.add("GET", f"{base}/merge_requests/:merge_request_iid", get_car)
    router.add("POST", f"{base}/merge_requests/:merge_request_iid", add_to_train)
    router.add("GET", f"{base}/:target_branch", list_branch_cars)
