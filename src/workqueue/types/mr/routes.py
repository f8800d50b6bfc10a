"""Routes of the `mr` type: submit (upsert by branch) and list with MR filters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from workqueue.api.deps import (
    CallerDep,
    FilterText,
    Runtime,
    RuntimeDep,
    require,
)
from workqueue.api.quotas import (
    holding_limits_of,
    owner_of,
)
from workqueue.api.routes.work_items import page_body
from workqueue.api.schemas import SubmitResponse, WorkItemPage, error_responses
from workqueue.api.submissions import IdempotencyKeyHeader, Stored, submit_item
from workqueue.queue import (
    MAX_PAGE_SIZE,
    Phase,
    Submitter,
    read_repository,
)
from workqueue.types.mr import repository as mr_repository
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.models import MR_ITEM_TYPE
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import OwnershipConflictError, SubmissionRejectedError, submit_mr
from workqueue.types.mr.validation.policy import check_submission

router = APIRouter(prefix="/api/work-items/mr", tags=["mr"])


def _mr_config(runtime: Runtime) -> MRTypeConfig:
    if MR_ITEM_TYPE not in runtime.registry:
        raise HTTPException(status_code=404, detail="this service does not handle mr items")
    config = runtime.registry.get(MR_ITEM_TYPE).config
    assert isinstance(config, MRTypeConfig)  # noqa: S101 - set by install_mr
    return config


@router.post(
    "",
    status_code=201,
    response_model=SubmitResponse,
    responses={
        200: {"model": SubmitResponse, "description": "existing item (see outcome)"},
        **error_responses(
            401,
            403,
            404,
            408,
            409,
            413,
            429,
            502,
            descriptions={
                404: "This service does not handle mr items",
                409: "Another caller's item is live for this project and branch",
                502: "GitLab failed while resolving the project; nothing was stored",
            },
        ),
    },
)
def submit(
    body: MRWorkItemCreate,
    response: Response,
    runtime: RuntimeDep,
    caller: CallerDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> SubmitResponse:
    """Submit the desired state of a branch; created, unchanged, updated or retried.

    With an `Idempotency-Key`, a resend of the same body by the same caller
    within 24 h answers as the first time and does nothing else."""
    config = _mr_config(runtime)

    def validate() -> None:
        # Pure content rules: an invalid body costs no GitLab call at all.
        violations = check_submission(body, config)
        if violations:
            raise RequestValidationError([v.as_error() for v in violations])

    def prepare(project_path: str) -> Callable[[Session], Stored]:
        # Rules that need the project's own settings (its CI configuration file), read
        # once the caller is allowed on it; a GitLab failure answers 502 like the
        # resolution.
        project_check = runtime.registry.get(MR_ITEM_TYPE).project_submission_check
        if project_check is not None and (errors := project_check(body.project, body)):
            raise RequestValidationError(errors)
        submitter = Submitter(
            issuer=caller.issuer_key, identity=caller.identity, owner=owner_of(runtime, caller)
        )
        limits = holding_limits_of(runtime)

        def store(session: Session) -> Stored:
            result = submit_mr(
                session,
                body,
                submitter=submitter,
                config=config,
                project_path=project_path,
                limits=limits,
            )
            return Stored(
                result.item,
                result.outcome,
                audit_details={"content_hash": result.item.content_hash},
            )

        return store

    try:
        return submit_item(
            runtime,
            caller,
            response,
            item_type=MR_ITEM_TYPE,
            body=body,
            project=body.project,
            idempotency_key=idempotency_key,
            prepare=prepare,
            validate=validate,
        )
    except SubmissionRejectedError as rejection:
        raise RequestValidationError([v.as_error() for v in rejection.violations]) from None
    except OwnershipConflictError as conflict:
        raise HTTPException(status_code=409, detail=str(conflict)) from None


@router.get(
    "",
    response_model=WorkItemPage,
    responses=error_responses(
        401, 403, 404, descriptions={404: "This service does not handle mr items"}
    ),
)
def list_mr_items(
    runtime: RuntimeDep,
    caller: CallerDep,
    project: FilterText = None,
    package: FilterText = None,
    source_branch: FilterText = None,
    phase: Phase | None = None,
    caller_identity: FilterText = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
    cursor: FilterText = None,
) -> Response:
    """MR items, newest first, filtered on any of the given fields."""
    _mr_config(runtime)
    require(runtime, caller, "read", MR_ITEM_TYPE)
    visible = read_repository.visible_to(runtime.gatekeeper.visibility(caller, "read"))
    return page_body(
        runtime,
        lambda session: mr_repository.list_mr_rows(
            session,
            project=project,
            package=package,
            source_branch=source_branch,
            phase=phase,
            caller_identity=caller_identity,
            visible=visible,
            limit=limit,
            cursor=cursor,
        ),
    )
