"""Merged-results pipelines and merge trains (GitLab Premium), as `ee/app/services/merge_trains`.

**Merged results.** A merged-results pipeline runs on a temporary merge commit of
the MR head into the target (`refs/merge-requests/<iid>/merge`; parents: target
head, MR head). Its `sha` is that commit, its `source_sha` the MR head; GitLab
counts it as the MR's head pipeline (`diff_head_pipeline` looks pipelines up by
sha *or* source sha), and its Pipeline Hook reports the source branch as `ref`.

**Merge trains.** `POST /projects/:id/merge_trains/merge_requests/:iid` adds a car
(`idle`); `refresh_trains`, run after every CI change, gives each car of a target
branch a train pipeline on `refs/merge-requests/<iid>/train` (the MR merged onto
the train ref of the car ahead, or onto the target head for the first car) and
makes it `fresh`. The first car whose pipeline passed is `merging`, then `merged`
(the MR is merged like `PUT …/merge` would). A car whose pipeline failed, whose MR
was closed, made a draft or got new commits, or whose train ref cannot be built
is dropped: deleted (its GET answers 404), auto-merge reset, a system note saying
why, and the cars behind it `stale` until they get new train refs. An MR merged
outside the train leaves its car `skip_merged`.
"""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator.ci import FINISHED_STATUSES, pipeline_status
from workqueue.testing.gitlab_simulator.entities import (
    api_time,
    pipeline_basic,
    project_url,
    user_entity,
)
from workqueue.testing.gitlab_simulator.errors import ApiError
from workqueue.testing.gitlab_simulator.merge3 import merge_trees
from workqueue.testing.gitlab_simulator.mergeability import (
    git_check,
    perform_merge,
    process_auto_merges,
    state_check,
)
from workqueue.testing.gitlab_simulator.repository import Commit
from workqueue.testing.gitlab_simulator.state import (
    MergeRequest,
    MergeTrainCar,
    Pipeline,
    Project,
    SimulatorState,
    User,
)

ACTIVE_CAR_STATUSES = frozenset({"idle", "stale", "fresh", "merging"})
COMPLETE_CAR_STATUSES = frozenset({"merged", "skip_merged"})


class MergeRefError(ValueError):
    """The MR does not merge cleanly onto the given commit."""


def merge_ref_commit(
    project: Project, onto: str, mr: MergeRequest, head: str, user: User, when: Any
) -> Commit:
    """The temporary commit merging `head` onto `onto` (no branch points at it)."""
    repo = project.repository
    base = repo.merge_base(onto, head)
    base_tree = repo.commits[base].tree if base is not None else {}
    tree, conflicts = merge_trees(base_tree, repo.commits[onto].tree, repo.commits[head].tree)
    if conflicts:
        raise MergeRefError(f"!{mr.iid} conflicts with {onto[:8]} on {', '.join(conflicts)}")
    return repo.create_commit(
        tree=tree,
        parent_ids=(onto, head),
        message=f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}",
        author=user.signature,
        committer=user.signature,
        when=when,
    )


def settle(state: SimulatorState, project: Project) -> None:
    """What GitLab's workers do after a pipeline, job or approval changed."""
    process_auto_merges(state, project)
    refresh_trains(state, project)


def add_car(state: SimulatorState, project: Project, mr: MergeRequest, user: User) -> None:
    now = state.now()
    car = MergeTrainCar(
        id=state.next_id("merge_train_car"),
        merge_request_iid=mr.iid,
        target_branch=mr.target_branch,
        user=user,
        created_at=now,
        updated_at=now,
    )
    position = 1 + sum(1 for other in active_cars(project, mr.target_branch))
    project.train_cars.append(car)
    mr.merge_when_pipeline_succeeds = True
    mr.merge_user = user
    mr.auto_merge_params = {"auto_merge_strategy": "merge_train"}
    note = f"added this merge request to the merge train at position {position}"
    state.add_system_note(mr, user, note)
    refresh_trains(state, project)


def active_cars(project: Project, target_branch: str | None = None) -> list[MergeTrainCar]:
    return [
        car
        for car in project.train_cars
        if car.status in ACTIVE_CAR_STATUSES
        and (target_branch is None or car.target_branch == target_branch)
    ]


def refresh_trains(state: SimulatorState, project: Project) -> None:
    """`MergeTrains::RefreshService` for every target branch, until nothing changes."""
    for branch in sorted({car.target_branch for car in active_cars(project)}):
        while _refresh_train(state, project, branch):
            pass


def _refresh_train(state: SimulatorState, project: Project, branch: str) -> bool:
    """One pass over the train of `branch`; True when a car was dropped or merged."""
    previous_ref: str | None = None
    for index, car in enumerate(active_cars(project, branch)):
        mr = project.merge_requests[car.merge_request_iid]
        if mr.state == "merged":
            car.status, car.updated_at = "skip_merged", state.now()
            return True
        reason = _drop_reason(state, car, mr)
        if reason is None and car.status in {"idle", "stale"}:
            reason = _start_pipeline(state, project, car, mr, previous_ref)
        if reason is not None:
            state.drop_train_car(project, car, car.user, reason)
            return True
        pipeline = state.pipelines[car.pipeline_id] if car.pipeline_id is not None else None
        if index == 0 and pipeline is not None and pipeline_status(state, pipeline) == "success":
            _merge_car(state, project, car, mr)
            return True
        previous_ref = pipeline.sha if pipeline is not None else None
    return False


def _drop_reason(state: SimulatorState, car: MergeTrainCar, mr: MergeRequest) -> str | None:
    """`RefreshMergeRequestService#validate!`'s reasons, in its order."""
    if mr.state != "opened":
        return "the merge request is closed"
    if mr.draft:
        return "the merge request is marked as draft"
    pipeline = state.pipelines.get(car.pipeline_id) if car.pipeline_id is not None else None
    if pipeline is not None and car.status == "fresh":
        status = pipeline_status(state, pipeline)
        if status in FINISHED_STATUSES and status != "success":
            return "the pipeline did not succeed"
    return None


def _start_pipeline(
    state: SimulatorState,
    project: Project,
    car: MergeTrainCar,
    mr: MergeRequest,
    previous_ref: str | None,
) -> str | None:
    """Build the car's train ref and run its pipeline; a reason to drop it if that fails."""
    target = project.repository.branches.get(mr.target_branch)
    if target is None:
        return "the target branch was deleted"
    try:
        onto = previous_ref or target
        commit = merge_ref_commit(project, onto, mr, mr.sha, car.user, state.now())
    except MergeRefError:
        return "the merge request has conflicts with the train"
    if car.pipeline_id is not None:
        state.pipelines[car.pipeline_id].status_override = "canceled"  # outdated train ref
    pipeline = _train_pipeline(state, project, mr, car.user, commit, previous_ref or target)
    car.pipeline_id = pipeline.id
    car.status, car.updated_at = "fresh", state.now()
    return None


def _train_pipeline(
    state: SimulatorState,
    project: Project,
    mr: MergeRequest,
    user: User,
    commit: Commit,
    onto: str,
) -> Pipeline:
    now = state.now()
    pipeline = Pipeline(
        id=state.next_id("pipeline"),
        iid=project.next_pipeline_iid,
        project_id=project.id,
        sha=commit.id,
        before_sha=onto,
        ref=f"refs/merge-requests/{mr.iid}/train",
        source="merge_request_event",
        user=user,
        created_at=now,
        updated_at=now,
        merge_request_iid=mr.iid,
        # Runs until a test finishes it (`set_pipeline_status`, or its jobs).
        status_override="running",
        source_sha=mr.sha,
        target_sha=onto,
    )
    project.next_pipeline_iid += 1
    state.add_pipeline(pipeline)
    return pipeline


def _merge_car(
    state: SimulatorState, project: Project, car: MergeTrainCar, mr: MergeRequest
) -> None:
    car.status = "merging"
    if state_check(state, project, mr, skip_ci=True) is not None or git_check(project, mr):
        state.drop_train_car(project, car, car.user, "the merge request is not mergeable")
        return
    try:
        perform_merge(state, project, mr, car.user, {})
    except ApiError:  # the merge itself failed (a conflict): GitLab drops the car
        state.drop_train_car(project, car, car.user, "it failed to merge")
        return
    car.status = "merged"
    car.merged_at = car.updated_at = state.now()


def car_entity(state: SimulatorState, project: Project, car: MergeTrainCar) -> dict[str, Any]:
    """`EE::API::Entities::MergeTrains::Car`."""
    mr = project.merge_requests[car.merge_request_iid]
    pipeline = state.pipelines.get(car.pipeline_id) if car.pipeline_id is not None else None
    duration = (car.merged_at - car.created_at).total_seconds() if car.merged_at else None
    return {
        "id": car.id,
        "merge_request": {
            "id": mr.id,
            "iid": mr.iid,
            "project_id": project.id,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "created_at": api_time(mr.created_at),
            "updated_at": api_time(mr.updated_at),
            "web_url": f"{project_url(state, project)}/-/merge_requests/{mr.iid}",
        },
        "user": user_entity(state, car.user),
        "pipeline": pipeline_basic(state, pipeline) if pipeline is not None else None,
        "created_at": api_time(car.created_at),
        "updated_at": api_time(car.updated_at),
        "target_branch": car.target_branch,
        "status": car.status,
        "merged_at": api_time(car.merged_at),
        "duration": int(duration) if duration is not None else None,
    }
