"""Merge request routes (`lib/api/merge_requests.rb`): create, read, list, update, merge,
rebase, changes, commits, pipelines and auto-merge cancellation."""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.ci import ACTIVE_STATUSES, head_pipeline, pipeline_status
from workqueue.testing.gitlab_simulator.entities import (
    commit_entity,
    mr_basic,
    mr_diffs,
    mr_entity,
    pipeline_basic,
)
from workqueue.testing.gitlab_simulator.errors import (
    ApiError,
    api_error,
    conflict,
    forbidden,
    missing_params,
    not_allowed,
    param_error,
)
from workqueue.testing.gitlab_simulator.mergeability import (
    git_check,
    perform_merge,
    state_check,
)
from workqueue.testing.gitlab_simulator.params import (
    bool_param,
    list_param,
    str_param,
)
from workqueue.testing.gitlab_simulator.rebasing import (
    advance_rebase,
    rebase_in_progress,
    request_rebase,
)
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import MergeRequest, Project, SimulatorState
from workqueue.testing.gitlab_simulator.trains import refresh_trains

MR_STATES = ("opened", "closed", "merged", "locked", "all")
UPDATE_PARAMS = (
    "assignee_id",
    "assignee_ids",
    "reviewer_ids",
    "description",
    "labels",
    "add_labels",
    "remove_labels",
    "milestone_id",
    "remove_source_branch",
    "allow_collaboration",
    "allow_maintainer_to_push",
    "squash",
    "target_branch",
    "title",
    "state_event",
    "discussion_locked",
    "merge_after",
)


def _duplicate(project: Project, mr_source: str, mr_target: str, own_iid: int | None) -> None:
    """`validate_branches`: one open MR per source/target pair (409, message as an array)."""
    for other in project.merge_requests.values():
        if (
            other.state == "opened"
            and other.iid != own_iid
            and other.source_branch == mr_source
            and other.target_branch == mr_target
        ):
            raise conflict(
                [f"Another open merge request already exists for this source branch: !{other.iid}"]
            )


def _validation_error(field: str, message: str) -> ApiError:
    """`render_validation_error!`: 400 with the model's errors keyed by attribute."""
    return api_error(400, {field: [message]})


def _ids(request: Request, name: str) -> list[int] | None:
    values = list_param(request.params, name)
    if values is None:
        return None
    try:
        return [int(value) for value in values if int(value) != 0]
    except ValueError:
        raise param_error(f"{name} is invalid") from None


def _consume_check(state: SimulatorState, project: Project, mr: MergeRequest) -> None:
    # Each API read lets GitLab's background work make progress: a requested
    # rebase, then the mergeability check (unchecked, checking, approval rules syncing).
    advance_rebase(state, project, mr)
    if mr.unchecked_reads > 0:
        mr.unchecked_reads -= 1
    elif mr.checks_pending > 0:
        mr.checks_pending -= 1
    elif mr.approvals_syncing_reads > 0:
        mr.approvals_syncing_reads -= 1


def create_mr(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    params = request.params
    missing = [n for n in ("title", "source_branch", "target_branch") if n not in params]
    if missing:
        raise missing_params(*missing)
    title = str_param(params, "title") or ""
    source = str_param(params, "source_branch") or ""
    target = str_param(params, "target_branch") or ""
    if source == target:
        raise api_error(422, ["You can't use same project/branch for source and target"])
    if not title.strip():
        raise _validation_error("title", "can't be blank")
    repo = project.repository
    if source not in repo.branches:
        raise _validation_error("source_branch", "does not exist")
    if target not in repo.branches:
        raise _validation_error("target_branch", "does not exist")
    _duplicate(project, source, target, None)
    now = state.now()
    mr = MergeRequest(
        id=state.next_id("merge_request"),
        iid=project.next_mr_iid,
        project_id=project.id,
        title=title,
        description=str_param(params, "description") or "",
        source_branch=source,
        target_branch=target,
        author=request.current_user,
        created_at=now,
        updated_at=now,
        sha=repo.branches[source],
        labels=sorted(set(list_param(params, "labels") or [])),
        force_remove_source_branch=bool_param(params, "remove_source_branch") is True,
        squash=bool_param(params, "squash") is True,
        assignee_ids=_ids(request, "assignee_ids") or [],
        reviewer_ids=_ids(request, "reviewer_ids") or [],
    )
    project.next_mr_iid += 1
    project.merge_requests[mr.iid] = mr
    body = mr_entity(state, project, mr)
    # The diff is prepared right after the create response, as GitLab's worker would.
    mr.prepared_at = state.now()
    mr.checks_pending = state.checking_reads
    return json_response(body, status=201)


def get_mr(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    body = mr_entity(state, project, mr)
    if bool_param(request.params, "include_rebase_in_progress"):
        body["rebase_in_progress"] = rebase_in_progress(mr)
    if bool_param(request.params, "include_diverged_commits_count"):
        target = project.repository.branches.get(mr.target_branch)
        diverged = project.repository.log(target, exclude=mr.sha) if target else []
        body["diverged_commits_count"] = len(diverged)
    _consume_check(state, project, mr)
    return json_response(body)


def _label_filter(mr: MergeRequest, labels: list[str] | None) -> bool:
    if labels is None or not labels:
        return True
    if labels == ["None"]:
        return not mr.labels
    if labels == ["Any"]:
        return bool(mr.labels)
    return set(labels) <= set(mr.labels)


def _matches(mr: MergeRequest, request: Request) -> bool:
    params = request.params
    state_filter = str_param(params, "state") or "all"
    iids = _ids(request, "iids")
    wip = str_param(params, "wip")
    search = (str_param(params, "search") or "").lower()
    checks = [
        state_filter in {"all", mr.state},
        all(
            str_param(params, name) in {None, getattr(mr, name)}
            for name in ("source_branch", "target_branch")
        ),
        _label_filter(mr, list_param(params, "labels")),
        iids is None or mr.iid in iids,
        wip is None or mr.draft == (wip == "yes"),
        not search or search in mr.title.lower() or search in mr.description.lower(),
    ]
    return all(checks)


def list_mrs(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    if (str_param(request.params, "state") or "all") not in MR_STATES:
        raise param_error("state does not have a valid value")
    order_by = str_param(request.params, "order_by") or "created_at"
    if order_by not in {"created_at", "updated_at", "title"}:
        raise param_error("order_by does not have a valid value")
    descending = (str_param(request.params, "sort") or "desc") != "asc"
    found = [mr for mr in project.merge_requests.values() if _matches(mr, request)]
    found.sort(key=lambda mr: (getattr(mr, order_by), mr.id), reverse=descending)
    response = paginate(request, found)
    response.body = [mr_basic(state, project, mr) for mr in response.body]
    for mr in found:
        _consume_check(state, project, mr)
    return response


def _apply_state_event(
    state: SimulatorState, project: Project, mr: MergeRequest, event: str, request: Request
) -> None:
    user = request.current_user
    if event == "close" and mr.state == "opened":
        mr.state = "closed"
        mr.closed_at = state.now()
        mr.closed_by = user
        mr.merge_when_pipeline_succeeds = False
        state.add_system_note(mr, user, "closed")
    elif event == "reopen" and mr.state == "closed":
        if mr.source_branch not in project.repository.branches:
            return  # GitLab's `reopenable?` is false once the source branch is gone.
        _duplicate(project, mr.source_branch, mr.target_branch, mr.iid)
        mr.state = "opened"
        mr.closed_at = None
        mr.closed_by = None
        mr.sha = project.repository.branches[mr.source_branch]
        state.add_system_note(mr, user, "reopened")


def update_mr(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    params = request.params
    if not any(name in params for name in UPDATE_PARAMS):
        raise param_error(
            f"{', '.join(UPDATE_PARAMS)} are missing, at least one parameter must be provided"
        )
    event = str_param(params, "state_event")
    if event is not None and event not in {"close", "reopen"}:
        raise param_error("state_event does not have a valid value")
    for name in ("title", "target_branch"):
        if name in params and not (str_param(params, name) or "").strip():
            raise param_error(f"{name} is empty")
    target = str_param(params, "target_branch")
    if target is not None and target != mr.target_branch:
        if target not in project.repository.branches:
            raise _validation_error("target_branch", "does not exist")
        if mr.state == "opened":
            _duplicate(project, mr.source_branch, target, mr.iid)
        mr.target_branch = target
        mr.checks_pending = state.checking_reads
    _update_fields(mr, request)
    if event is not None:
        _apply_state_event(state, project, mr, event, request)
    mr.updated_at = state.now()
    return json_response(mr_entity(state, project, mr))


def _update_fields(mr: MergeRequest, request: Request) -> None:
    params = request.params
    if (title := str_param(params, "title")) is not None:
        mr.title = title
    if (description := str_param(params, "description")) is not None:
        mr.description = description
    if (labels := list_param(params, "labels")) is not None:
        mr.labels = sorted(set(labels))
    if (added := list_param(params, "add_labels")) is not None:
        mr.labels = sorted(set(mr.labels) | set(added))
    if (removed := list_param(params, "remove_labels")) is not None:
        mr.labels = sorted(set(mr.labels) - set(removed))
    if (remove_source := bool_param(params, "remove_source_branch")) is not None:
        mr.force_remove_source_branch = remove_source
    if (squash := bool_param(params, "squash")) is not None:
        mr.squash = squash
    if (assignees := _ids(request, "assignee_ids")) is not None:
        mr.assignee_ids = assignees
    if (reviewers := _ids(request, "reviewer_ids")) is not None:
        mr.reviewer_ids = reviewers


def merge_mr(state: SimulatorState, request: Request) -> Response:
    """`PUT …/merge`: 405 before 422 before the sha check (409), as in the current code.

    On a project with merge trains, merging at once skips the train: refused (405)
    unless the project allows skipping it (`merge_trains_skip_train_allowed`).
    """
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    params = request.params
    if project.merge_trains_enabled and not project.merge_trains_skip_train_allowed:
        raise not_allowed()
    auto = bool(bool_param(params, "merge_when_pipeline_succeeds")) or bool(
        bool_param(params, "auto_merge")
    )
    pipeline = head_pipeline(state, project, mr)
    status = pipeline_status(state, pipeline) if pipeline is not None else None
    state_failure = state_check(state, project, mr)
    automatically = (
        auto and status in ACTIVE_STATUSES and state_check(state, project, mr, skip_ci=True) is None
    )
    immediately = status == "success" if auto else state_failure is None
    if not immediately and not automatically:
        raise not_allowed()
    if not automatically and (state_failure is not None or git_check(project, mr) is not None):
        raise api_error(422, "Branch cannot be merged")
    sha = str_param(params, "sha")
    if sha and sha != mr.sha:
        raise conflict(f"SHA does not match HEAD of source branch: {mr.sha}")
    if bool_param(params, "squash"):
        mr.squash = True
    merge_params: dict[str, Any] = {
        "merge_commit_message": str_param(params, "merge_commit_message"),
        "squash_commit_message": str_param(params, "squash_commit_message"),
        "should_remove_source_branch": bool_param(params, "should_remove_source_branch"),
        "sha": sha or mr.sha,
    }
    user = request.current_user
    if immediately:
        perform_merge(state, project, mr, user, merge_params)
        refresh_trains(state, project)  # a car of this MR is now skip_merged
    else:
        mr.merge_when_pipeline_succeeds = True
        mr.merge_user = user
        mr.auto_merge_params = merge_params
        if merge_params["should_remove_source_branch"] is not None:
            mr.should_remove_source_branch = merge_params["should_remove_source_branch"]
        mr.updated_at = state.now()
        state.add_system_note(mr, user, "enabled an automatic merge when the pipeline succeeds")
    return json_response(mr_entity(state, project, mr))


def cancel_auto_merge(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    if not mr.merge_when_pipeline_succeeds:
        raise api_error(406, "406 Not Acceptable")
    mr.merge_when_pipeline_succeeds = False
    mr.merge_user = None
    mr.auto_merge_params = {}
    state.add_system_note(mr, request.current_user, "canceled the automatic merge")
    return json_response(mr_entity(state, project, mr), status=201)


def rebase_mr(state: SimulatorState, request: Request) -> Response:
    """Enqueues the rebase (`rebasing`): 202 `{"rebase_in_progress": true}`, as GitLab."""
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    if mr.source_branch not in project.repository.branches:
        raise forbidden("Source branch does not exist")
    if project.is_protected(mr.source_branch):
        raise forbidden("Cannot push to source branch")
    if rebase_in_progress(mr):
        # `rebase_async` takes the MR's lock; a second request while one runs fails so.
        raise conflict(
            "Failed to enqueue the rebase operation, possibly due to a long-lived "
            "transaction. Try again later."
        )
    request_rebase(state, project, mr, request.current_user)
    return json_response({"rebase_in_progress": True}, status=202)


def mr_changes(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    body = mr_entity(state, project, mr)
    body["changes"] = [d.as_json() for d in mr_diffs(project, mr)]
    body["overflow"] = False
    return json_response(body)


def mr_diffs_list(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    return paginate(request, [d.as_json() for d in mr_diffs(project, mr)])


def mr_commits(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    repo = project.repository
    target = repo.branches.get(mr.target_branch)
    commits = repo.log(mr.sha, exclude=target)
    return paginate(request, [commit_entity(state, project, c) for c in commits])


def mr_pipelines(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    repo = project.repository
    found = [
        p
        for p in state.pipelines.values()
        if p.project_id == project.id
        and (
            p.merge_request_iid == mr.iid
            or (p.ref == mr.source_branch and repo.is_ancestor(p.sha, mr.sha))
        )
    ]
    found.sort(key=lambda p: p.id, reverse=True)
    return paginate(request, [pipeline_basic(state, p) for p in found])


def register(router: Router) -> None:
    base = "/projects/:id/merge_requests"
    item = f"{base}/:merge_request_iid"
    router.add("GET", base, list_mrs)
    router.add("POST", base, create_mr)
    router.add("GET", item, get_mr)
    router.add("PUT", item, update_mr)
    router.add("PUT", f"{item}/merge", merge_mr)
    router.add("POST", f"{item}/cancel_merge_when_pipeline_succeeds", cancel_auto_merge)
    router.add("PUT", f"{item}/rebase", rebase_mr)
    router.add("GET", f"{item}/changes", mr_changes)
    router.add("GET", f"{item}/diffs", mr_diffs_list)
    router.add("GET", f"{item}/commits", mr_commits)
    router.add("GET", f"{item}/pipelines", mr_pipelines)
