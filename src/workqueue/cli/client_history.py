"""`history --id`: an item's audit trail as a timeline — when, who, what, before → after.

A client command: it reads `GET /api/work-items/{id}/history` over HTTP and
imports nothing from the server side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from workqueue.cli.client import (
    CREDENTIALS_EPILOG,
    ITEMS,
    MAX_LIST_LIMIT,
    PANEL,
    IdOption,
    JsonOption,
    UrlOption,
    _collect,
    _print_json,
    _service,
    resolve_id,
)
from workqueue.cli.client_render import _time

ARROW = " → "


def history(
    id_: IdOption,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_LIST_LIMIT, help="At most this many entries.")
    ] = 1000,
    url: UrlOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show what happened to an item, oldest first (kept for audit.retention_days)."""
    with _service(url) as client:
        full = resolve_id(client, id_)
        entries, next_cursor = _collect(client, f"{ITEMS}/{full}/history", {}, limit, None)
    if json_output:
        _print_json({"items": entries, "next_cursor": next_cursor})
        return
    if entries:
        Console(highlight=False).print(history_view(entries))
    else:
        typer.echo("no history kept for this item")
    if next_cursor:
        typer.echo("more entries exist: raise --limit", err=True)


def history_view(entries: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = Table(title="history", title_justify="left")
    table.add_column("time", no_wrap=True)
    for heading in ("who", "what", "change"):
        table.add_column(heading, overflow="fold")
    for entry in entries:
        timestamp = entry.get("timestamp")
        change = Text(change_text(entry))
        if entry.get("reason"):
            if change:
                change.append("\n")
            change.append(str(entry["reason"]), style="dim")
        table.add_row(
            Text(_time(timestamp) if isinstance(timestamp, str) else ""),
            Text(str(entry.get("actor", ""))),
            Text(str(entry.get("event_type", ""))),
            change,
        )
    return table


def change_text(entry: Mapping[str, Any]) -> str:
    """`before → after` of an entry, in words; "" when it records no change."""
    before, after = entry.get("before"), entry.get("after")
    details = entry.get("details") or {}
    if before is None and after is None and isinstance(details, Mapping):
        # Type entries (mr_observed, merge_blocker_changed) carry it in details.
        before, after = details.get("before"), details.get("after")
    if entry.get("event_type") == "dimension_change" and isinstance(after, Mapping):
        return _dimension_change(before, after)
    if before is None and after is None:
        return ""
    if isinstance(before, Mapping | None) and isinstance(after, Mapping | None):
        keys = [*(before or {}), *(key for key in after or {} if key not in (before or {}))]
        return "; ".join(
            f"{key}: {_word((before or {}).get(key))}{ARROW}{_word((after or {}).get(key))}"
            for key in keys
        )
    return f"{_word(before)}{ARROW}{_word(after)}"


def _dimension_change(before: object, after: Mapping[str, Any]) -> str:
    name = str(after.get("dimension", "?"))
    if after.get("variant"):
        name += f"/{after['variant']}"
    old = before.get("status") if isinstance(before, Mapping) else "unset"
    new = _word(after.get("status"))
    pending = after.get("pending_until")
    if isinstance(pending, str):
        new += f" (until {_time(pending)})"
    return f"{name}: {_word(old)}{ARROW}{new}"


def _word(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{key}={_word(item)}" for key, item in value.items())
    return str(value)


def register_history_command(app: typer.Typer) -> None:
    app.command(rich_help_panel=PANEL, epilog=CREDENTIALS_EPILOG)(history)
