"""Project, branch, commit, compare and file routes (`lib/api/{projects,branches,commits,
repositories,files}.rb`)."""

from __future__ import annotations

import base64
import hashlib
import re

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.actions import (
    apply_actions,
    check_last_commit_ids,
    validate_commit_params,
)
from workqueue.testing.gitlab_simulator.diffs import diff_trees
from workqueue.testing.gitlab_simulator.entities import (
    branch_entity,
    commit_detail,
    commit_diffs,
    commit_entity,
    project_entity,
    project_url,
)
from workqueue.testing.gitlab_simulator.errors import (
    api_error,
    forbidden,
    missing_params,
    not_found,
)
from workqueue.testing.gitlab_simulator.params import bool_param, str_param
from workqueue.testing.gitlab_simulator.repository import (
    Commit,
    Signature,
    is_valid_branch_name,
)
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import Project, SimulatorState

_FULL_SHA = re.compile(r"[0-9a-f]{40}")


def _resolve(project: Project, ref: str) -> str | None:
    if ref == "HEAD":
        return project.repository.branches.get(project.default_branch)
    return project.repository.resolve(ref, project.mr_heads())


def get_project(state: SimulatorState, request: Request) -> Response:
    return json_response(project_entity(state, lookups.project(state, request)))


def list_branches(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    search = (str_param(request.params, "search") or "").lower()
    names = sorted(name for name in project.repository.branches if search in name.lower())
    return paginate(request, [branch_entity(state, project, name) for name in names])


def get_branch(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    name = request.path_params["branch"]
    if name not in project.repository.branches:
        raise not_found("Branch")
    return json_response(branch_entity(state, project, name))


def create_branch(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    missing = [name for name in ("branch", "ref") if not str_param(request.params, name)]
    if missing:
        raise missing_params(*missing)
    name = str(str_param(request.params, "branch"))
    ref = str(str_param(request.params, "ref"))
    if not is_valid_branch_name(name):
        raise api_error(400, "Branch name is invalid")
    if name in project.repository.branches:
        raise api_error(400, "Branch already exists")
    sha = _resolve(project, ref)
    if sha is None:
        raise api_error(400, f"Invalid reference name: {ref}")
    state.set_branch(project, name, sha, request.current_user)
    return json_response(branch_entity(state, project, name), status=201)


def delete_branch(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    name = request.path_params["branch"]
    if name not in project.repository.branches:
        raise not_found("Branch")
    if name == project.default_branch:
        raise api_error(405, "The default branch of a project cannot be deleted.")
    if project.is_protected(name):
        raise api_error(405, "You dont have push access to repo")
    state.set_branch(project, name, None, request.current_user)
    return Response(status=204)


def list_commits(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    ref = str_param(request.params, "ref_name") or project.default_branch
    sha = _resolve(project, ref)
    commits = project.repository.log(sha) if sha is not None else []
    path = str_param(request.params, "path")
    if path:
        commits = [c for c in commits if _touches(project, c, path)]
    entities = [commit_entity(state, project, commit) for commit in commits]
    return paginate(request, entities, include_totals=False)


def _touches(project: Project, commit: Commit, path: str) -> bool:
    return any(path in {d.new_path, d.old_path} for d in commit_diffs(project, commit))


def _commit_or_404(project: Project, ref: str) -> Commit:
    sha = _resolve(project, ref)
    if sha is None:
        raise not_found("Commit")
    return project.repository.commits[sha]


def get_commit(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    commit = _commit_or_404(project, request.path_params["sha"])
    stats = bool_param(request.params, "stats")
    return json_response(commit_detail(state, project, commit, stats=stats is not False))


def get_commit_diff(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    commit = _commit_or_404(project, request.path_params["sha"])
    return paginate(request, [d.as_json() for d in commit_diffs(project, commit)])


def _start_commit(project: Project, request: Request, branch: str) -> str | None:
    """The commit the new one builds on, enforcing `Commits::CreateService#validate!`."""
    repo = project.repository
    start_sha = str_param(request.params, "start_sha")
    start_branch = str_param(request.params, "start_branch")
    force = bool_param(request.params, "force") is True
    if start_sha is not None:
        if not _FULL_SHA.fullmatch(start_sha):
            raise api_error(400, f"Invalid start_sha '{start_sha}'")
        if start_sha not in repo.commits:
            raise api_error(400, f"Cannot find start_sha '{start_sha}'")
    else:
        start_branch = start_branch or branch
        if not repo.empty and start_branch not in repo.branches:
            raise api_error(400, "You can only create or edit files when you are on a branch")
    if start_branch != branch and branch in repo.branches and not force:
        raise api_error(
            400,
            f"A branch called '{branch}' already exists. "
            "Switch to that branch in order to make changes",
        )
    if branch not in repo.branches and not is_valid_branch_name(branch):
        raise api_error(
            400,
            f"Something went wrong when we tried to create '{branch}' for you: "
            "Branch name is invalid",
        )
    if start_sha is not None:
        return start_sha
    return repo.branches.get(str(start_branch))


def create_commit(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    user = request.current_user
    branch = str_param(request.params, "branch") or ""
    if branch and project.is_protected(branch):
        raise forbidden("You are not allowed to push into this branch")
    actions = validate_commit_params(request.params)
    parent = _start_commit(project, request, branch)
    repo = project.repository
    check_last_commit_ids(repo, parent, actions)
    tree = apply_actions(repo.commits[parent].tree if parent else {}, actions)
    author = Signature(
        str_param(request.params, "author_name") or user.name,
        str_param(request.params, "author_email") or user.email,
    )
    commit = repo.create_commit(
        tree=tree,
        parent_ids=(parent,) if parent else (),
        message=str(request.params["commit_message"]),
        author=author,
        committer=user.signature,
        when=state.now(),
    )
    state.set_branch(project, branch, commit.id, user)
    stats = bool_param(request.params, "stats") is not False
    return json_response(commit_detail(state, project, commit, stats=stats), status=201)


def compare(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    missing = [name for name in ("from", "to") if not str_param(request.params, name)]
    if missing:
        raise missing_params(*missing)
    source, target = str(request.params["from"]), str(request.params["to"])
    from_sha, to_sha = _resolve(project, source), _resolve(project, target)
    if from_sha is None or to_sha is None:
        raise not_found("Ref")
    repo = project.repository
    same = from_sha == to_sha
    commits = [] if same else list(reversed(repo.log(to_sha, exclude=from_sha)))
    if same:
        diffs = []
    else:
        straight = bool_param(request.params, "straight") is True
        base = from_sha if straight else repo.merge_base(from_sha, to_sha)
        base_tree = repo.commits[base].tree if base is not None else {}
        diffs = diff_trees(base_tree, repo.commits[to_sha].tree)
    entities = [commit_entity(state, project, commit) for commit in commits]
    return json_response(
        {
            "commit": entities[-1] if entities else None,
            "commits": entities,
            "diffs": [d.as_json() for d in diffs],
            "compare_timeout": False,
            "compare_same_ref": same,
            "web_url": f"{project_url(state, project)}/-/compare/{source}...{target}",
        }
    )


def _file_lookup(project: Project, request: Request, ref: str) -> tuple[str, str]:
    sha = _resolve(project, ref)
    if sha is None:
        raise not_found("Commit")
    path = request.path_params["file_path"]
    if path not in project.repository.commits[sha].tree:
        raise not_found("File")
    return sha, path


def get_file(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    ref = str_param(request.params, "ref")
    if not ref:
        raise missing_params("ref")
    sha, path = _file_lookup(project, request, ref)
    entry = project.repository.commits[sha].tree[path]
    body = {
        "file_name": path.rsplit("/", 1)[-1],
        "file_path": path,
        "size": len(entry.content),
        "encoding": "base64",
        "content_sha256": hashlib.sha256(entry.content).hexdigest(),
        "ref": ref,
        "blob_id": entry.blob_id,
        "commit_id": sha,
        "last_commit_id": project.repository.last_commit_for_path(sha, path),
        "execute_filemode": entry.executable,
        "content": base64.b64encode(entry.content).decode("ascii"),
    }
    headers = {
        f"X-Gitlab-{key.replace('_', '-').title()}": str(value)
        for key, value in body.items()
        if key != "content"
    }
    return json_response(body, headers=headers)


def get_raw_file(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    sha, path = _file_lookup(project, request, str_param(request.params, "ref") or "HEAD")
    content = project.repository.commits[sha].tree[path].content
    return Response(status=200, body=content, content_type="text/plain; charset=utf-8")


def register(router: Router) -> None:
    router.add("GET", "/projects/:id", get_project)
    router.add("GET", "/projects/:id/repository/branches", list_branches)
    router.add("POST", "/projects/:id/repository/branches", create_branch)
    router.add("GET", "/projects/:id/repository/branches/:branch", get_branch)
    router.add("DELETE", "/projects/:id/repository/branches/:branch", delete_branch)
    router.add("GET", "/projects/:id/repository/commits", list_commits)
    router.add("POST", "/projects/:id/repository/commits", create_commit)
    router.add("GET", "/projects/:id/repository/commits/:sha", get_commit)
    router.add("GET", "/projects/:id/repository/commits/:sha/diff", get_commit_diff)
    router.add("GET", "/projects/:id/repository/compare", compare)
    router.add("GET", "/projects/:id/repository/files/:file_path", get_file)
    router.add("GET", "/projects/:id/repository/files/:file_path/raw", get_raw_file)
