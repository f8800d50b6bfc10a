"""What the templates show, derived from the API's bodies: no database, no item-type imports.

Details are read by well-known field names (`title`, `source_branch`,
`mr_url`, `merge_blocker`, ...) that any type may carry; a missing field is
shown as nothing, never as `None`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from workqueue.api.schemas import DimensionBody, WorkItemBody

# Fields shown elsewhere on the item page, or too large to print as a value.
_SHOWN_APART = frozenset(
    {"merge_blocker", "file_actions", "description", "mr_url", "pipeline_url", "checks", "note_url"}
)


@dataclass(frozen=True)
class Link:
    text: str
    url: str


@dataclass(frozen=True)
class CheckView:
    """One external check of one variant, as the item page lists it."""

    on: str  # which commit: "MR head" or "merge commit"
    name: str  # "build", or "build / api" with a variant
    status: str
    url: str | None
    updated: str  # "3 min ago", or "" while awaited


@dataclass(frozen=True)
class DimensionView:
    name: str
    status: str
    pending: str  # "in 4 min", "due now", or "" when nothing is deferred
    updated: str


def age(moment: datetime | None, now: datetime) -> str:
    """A short relative time: '12 s ago', 'in 4 min'; '' for no time."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    text = _span(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def now() -> datetime:
    return datetime.now(UTC)


def short_id(item: WorkItemBody) -> str:
    return str(item.id)[:8]


def text(value: Any) -> str:
    """A detail value as text; nothing for a missing one."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # as the API's JSON says it
    return str(value)


def since(value: Any, moment: datetime) -> str:
    """An ISO timestamp from the details as a relative time; other text as it is."""
    if not isinstance(value, str):
        return text(value)
    try:
        return age(datetime.fromisoformat(value), moment)
    except ValueError:
        return value


def summary(item: WorkItemBody) -> str:
    """One line that says what the item is about: its title, else its commit, else what
    it was asked."""
    details = item.details
    for field in ("title", "sha", "request"):
        value = details.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def branch(item: WorkItemBody) -> str:
    details = item.details
    for field in ("source_branch", "branch", "queue"):
        value = details.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def blocker(item: WorkItemBody) -> Mapping[str, Any] | None:
    value = item.details.get("merge_blocker")
    return value if isinstance(value, Mapping) and value.get("code") else None


def problem(item: WorkItemBody) -> str:
    """The error, else the merge blocker's message: why the item is not done."""
    if item.error:
        return item.error
    found = blocker(item)
    if found is None or item.phase != "active":
        return ""
    return text(found.get("message") or found.get("code"))


# Blockers a person chose (the service waits on purpose), told apart from failures.
HOLD_CODES = frozenset({"auto_merge_disabled", "draft"})


def problem_kind(item: WorkItemBody) -> str:
    """`failure` (the item failed), `hold` (a person holds it on purpose), `waiting` (a
    blocker that is no one's choice), or '' (nothing to say)."""
    if item.error and item.phase == "failed":
        return "failure"
    found = blocker(item)
    if found is None or item.phase != "active":
        return ""
    return "hold" if found.get("code") in HOLD_CODES else "waiting"


def web_url(value: Any) -> str | None:
    """An http(s) URL from the details, or None: no other scheme becomes a link."""
    if not isinstance(value, str):
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return None
    return value


def merge_request_link(item: WorkItemBody) -> Link | None:
    url = web_url(item.details.get("mr_url"))
    if url is None:
        return None
    iid = item.details.get("mr_iid")
    return Link(f"!{iid}" if iid is not None else "merge request", url)


def thread_link(item: WorkItemBody) -> Link | None:
    """The GitLab note an item answers (`details.note_url`), for http(s) links only."""
    url = web_url(item.details.get("note_url"))
    if url is None:
        return None
    iid, kind = item.details.get("noteable_iid"), item.details.get("noteable_type")
    sigil = "!" if kind == "merge_request" else "#"
    return Link(f"thread on {sigil}{iid}" if iid is not None else "thread", url)


def related_items(item: WorkItemBody) -> list[tuple[str, str]]:
    """(detail name, item id) of every `*_item_id` detail: other items this one made."""
    found = []
    for name, value in sorted(item.details.items()):
        if name.endswith("_item_id") and isinstance(value, str):
            try:
                found.append((name, str(uuid.UUID(value))))
            except ValueError:
                continue
    return found


def pipeline_link(item: WorkItemBody) -> Link | None:
    """The item's pipeline on GitLab: its own URL, else derived from the MR's."""
    details = item.details
    pipeline_id = details.get("head_pipeline_id") or details.get("pipeline_id")
    label = f"pipeline #{pipeline_id}" if pipeline_id is not None else "pipeline"
    direct = web_url(details.get("pipeline_url"))
    if direct is not None:
        return Link(label, direct)
    merge_request = web_url(details.get("mr_url"))
    if merge_request is None or not isinstance(pipeline_id, int):
        return None
    project_url, marker, _ = merge_request.partition("/-/merge_requests/")
    if not marker:
        return None
    status = details.get("head_pipeline_status")
    return Link(
        f"{label} ({status})" if status else label, f"{project_url}/-/pipelines/{pipeline_id}"
    )


def dimensions(rows: list[DimensionBody], moment: datetime) -> list[DimensionView]:
    views = []
    for row in rows:
        name = (
            row.dimension if row.variant in {"", "default"} else f"{row.dimension}[{row.variant}]"
        )
        pending = ""
        if row.pending_until is not None:
            pending = "due now" if row.pending_until <= moment else age(row.pending_until, moment)
        views.append(DimensionView(name, row.status, pending, age(row.updated_at, moment)))
    return views


def checks(item: WorkItemBody, moment: datetime) -> list[CheckView]:
    """External checks the item shows (`details.checks` on the MR head before the merge,
    `details.post_merge.checks` on the merge commit after it), each with its link."""
    post_merge = item.details.get("post_merge")
    sources = [
        ("MR head", item.details.get("checks")),
        ("merge commit", post_merge.get("checks") if isinstance(post_merge, Mapping) else None),
    ]
    found = []
    for on, rows in sources:
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, Mapping):
                continue
            name, variant = text(row.get("name")), text(row.get("variant"))
            found.append(
                CheckView(
                    on=on,
                    name=f"{name} / {variant}" if variant else name,
                    status=text(row.get("status")),
                    url=web_url(row.get("url")),
                    updated=since(row.get("updated_at"), moment) if row.get("updated_at") else "",
                )
            )
    return found


def detail_rows(item: WorkItemBody) -> list[tuple[str, str]]:
    """The type's fields as (name, text), lists and mappings flattened to one line."""
    rows = []
    for name, value in sorted(item.details.items()):
        if name in _SHOWN_APART or value is None or value in ({}, [], ""):
            continue
        if isinstance(value, list):
            shown = ", ".join(text(part) for part in value)
        elif isinstance(value, Mapping):
            # post_merge's checks are their own panel
            shown = ", ".join(
                f"{key}={text(part)}" for key, part in value.items() if key not in _SHOWN_APART
            )
        else:
            shown = text(value)
        rows.append((name, shown))
    return rows


def file_actions(item: WorkItemBody) -> list[tuple[str, str]]:
    """(action, path) of each file action; contents are never printed."""
    actions = item.details.get("file_actions")
    if not isinstance(actions, list):
        return []
    found = []
    for action in actions:
        if isinstance(action, Mapping):
            path = text(action.get("file_path"))
            previous = action.get("previous_path")
            if previous:
                path = f"{previous} → {path}"
            found.append((text(action.get("action")), path))
    return found


def change_summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """'phase: active → completed' for the fields an audit entry changed."""
    before = before or {}
    after = after or {}
    parts = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key in before:
            parts.append(f"{key}: {text(old) or '∅'} → {text(new) or '∅'}")
        elif text(new):  # a field that only appears empty says nothing
            parts.append(f"{key}: {text(new)}")
    return "; ".join(parts)
