"""Client commands: submit, status, retry, cancel, watch — a running service over HTTP.

They need neither the server config nor DATABASE_URL: only `--url` (else
WORKQUEUE_SERVICE_URL, else http://127.0.0.1:8080, where `serve` listens by
default) and, when the service wants one, a token, which comes from
WORKQUEUE_SERVICE_TOKEN and nowhere else (a flag would land in shell history
and process listings). Exit codes: 0 ok, 1 the service answered an error, 2
usage, 3 the service cannot be reached; errors are `error: ...` lines on
stderr, never a traceback.
"""

from __future__ import annotations

import enum
import json
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from workqueue.cli.client_files import PlannedAction, plan_file_actions
from workqueue.cli.client_http import (
    DEFAULT_SERVICE_URL,
    URL_VARIABLE,
    ClientError,
    ServiceClient,
    ServiceError,
    UnexpectedAnswerError,
    UsageError,
    service_url,
    token_from_environment,
)
from workqueue.cli.client_render import item_view, progress_line
from workqueue.cli.client_table import list_view

PANEL = "Client commands (talk to a running service)"
ITEMS = "/api/work-items"
MR_ITEMS = "/api/work-items/mr"
MAX_PAGE_SIZE = 500  # the service refuses larger pages
MAX_LIST_LIMIT = 10_000
MAX_IDEMPOTENCY_KEY_LENGTH = 255  # the service's limit (a longer key is its 422)
EXIT_INTERRUPTED = 130


class PhaseChoice(enum.StrEnum):
    """The phases of the public contract (the client does not import the server's enum)."""

    ACTIVE = "active"  # being worked on or waiting
    COMPLETED = "completed"  # finished successfully
    FAILED = "failed"  # gave up; retry reactivates
    CANCELLED = "cancelled"  # stopped; retry reactivates


ENDED_PHASES = frozenset({PhaseChoice.COMPLETED, PhaseChoice.FAILED, PhaseChoice.CANCELLED})

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_VARIABLE,
        metavar="URL",
        # Words, not the URL: a long word is cut off in an 80-column help.
        help="Service URL (default: a local serve, port 8080).",
        show_envvar=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the service's JSON answer.")]
IdOption = Annotated[
    str,
    typer.Option(
        "--id",
        metavar="ID",
        help="Work item id, or its first characters (at least 4: as status shows them).",
    ),
]
_ID_START = re.compile(r"^(?:[0-9a-fA-F]-?){3}[0-9a-fA-F](?:-?[0-9a-fA-F]){0,28}-?$")
_CANDIDATES_SHOWN = 10


def resolve_id(client: ServiceClient, given: str) -> str:
    """The full id an item id or the start of one names, as the service resolves it
    among the items the caller may read; a usage error when none or several match."""
    text = given.strip()
    try:
        return str(uuid.UUID(text))
    except ValueError:
        pass
    if not _ID_START.fullmatch(text):
        raise UsageError(f"--id {given!r} is not a work item id or the start of one")
    page = _object(
        client.get(ITEMS, params={"id_prefix": text, "limit": _CANDIDATES_SHOWN}), "items"
    )
    items = [item for item in page.get("items") or [] if isinstance(item, dict)]
    if not items:
        raise UsageError(f"no item you may read has an id starting with {text}")
    if len(items) > 1:
        shown = "\n".join(
            f"  {item.get('id')}  {item.get('item_type')}  {item.get('phase')}" for item in items
        )
        more = " (and more)" if page.get("next_cursor") else ""
        raise UsageError(f"{text} starts the ids of several items{more}; give more of it:\n{shown}")
    return str(items[0]["id"])


@contextmanager
def _service(url: str | None) -> Iterator[ServiceClient]:
    """A client for the command's lifetime; any `ClientError` inside ends the command."""
    token = token_from_environment()
    try:
        with ServiceClient(service_url(url), token) as client:
            yield client
    except ClientError as error:
        for line in error.lines():
            safe = line.replace(token, "***") if token else line
            typer.echo(f"error: {safe}", err=True)
        raise typer.Exit(error.exit_code) from None


def _print_json(body: Any) -> None:
    typer.echo(json.dumps(body, indent=2))


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise UnexpectedAnswerError(f"unexpected answer for {what}: not a JSON object")
    return body


def submit(
    project: Annotated[str, typer.Option(metavar="PATH", help="Project path, or numeric id.")],
    source_branch: Annotated[
        str, typer.Option(metavar="BRANCH", help="Branch the commit goes to.")
    ],
    title: Annotated[str, typer.Option(metavar="TEXT", help="MR title.")],
    commit_message: Annotated[str, typer.Option(metavar="TEXT", help="Message of the commit.")],
    target_branch: Annotated[
        str | None, typer.Option(metavar="BRANCH", help="Target branch (default: the project's).")
    ] = None,
    description: Annotated[str | None, typer.Option(metavar="TEXT", help="MR description.")] = None,
    package: Annotated[
        str | None, typer.Option(metavar="NAME", help="Free label, for filtering.")
    ] = None,
    change_kind: Annotated[
        str | None, typer.Option(metavar="NAME", help="Free label, for filtering.")
    ] = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", metavar="LABEL", help="MR label (repeatable).")
    ] = None,
    auto_merge: Annotated[
        bool, typer.Option("--auto-merge/--no-auto-merge", help="Merge once the pipeline passes.")
    ] = True,
    file: Annotated[
        list[str] | None,
        typer.Option("--file", metavar="LOCAL:REPO", help="Update REPO with LOCAL's content."),
    ] = None,
    create: Annotated[
        list[str] | None,
        typer.Option("--create", metavar="LOCAL:REPO", help="Create REPO with LOCAL's content."),
    ] = None,
    delete: Annotated[
        list[str] | None, typer.Option("--delete", metavar="REPO", help="Delete REPO.")
    ] = None,
    move: Annotated[
        list[str] | None, typer.Option("--move", metavar="OLD:NEW", help="Move OLD to NEW.")
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            metavar="KEY",
            help="Makes a resend safe: the same KEY and body within 24 h answer as the "
            "first time and change nothing (1-255 printable ASCII characters).",
        ),
    ] = None,
    url: UrlOption = None,
    json_output: JsonOption = False,
) -> None:
    """Submit (or update) an MR work item; prints its id."""
    with _service(url) as client:
        headers = _idempotency_headers(idempotency_key)
        planned = plan_file_actions(
            updates=file or [], creates=create or [], deletes=delete or [], moves=move or []
        )
        body: dict[str, Any] = {
            "project": project,
            "source_branch": source_branch,
            "title": title,
            "commit_message": commit_message,
            "labels": label or [],
            "auto_merge": auto_merge,
            "file_actions": [action.body for action in planned],
        }
        optional = {
            "target_branch": target_branch,
            "description": description,
            "package": package,
            "change_kind": change_kind,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        try:
            answer = _object(client.post(MR_ITEMS, body, headers), "submit")
        except ServiceError as error:
            raise error.with_hints(lambda location: _origin(planned, location)) from None
        if json_output:
            _print_json(answer)
        else:
            typer.echo(answer.get("id"))


def _idempotency_headers(key: str | None) -> dict[str, str]:
    """The `Idempotency-Key` header; a usage error (exit 2) for a key the service would
    refuse anyway, or one HTTP would change on the way."""
    if key is None:
        return {}
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise UsageError("--idempotency-key must be 1 to 255 printable ASCII characters")
    if key != key.strip():
        # HTTP drops spaces around a header value: the service would see another key.
        raise UsageError("--idempotency-key must not start or end with a space")
    return {"Idempotency-Key": key}


def _origin(planned: list[PlannedAction], location: tuple[str | int, ...]) -> str | None:
    """The flag behind `body.file_actions.N...`, so a 422 points at the command line."""
    if len(location) >= 3 and location[:2] == ("body", "file_actions"):
        index = location[2]
        if isinstance(index, int) and 0 <= index < len(planned):
            return planned[index].origin
    return None


def status(
    item_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="ID",
            help="Show this item (else: list items); its first characters suffice.",
        ),
    ] = None,
    phase: Annotated[PhaseChoice | None, typer.Option(help="List: only this phase.")] = None,
    item_type: Annotated[
        str | None, typer.Option("--type", metavar="TYPE", help="List: only this item type.")
    ] = None,
    project: Annotated[
        str | None, typer.Option(metavar="PATH", help="List mr items of this project.")
    ] = None,
    package: Annotated[
        str | None, typer.Option(metavar="NAME", help="List mr items of this package.")
    ] = None,
    source_branch: Annotated[
        str | None, typer.Option(metavar="BRANCH", help="List mr items of this source branch.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_LIST_LIMIT, help="List: at most this many items.")
    ] = 50,
    cursor: Annotated[
        str | None,
        typer.Option(metavar="CURSOR", help="List: continue after a previous next_cursor."),
    ] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="List: full ids, values and blocker messages.")
    ] = False,
    url: UrlOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show one item (--id), or list items newest first."""
    given = {"project": project, "package": package, "source_branch": source_branch}
    mr_filters = {key: value for key, value in given.items() if value is not None}
    with _service(url) as client:
        if item_id is None:
            path, params = _list_query(item_type, phase, mr_filters)
            _show_list(client, path, params, limit, cursor, json_output=json_output, wide=wide)
        elif phase or item_type or mr_filters or cursor or wide:
            raise UsageError("--id shows one item: it takes no list filters")
        else:
            item = _object(client.get(f"{ITEMS}/{resolve_id(client, item_id)}"), "the item")
            if json_output:
                _print_json(item)
            else:
                Console(highlight=False).print(item_view(item))


def _list_query(
    item_type: str | None, phase: PhaseChoice | None, mr_filters: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """The generic list, or the mr list when an mr-only filter is given."""
    if mr_filters and item_type not in {None, "mr"}:
        raise UsageError("--project, --package and --source-branch only apply to mr items")
    path, params = (MR_ITEMS, dict(mr_filters)) if mr_filters else (ITEMS, {})
    if item_type is not None and not mr_filters:
        params["item_type"] = item_type
    if phase is not None:
        params["phase"] = phase.value
    return path, params


def _show_list(
    client: ServiceClient,
    path: str,
    params: dict[str, str],
    limit: int,
    cursor: str | None,
    *,
    json_output: bool,
    wide: bool,
) -> None:
    items, next_cursor = _collect(client, path, params, limit, cursor)
    if json_output:
        _print_json({"items": items, "next_cursor": next_cursor})
        return
    if items:
        console = Console(highlight=False)
        console.print(list_view(items, width=console.width, wide=wide))
    else:
        typer.echo("no matching items")
    if next_cursor:
        typer.echo(f"more items exist: raise --limit, or pass --cursor {next_cursor}", err=True)


def _collect(
    client: ServiceClient, path: str, params: dict[str, str], limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """Follow next_cursor until `limit` items; pages never overshoot, so the cursor resumes."""
    items: list[dict[str, Any]] = []
    while True:
        query: dict[str, str | int] = {**params, "limit": min(limit - len(items), MAX_PAGE_SIZE)}
        if cursor:
            query["cursor"] = cursor
        page = _object(client.get(path, query), "the list")
        entries = page.get("items")
        if not isinstance(entries, list):
            raise UnexpectedAnswerError("unexpected answer for the list: no items")
        items.extend(entries)
        cursor = page.get("next_cursor")
        if not cursor or not entries or len(items) >= limit:
            return items, cursor


def retry(id_: IdOption, url: UrlOption = None, json_output: JsonOption = False) -> None:
    """Reactivate a failed or cancelled item."""
    with _service(url) as client:
        item = _object(client.post(f"{ITEMS}/{resolve_id(client, id_)}/retry"), "retry")
        if json_output:
            _print_json(item)
        else:
            typer.echo(f"retried {item.get('id')}: now {item.get('phase')}")


def cancel(
    id_: IdOption,
    close_mr: Annotated[
        bool, typer.Option("--close-mr", help="Also close the item's MR on GitLab.")
    ] = False,
    url: UrlOption = None,
    json_output: JsonOption = False,
) -> None:
    """Cancel an active or failed item (its MR stays open unless --close-mr)."""
    with _service(url) as client:
        full = resolve_id(client, id_)
        item = _object(client.post(f"{ITEMS}/{full}/cancel", {"close_mr": close_mr}), "cancel")
        if json_output:
            _print_json(item)
        else:
            typer.echo(f"cancelled {item.get('id')}: now {item.get('phase')}")


def watch(
    id_: IdOption,
    interval: Annotated[
        float, typer.Option(min=0.1, help="Seconds between two looks at the item.")
    ] = 2.0,
    url: UrlOption = None,
) -> None:
    """Follow an item until it ends: exit 0 when completed, 1 when failed or cancelled."""
    with _service(url) as client:
        console = Console(highlight=False)
        id_ = resolve_id(client, id_)
        try:
            item = (_watch_live if console.is_terminal else _watch_log)(
                client, uuid.UUID(id_), interval, console
            )
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    phase = item.get("phase")
    if phase == PhaseChoice.COMPLETED:
        return
    # A cancelled item may still carry the error of an earlier attempt: not its reason.
    failed = phase == PhaseChoice.FAILED and item.get("error")
    reason = f": {item['error']}" if failed else ""
    typer.echo(f"error: item {id_} ended {phase}{reason}", err=True)
    raise typer.Exit(1)


def _poll(client: ServiceClient, item_id: uuid.UUID, interval: float) -> Iterator[dict[str, Any]]:
    """The item now and after every interval; the last one yielded has ended."""
    while True:
        item = _object(client.get(f"{ITEMS}/{item_id}"), "the item")
        yield item
        if item.get("phase") in ENDED_PHASES:
            return
        time.sleep(interval)


def waiting_for_a_person(item: dict[str, Any]) -> str | None:
    """A line saying the item will not end by itself soon: the service never merges an
    `auto_merge: false` item, a person does (or cancels it)."""
    blocker = (item.get("details") or {}).get("merge_blocker") or {}
    if item.get("phase") == "active" and blocker.get("code") == "auto_merge_disabled":
        return (
            "this item waits for a person: auto_merge is off, so the service never merges "
            "it; it ends when someone merges or closes its MR"
        )
    return None


def _watch_live(
    client: ServiceClient, item_id: uuid.UUID, interval: float, console: Console
) -> dict[str, Any]:
    item: dict[str, Any] = {}
    with Live(Text("loading…"), console=console, auto_refresh=False) as live:
        for item in _poll(client, item_id, interval):
            footer = None
            if item.get("phase") not in ENDED_PHASES:
                footer = f"watching: last look {_clock()}, every {interval:g}s (Ctrl-C stops)"
                if (waiting := waiting_for_a_person(item)) is not None:
                    footer = f"{waiting}\n{footer}"
            live.update(item_view(item, footer), refresh=True)
    return item


def _watch_log(
    client: ServiceClient, item_id: uuid.UUID, interval: float, console: Console
) -> dict[str, Any]:
    """Without a terminal (CI logs, pipes): one line per change, then the final table."""
    item: dict[str, Any] = {}
    previous = None
    said_waiting = False
    for item in _poll(client, item_id, interval):
        line = progress_line(item)
        if line != previous:
            typer.echo(f"{_clock()} {line}")
            previous = line
        waiting = waiting_for_a_person(item)
        if waiting is not None and not said_waiting:
            typer.echo(f"{_clock()} {waiting}")
            said_waiting = True
    console.print(item_view(item))
    return item


def _clock() -> str:
    return datetime.now(UTC).astimezone().strftime("%H:%M:%S")


# Said under every client command's options: where the credential comes from.
CREDENTIALS_EPILOG = (
    "The token is read from WORKQUEUE_SERVICE_TOKEN (never from a flag); the URL from "
    f"--url, else WORKQUEUE_SERVICE_URL, else {DEFAULT_SERVICE_URL}."
)


def register_client_commands(app: typer.Typer) -> None:
    for command in (submit, status, retry, cancel, watch):
        app.command(rich_help_panel=PANEL, epilog=CREDENTIALS_EPILOG)(command)
