"""`trunk status`: the trunk validation queues as a table — slots in flight, last green.

A client command: it reads `GET /api/trunk/queues` over HTTP and imports
nothing from the server side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from workqueue.cli.client import PANEL, JsonOption, UrlOption, _print_json, _service

QUEUES = "/api/trunk/queues"
SHORT_SHA = 12

trunk_app = typer.Typer(
    name="trunk", help="Post-merge validation of landed heads.", no_args_is_help=True
)


@trunk_app.command("status")
def status(
    project: Annotated[str | None, typer.Option("--project", help="Only this project.")] = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Only this branch.")] = None,
    url: UrlOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show each trunk queue: builds in flight, last green head, newest head."""
    params = {name: value for name, value in (("project", project), ("branch", branch)) if value}
    with _service(url) as client:
        answer = client.get(QUEUES, params)
    if json_output:
        _print_json(answer)
        return
    queues = answer.get("items", []) if isinstance(answer, Mapping) else []
    if not queues:
        typer.echo("no trunk queue matches")
        return
    Console(highlight=False).print(queues_view(queues))


def queues_view(queues: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = Table(title="trunk queues", title_justify="left")
    for heading in ("queue", "in flight", "last green", "last green item", "latest item"):
        table.add_column(heading, overflow="fold", no_wrap=heading == "queue")
    for queue in queues:
        in_flight = f"{queue.get('in_flight', 0)}/{queue.get('max_concurrent', 1)}"
        green = queue.get("last_green_sha")
        green_text = Text(str(green)[:SHORT_SHA], style="green") if green else Text("none yet")
        table.add_row(
            Text(str(queue.get("name", ""))),
            Text(in_flight, style="yellow" if queue.get("in_flight") else ""),
            green_text,
            Text(str(queue.get("last_green_item_id") or "")),
            Text(str(queue.get("latest_item_id") or "")),
        )
    return table


def register_trunk_commands(app: typer.Typer) -> None:
    app.add_typer(trunk_app, rich_help_panel=PANEL)
