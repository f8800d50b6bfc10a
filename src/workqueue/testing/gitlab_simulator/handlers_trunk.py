"""Routes post-merge validation uses: trigger a pipeline, read its variables, merge base.

`POST /projects/:id/pipeline` (`lib/api/ci/pipelines.rb`): `ref` required, optional
`variables` as `[{"key", "value", "variable_type"}]`; the pipeline runs on the ref's
head with source `api` and answers 201 with the pipeline. An unknown ref is 400
`{"message": {"base": ["Reference not found"]}}`.

`GET /projects/:id/pipelines/:pipeline_id/variables`: the trigger's variables as
`[{"key", "variable_type", "value", "raw"}]`.

`GET /projects/:id/repository/merge_base?refs[]=a&refs[]=b` (`lib/api/repositories.rb`):
200 with the commit; fewer than two refs is 400; an unknown ref is 400
`Could not find ref: x`; no common ancestor is 404 `404 Merge Base Not Found`.
"""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.entities import commit_entity, pipeline_entity
from workqueue.testing.gitlab_simulator.errors import api_error, missing_params, not_found
from workqueue.testing.gitlab_simulator.params import list_param, str_param
from workqueue.testing.gitlab_simulator.repository import ZERO_SHA
from workqueue.testing.gitlab_simulator.routing import Request, Response, Router, json_response
from workqueue.testing.gitlab_simulator.state import Pipeline, SimulatorState

_VARIABLE_TYPES = frozenset({"env_var", "file"})


def trigger_pipeline(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    ref = str_param(request.params, "ref")
    if not ref:
        raise missing_params("ref")
    sha = project.repository.branches.get(ref)
    if sha is None:
        raise api_error(400, {"base": ["Reference not found"]})
    variables = _variables(request.params.get("variables"))
    commit = project.repository.commits[sha]
    now = state.now()
    pipeline = Pipeline(
        id=state.next_id("pipeline"),
        iid=project.next_pipeline_iid,
        project_id=project.id,
        sha=sha,
        before_sha=commit.parent_ids[0] if commit.parent_ids else ZERO_SHA,
        ref=ref,
        source="api",
        user=request.current_user,
        created_at=now,
        updated_at=now,
        variables=variables,
    )
    project.next_pipeline_iid += 1
    state.add_pipeline(pipeline)
    return json_response(pipeline_entity(state, pipeline), status=201)


def _variables(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise api_error(400, "variables is invalid")
    variables = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise api_error(400, "variables is invalid")
        variable_type = entry.get("variable_type") or "env_var"
        if variable_type not in _VARIABLE_TYPES:
            raise api_error(400, "variables[variable_type] does not have a valid value")
        value = "" if entry.get("value") is None else str(entry["value"])
        variables.append({"key": entry["key"], "value": value, "type": variable_type})
    return variables


def pipeline_variables(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    pipeline = lookups.pipeline(state, project, request)
    return json_response(
        [
            {
                "key": variable["key"],
                "variable_type": variable["type"],
                "value": variable["value"],
                "raw": False,
            }
            for variable in pipeline.variables
        ]
    )


def merge_base(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    refs = list_param(request.params, "refs") or []
    if len(refs) < 2:
        raise api_error(400, "Provide at least 2 refs")
    repo = project.repository
    resolved = [repo.resolve(ref, project.mr_heads()) for ref in refs]
    unknown = [ref for ref, sha in zip(refs, resolved, strict=True) if sha is None]
    if unknown:
        noun = "ref" if len(unknown) == 1 else "refs"
        raise api_error(400, f"Could not find {noun}: {', '.join(unknown)}")
    base: str | None = resolved[0]
    for sha in resolved[1:]:
        if base is None or sha is None:
            break
        base = repo.merge_base(base, sha)
    if base is None:
        raise not_found("Merge Base")
    return json_response(commit_entity(state, project, repo.commits[base]))


def register(router: Router) -> None:
    router.add("POST", "/projects/:id/pipeline", trigger_pipeline)
    router.add("GET", "/projects/:id/pipelines/:pipeline_id/variables", pipeline_variables)
    router.add("GET", "/projects/:id/repository/merge_base", merge_base)
