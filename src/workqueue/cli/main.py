"""`workqueue-service` — server commands (serve, migrate); client commands live in `client.py`.

Errors are one line on stderr with a non-zero exit code, never a traceback.
Server-side modules (FastAPI, Alembic, the item types) are imported inside the
server commands, so client commands start in a fraction of the time.
"""

from __future__ import annotations

import enum
from importlib.metadata import version
from pathlib import Path
from typing import Annotated

import typer

from workqueue.cli.client import register_client_commands
from workqueue.cli.client_history import register_history_command
from workqueue.cli.client_trunk import register_trunk_commands
from workqueue.cli.help_flags import show_flags_as_flags
from workqueue.cli.logging_setup import LogFormat


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


app = typer.Typer(
    name="workqueue-service",
    help="Durable work queue between automated callers and GitLab.\n\n"
    "The client commands (submit, status, history, retry, cancel, watch, trunk) send "
    "the token in WORKQUEUE_SERVICE_TOKEN, and talk to WORKQUEUE_SERVICE_URL "
    "(or --url).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

show_flags_as_flags()


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"workqueue-service {version('workqueue-service')}")
        raise typer.Exit


@app.callback()
def _program(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Durable work queue between automated callers and GitLab."""


DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Embedded PostgreSQL location when DATABASE_URL is unset "
        "(default: WORKQUEUE_SERVICE_DATA_DIR, else /var/lib/workqueue as root, "
        "~/.local/share/workqueue otherwise).",
    ),
]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    data_dir: DataDirOption = None,
    no_migrate: Annotated[
        bool, typer.Option("--no-migrate", help="Do not apply pending migrations.")
    ] = False,
    log_level: Annotated[LogLevel, typer.Option(help="Log verbosity.")] = LogLevel.INFO,
    log_format: Annotated[
        LogFormat, typer.Option(help="text for a terminal, json for log collectors.")
    ] = LogFormat.TEXT,
) -> None:
    """Run the HTTP API and the processing engine."""
    from workqueue.cli import server  # noqa: PLC0415 - server modules load only for servers

    server.serve(
        host=host,
        port=port,
        data_dir=data_dir,
        no_migrate=no_migrate,
        log_level=log_level.value,
        log_format=log_format,
    )


@app.command()
def migrate(data_dir: DataDirOption = None) -> None:
    """Apply pending database migrations (own version table) and exit."""
    from workqueue.cli import server  # noqa: PLC0415 - server modules load only for servers

    server.migrate(data_dir)


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Delete items finished (completed, failed, cancelled) longer ago than this: "
            "a whole number and a unit, m (minutes), h, d or w, such as 90d.",
        ),
    ],
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Items per batch; each batch is one transaction.")
    ] = 1000,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only count what would be deleted.")
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Delete finished items older than --older-than, with all their rows, in batches."""
    from workqueue.cli import prune as retention  # noqa: PLC0415 - server modules load only for servers

    retention.prune(
        older_than=older_than, batch_size=batch_size, dry_run=dry_run, data_dir=data_dir
    )


@app.command("config-schema")
def config_schema() -> None:
    """Print the JSON Schema of the configuration file (every known item type included)."""
    from workqueue.cli import server  # noqa: PLC0415 - server modules load only for servers

    server.config_schema()


@app.command()
def demo(
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the service running (Ctrl-C stops it) and its files."),
    ] = False,
    port: Annotated[int, typer.Option(help="TCP port of the service.")] = 8080,
) -> None:
    """Show a whole MR life on a throwaway database and a simulated GitLab."""
    from workqueue.cli.demo import run_demo  # noqa: PLC0415 - server modules load only for servers

    run_demo(keep=keep, port=port)


register_client_commands(app)
register_history_command(app)
register_trunk_commands(app)


def main() -> None:
    app()
