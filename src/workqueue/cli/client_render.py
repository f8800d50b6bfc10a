"""How the client commands show items to a person (rich tables); scripts use `--json`.

Values from the service are wrapped in `Text`, never interpreted as rich markup:
a title like `[bold]` must print as typed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

PHASE_STYLES = {"active": "cyan", "completed": "green", "failed": "red", "cancelled": "yellow"}
# Item fields shown in this order (label, key); missing or null ones are left out.
ITEM_FIELDS = (
    ("type", "item_type"),
    ("attempts", "attempts"),
    ("actionable", "actionable"),
    ("caller", "caller_identity"),
    ("idempotency key", "idempotency_key"),
    ("generation", "generation"),
    ("created", "created_at"),
    ("updated", "updated_at"),
    ("next attempt", "next_attempt_at"),
    ("leased until", "leased_until"),
    ("last event", "last_event_at"),
)
TIME_KEYS = frozenset({"created_at", "updated_at", "next_attempt_at", "leased_until"})
TIME_KEYS |= {"last_event_at", "pending_until"}


def phase_text(phase: object) -> Text:
    name = str(phase)
    return Text(name, style=PHASE_STYLES.get(name, ""))


def item_view(item: Mapping[str, Any], footer: str | None = None) -> RenderableType:
    """One item: its fields, its type's details, then its dimensions."""
    fields = Table(show_header=False, box=None, pad_edge=False)
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    fields.add_row("phase", phase_text(item.get("phase")))
    error = item.get("error")
    if error:
        fields.add_row("error", Text(str(error), style="red"))
    for label, key in ITEM_FIELDS:
        if item.get(key) is not None:
            fields.add_row(label, _value(key, item[key]))
    details = item.get("details") or {}
    for key, value in details.items():
        if key != "checks" and value is not None and value not in ("", []):
            fields.add_row(key.replace("_", " "), _detail(key, value))
    heading = Text(f"work item {item.get('id')}", style="bold")
    parts: list[RenderableType] = [heading, fields]
    checks = checks_view(details)
    if checks is not None:
        parts.append(checks)
    parts.append(dimensions_view(item.get("dimensions") or []))
    if footer:
        parts.append(Text(footer, style="dim"))
    return Group(*parts)


CHECK_STYLES = {"success": "green", "failed": "red", "canceled": "red"}


def checks_view(details: Mapping[str, Any]) -> RenderableType | None:
    """External checks per variant, with their links: on the MR head (`checks`), and on
    the merge commit once merged (`post_merge.checks`). None without any."""
    post_merge = details.get("post_merge")
    sources = (
        ("MR head", details.get("checks")),
        ("merge commit", post_merge.get("checks") if isinstance(post_merge, Mapping) else None),
    )
    rows = [
        (on, check)
        for on, checks in sources
        for check in (checks if isinstance(checks, list) else [])
        if isinstance(check, Mapping)
    ]
    if not rows:
        return None
    table = Table(title="external checks", title_justify="left")
    for heading in ("check", "variant", "on", "status", "reported", "link"):
        table.add_column(heading, overflow="fold")
    for on, check in rows:
        status = str(check.get("status", ""))
        updated = check.get("updated_at")
        table.add_row(
            Text(str(check.get("name", ""))),
            Text(str(check.get("variant") or "")),
            Text(on),
            Text(status, style=CHECK_STYLES.get(status, "")),
            Text(_time(updated) if isinstance(updated, str) else "awaited"),
            Text(str(check.get("url") or "")),
        )
    return table


def dimensions_view(dimensions: Sequence[Mapping[str, Any]]) -> RenderableType:
    if not dimensions:
        return Text("no dimensions", style="dim")
    table = Table(title="dimensions", title_justify="left")
    for heading in ("dimension", "variant", "status", "pending until", "updated"):
        table.add_column(heading)
    for row in dimensions:
        table.add_row(
            Text(str(row.get("dimension", ""))),
            Text(str(row.get("variant") or "")),
            Text(str(row.get("status", ""))),
            _value("pending_until", row.get("pending_until")),
            _value("updated_at", row.get("updated_at")),
        )
    return table


def progress_line(item: Mapping[str, Any]) -> str:
    """A one-line state for logs (watch without a terminal)."""
    dimensions = " ".join(
        f"{row.get('dimension')}{'/' + row['variant'] if row.get('variant') else ''}"
        f"={row.get('status')}"
        for row in item.get("dimensions") or []
    )
    parts = [f"phase={item.get('phase')}", f"attempts={item.get('attempts')}"]
    if dimensions:
        parts.append(dimensions)
    if item.get("error"):
        parts.append(f"error={item['error']}")
    return " ".join(parts)


def _json_text(value: object) -> str:
    """A value as the service's JSON says it (`true`, not Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _value(key: str, value: object) -> Text:
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text(_json_text(value))
    if key in TIME_KEYS and isinstance(value, str):
        return Text(_time(value))
    return Text(str(value))


def _time(value: str) -> str:
    try:
        return datetime.fromisoformat(value).isoformat(sep=" ", timespec="seconds")
    except ValueError:
        return value


def _detail(key: str, value: object) -> Text:
    if key == "merge_blocker" and isinstance(value, dict):
        return merge_blocker_text(value)
    if key == "post_merge" and isinstance(value, dict):
        # Its checks are their own table.
        return Text(", ".join(f"{k}={v}" for k, v in value.items() if k != "checks"))
    if key == "file_actions" and isinstance(value, list):
        return Text("\n".join(_file_action(action) for action in value))
    if isinstance(value, list):
        return Text(", ".join(_json_text(entry) for entry in value))
    text = _json_text(value)
    first_line, _, rest = text.partition("\n")
    return Text(first_line + (" …" if rest.strip() else ""))


def merge_blocker_text(blocker: Mapping[str, Any]) -> Text:
    """`code: message (since …)`: why the service does not merge the MR yet."""
    text = Text(str(blocker.get("code", "?")), style="yellow")
    if blocker.get("message"):
        text.append(f": {blocker['message']}")
    since = blocker.get("since")
    if isinstance(since, str):
        text.append(f" (since {_time(since)})", style="dim")
    return text


def _file_action(action: object) -> str:
    if not isinstance(action, dict):
        return str(action)
    kind, path = action.get("action", "?"), action.get("file_path", "?")
    if kind == "move":
        return f"move {action.get('previous_path', '?')} → {path}"
    if kind == "chmod":
        return f"chmod {path} {'+x' if action.get('execute_filemode') else '-x'}"
    binary = " (base64)" if action.get("encoding") == "base64" else ""
    return f"{kind} {path}{binary}"
