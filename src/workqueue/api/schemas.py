"""Response bodies of the HTTP API (the "Item body" of the public contract)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from workqueue.queue.models import WorkItem, WorkItemStatus
from workqueue.queue.read_repository import ListedRow


class DimensionBody(BaseModel):
    dimension: str
    variant: str
    status: str
    pending_until: datetime | None
    updated_at: datetime


class WorkItemBody(BaseModel):
    id: uuid.UUID
    item_type: str
    phase: str
    actionable: bool
    attempts: int
    error: str | None
    caller_identity: str
    caller_issuer: str | None = Field(
        None, description="where caller_identity comes from: a JWT issuer, openshift or local"
    )
    idempotency_key: str | None
    generation: int
    leased_until: datetime | None
    next_attempt_at: datetime | None
    last_event_at: datetime | None
    created_at: datetime
    updated_at: datetime
    contents_dropped_at: datetime | None = Field(
        None,
        description="when retention (`retention.content_days`) dropped the finished item's "
        "contents: its file actions then read as in lists (size and sha256, no content), "
        "an mr item's description is null and its commit_message empty",
    )
    dimensions: list[DimensionBody] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict, description="type-specific fields")


class SubmitResponse(WorkItemBody):
    outcome: str = Field(description="created | unchanged | updated | retried")


class WorkItemPage(BaseModel):
    items: list[WorkItemBody]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page")


class CancelRequest(BaseModel):
    # Strict: `"yes"` or `1` is not a decision to close an MR on GitLab.
    model_config = ConfigDict(extra="forbid", strict=True)

    close_mr: StrictBool = Field(default=False, description="also close the item's MR on GitLab")


class TokenBody(BaseModel):
    token: str


def item_body(item: WorkItem, dimensions: list[WorkItemStatus]) -> WorkItemBody:
    return WorkItemBody(
        id=item.id,
        item_type=item.item_type,
        phase=str(item.phase),
        actionable=item.actionable,
        attempts=item.attempts,
        error=item.error,
        caller_identity=item.caller_identity,
        caller_issuer=item.caller_issuer,
        idempotency_key=item.idempotency_key,
        generation=item.generation,
        leased_until=item.leased_until,
        next_attempt_at=item.next_attempt_at,
        last_event_at=item.last_event_at,
        created_at=item.created_at,
        updated_at=item.updated_at,
        contents_dropped_at=item.contents_dropped_at,
        dimensions=[
            DimensionBody(
                dimension=row.dimension,
                variant=row.variant,
                status=str(row.status),
                pending_until=row.pending_until,
                updated_at=row.updated_at,
            )
            for row in dimensions
        ],
        details=details_of(item),
    )


def details_of(item: WorkItem) -> dict[str, Any]:
    """The columns of the item's own detail table (joined inheritance), by name."""
    mapper = sa.inspect(type(item))
    base_columns = set(sa.inspect(WorkItem).column_attrs.keys())
    return {
        attribute.key: getattr(item, attribute.key)
        for attribute in mapper.column_attrs
        if attribute.key not in base_columns
    }


# -- the list form ------------------------------------------------------------------------


def listed_item_body(item: WorkItem, dimensions: list[WorkItemStatus]) -> WorkItemBody:
    """The form list answers use: `item_body` without file contents.

    Each `details.file_actions[]` entry keeps its other fields and gets
    `previous_path` and `encoding` (null when absent), `size` and `sha256` of
    the decoded content (null without content) instead of `content`: a page
    of 500 items stays small whatever the items carry.
    """
    body = item_body(item, dimensions)
    actions = body.details.get("file_actions")
    if isinstance(actions, list):
        body.details = {
            **body.details,
            "file_actions": [
                _listed_file_action(action) if isinstance(action, Mapping) else action
                for action in actions
            ],
        }
    return body


def listed_item_json(row: ListedRow) -> dict[str, Any]:
    """`listed_item_body` from a plain row, as JSON-ready values in the same field order.

    Lists serialise these with `pydantic_core.to_json`, the serializer the
    models use, so a listed item reads exactly like `listed_item_body`'s
    (a test compares them); the models stay the schema in OpenAPI.
    """
    item = row.item
    details = row.details
    actions = details.get("file_actions")
    if isinstance(actions, list):
        details = {
            **details,
            "file_actions": [
                _listed_file_action(action) if isinstance(action, Mapping) else action
                for action in actions
            ],
        }
    return {
        **{name: item[name] for name in _ITEM_FIELDS},
        "phase": str(item["phase"]),
        "dimensions": [
            {
                "dimension": dimension["dimension"],
                "variant": dimension["variant"],
                "status": str(dimension["status"]),
                "pending_until": dimension["pending_until"],
                "updated_at": dimension["updated_at"],
            }
            for dimension in row.dimensions
        ],
        "details": details,
    }


_ITEM_FIELDS = tuple(
    name for name in WorkItemBody.model_fields if name not in {"dimensions", "details"}
)


def _listed_file_action(action: Mapping[str, Any]) -> dict[str, Any]:
    listed = {key: value for key, value in action.items() if key != "content"}
    listed.setdefault("previous_path", None)
    listed.setdefault("encoding", None)
    if "content" not in action and "sha256" in action:
        return listed  # retention dropped the content and kept its size and sha256
    data = _decoded_content(action.get("content"), action.get("encoding"))
    listed["size"] = None if data is None else len(data)
    listed["sha256"] = None if data is None else hashlib.sha256(data).hexdigest()
    return listed


def _decoded_content(content: Any, encoding: Any) -> bytes | None:
    if not isinstance(content, str):
        return None
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            return None  # stored items passed the policy's check: not expected
    return content.encode("utf-8")


# -- error answers, as OpenAPI declares them -------------------------------------------------


class ErrorBody(BaseModel):
    """Every error answer except 422 (FastAPI's validation shape): what went wrong."""

    detail: str


ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The body is not valid (strict) JSON",
    401: "No valid credentials (`WWW-Authenticate: Bearer`); answered before the body is read",
    403: "No authorization rule grants the permission",
    404: "No such item, or an item type this service does not handle",
    408: "The body did not arrive within the body-read timeout; the connection is closed",
    409: "The item's phase or owner does not allow it",
    413: "The body is over the size limit",
    429: "Over a per-caller limit; try again after `Retry-After` seconds",
    502: "GitLab failed during the request; nothing was changed",
    503: "The database is unavailable",
}
_ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}},
    429: {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
    503: {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
}


def error_responses(
    *statuses: int, descriptions: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """A route's `responses=` for these error statuses, each with the `ErrorBody` model."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        declared[status] = {
            "model": ErrorBody,
            "description": (descriptions or {}).get(status, ERROR_DESCRIPTIONS[status]),
        }
        if status in _ERROR_HEADERS:
            declared[status]["headers"] = _ERROR_HEADERS[status]
    return declared
