"""Routes of the `trunk` type: manual ingest of a landed head, and the queues' state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, HTTPException, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
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
from workqueue.api.schemas import SubmitResponse, error_responses
from workqueue.api.submissions import IdempotencyKeyHeader, Stored, submit_item
from workqueue.db.transactions import run_in_transaction
from workqueue.project_patterns import path_matches
from workqueue.queue import (
    Submitter,
    VisibilityGrant,
    check_new_live_item,
)
from workqueue.types.trunk import repository as trunk_repository
from workqueue.types.trunk.config import TrunkQueueConfig, TrunkTypeConfig
from workqueue.types.trunk.install import InstalledTrunk
from workqueue.types.trunk.landed_heads import ingest_head
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE

router = APIRouter(tags=["trunk"])

_Text = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^\x00]*$")]


class TrunkHeadCreate(BaseModel):
    """A landed head to validate, as a Push Hook would report it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    project: _Text = Field(description="the queue's project (path, or numeric id as a string)")
    branch: _Text = Field(description="the queue's branch")
    sha: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")] = Field(
        description="the full 40-hex commit sha of the head"
    )


class TrunkQueueBody(BaseModel):
    name: str
    project: str
    branch: str
    max_concurrent: int
    in_flight: int
    last_green_sha: str | None
    last_green_item_id: str | None
    latest_item_id: str | None


class TrunkQueuePage(BaseModel):
    items: list[TrunkQueueBody]
    next_cursor: str | None = None


def _installed(runtime: Runtime) -> InstalledTrunk:
    if TRUNK_ITEM_TYPE not in runtime.registry:
        raise HTTPException(status_code=404, detail="this service does not handle trunk items")
    installed = runtime.registry.get(TRUNK_ITEM_TYPE).config
    assert isinstance(installed, InstalledTrunk)  # noqa: S101 - set by install_trunk
    return installed


def _trunk_config(runtime: Runtime) -> TrunkTypeConfig:
    return _installed(runtime).config


def _require_branch_head(installed: InstalledTrunk, queue: TrunkQueueConfig, sha: str) -> None:
    """422 on the sha unless it is the branch's head now (one GitLab read; a GitLab error
    answers 502): a caller cannot name a commit that never landed, or one that did
    but is not the newest, so nothing it names is built on the protected branch."""
    head = installed.read_head(queue)
    if head == sha:
        return
    problem = (
        f"branch {queue.branch} of {queue.project} does not exist"
        if head is None
        else f"{sha} is not the current head of {queue.branch} in {queue.project}"
    )
    raise RequestValidationError(
        [{"loc": ("body", "sha"), "msg": problem, "type": "not_branch_head", "input": sha}]
    )


@router.post(
    "/api/work-items/trunk",
    status_code=201,
    response_model=SubmitResponse,
    responses={
        200: {"model": SubmitResponse, "description": "the head is known: its item"},
        **error_responses(
            401,
            403,
            404,
            408,
            413,
            429,
            502,
            descriptions={
                404: "This service does not handle trunk items",
                502: "GitLab failed while reading the branch head; nothing was stored",
            },
        ),
    },
)
def ingest(
    body: TrunkHeadCreate,
    response: Response,
    runtime: RuntimeDep,
    caller: CallerDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> SubmitResponse:
    """Ingest a landed head by hand: 201 with a new item, 200 with the existing one.
    The sha must be the branch's current head on GitLab (else 422 on `sha`). With an
    `Idempotency-Key`, a resend within 24 h answers as the first time (the head
    need not be current any more) and does nothing else."""
    config = _trunk_config(runtime)

    def prepare(project_path: str) -> Callable[[Session], Stored]:
        queue = config.queue(project_path, body.branch) or config.queue(body.project, body.branch)
        if queue is None:
            raise RequestValidationError(
                [
                    {
                        "loc": ("body", "branch"),
                        "msg": f"no trunk queue is configured for {body.project} "
                        f"branch {body.branch}",
                        "type": "value_error",
                        "input": body.branch,
                    }
                ]
            )
        _require_branch_head(_installed(runtime), queue, body.sha)
        submitter = Submitter(issuer=caller.issuer_key, identity=caller.identity)
        owner, limits = owner_of(runtime, caller), holding_limits_of(runtime)

        def store(session: Session) -> Stored:
            outcome = ingest_head(session, queue, body.sha, submitter=submitter)
            if outcome.created:
                # Checked once the queue knows the head is new (a known head answers
                # 200 at any count); a refusal rolls the new item back.
                outcome.item.limit_key = owner.limit_key
                session.flush()
                check_new_live_item(
                    session,
                    owner,
                    queue.project,
                    limits,
                    content_bytes=0,
                    other_than=outcome.item.id,
                )
            session.refresh(outcome.item)
            return Stored(
                outcome.item,
                "created" if outcome.created else "unchanged",
                audit_details={"queue": queue.name, "sha": body.sha},
            )

        return store

    return submit_item(
        runtime,
        caller,
        response,
        item_type=TRUNK_ITEM_TYPE,
        body=body,
        project=body.project,
        idempotency_key=idempotency_key,
        prepare=prepare,
    )


@router.get(
    "/api/trunk/queues",
    response_model=TrunkQueuePage,
    responses=error_responses(
        401, 403, 404, descriptions={404: "This service does not handle trunk items"}
    ),
)
def list_queues(
    runtime: RuntimeDep,
    caller: CallerDep,
    project: FilterText = None,
    branch: FilterText = None,
) -> TrunkQueuePage:
    """The configured queues the caller may read, with their slots and last green head."""
    config = _trunk_config(runtime)
    require(runtime, caller, "read", TRUNK_ITEM_TYPE)
    grants = runtime.gatekeeper.visibility(caller, "read")
    queues = [
        queue
        for queue in config.queues
        if (project is None or queue.project == project)
        and (branch is None or queue.branch == branch)
        and _visible(grants, queue.project)
    ]
    rows = run_in_transaction(
        runtime.sessions,
        lambda session: trunk_repository.queue_rows(session, [q.name for q in queues]),
    )
    items = []
    for queue in queues:
        row = rows.get(queue.name)
        items.append(
            TrunkQueueBody(
                name=queue.name,
                project=queue.project,
                branch=queue.branch,
                max_concurrent=queue.max_concurrent,
                in_flight=0 if row is None else row.in_flight,
                last_green_sha=None if row is None else row.last_green_sha,
                last_green_item_id=_text(None if row is None else row.last_green_item_id),
                latest_item_id=_text(None if row is None else row.latest_item_id),
            )
        )
    return TrunkQueuePage(items=items)


def _visible(grants: Sequence[VisibilityGrant], project: str) -> bool:
    """Whether a read grant reaches trunk items of this project (as lists are scoped)."""
    for grant in grants:
        if grant.item_types is not None and TRUNK_ITEM_TYPE not in grant.item_types:
            continue
        if grant.project_regexes is None:
            return True
        if path_matches(grant.project_regexes, project):
            return True
    return False


def _text(value: object) -> str | None:
    return None if value is None else str(value)
