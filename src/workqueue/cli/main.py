"""`workqueue-service` — server commands (serve, migrate); client commands live in `client.py`.

Errors are one line on stderr with a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import enum
import json
import logging
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from pydantic import ValidationError
from sqlalchemy.engine import URL

from workqueue.api.app import create_app
from workqueue.cli.client import register_client_commands
from workqueue.cli.database import (
    ShutdownRequested,
    StartupError,
    check_and_migrate,
    service_database,
)
from workqueue.cli.logging_setup import LogFormat, configure_logging
from workqueue.config import ConfigError, ServiceConfig, describe_validation_error, load_config
from workqueue.db.url import InvalidDatabaseURLError
from workqueue.settings import Settings
from workqueue.types.catalog import (
    HandledTypeError,
    build_registry,
    install_context,
    type_config_models,
)

EXIT_ERROR = 1
EXIT_USAGE = 2


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


app = typer.Typer(
    name="workqueue-service",
    help="Durable work queue between automated callers and GitLab.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Embedded PostgreSQL location when DATABASE_URL is unset "
        "(default: WORKQUEUE_SERVICE_DATA_DIR, else /var/lib/workqueue as root, "
        "~/.local/share/workqueue otherwise).",
    ),
]


def _fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        raise _fail(f"invalid settings: {describe_validation_error(error)}", EXIT_USAGE) from None
    except InvalidDatabaseURLError as error:
        raise _fail(f"invalid settings: {error}", EXIT_USAGE) from None


def _config(settings: Settings) -> ServiceConfig:
    """Load the file and validate every type's section before anything touches the database."""
    try:
        config = load_config(settings.config_path)
        build_registry(config.handled_types, install_context(settings))
    except ConfigError as error:
        raise _fail(f"invalid configuration: {error}", EXIT_USAGE) from None
    except HandledTypeError as error:
        raise _fail(f"invalid configuration: {settings.config_path}: {error}", EXIT_USAGE) from None
    return config


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
    configure_logging(log_level.value, log_format)
    settings = _settings()
    config = _config(settings)
    started = True
    try:
        with service_database(settings, data_dir) as url:
            check_and_migrate(url, migrate=not no_migrate)
            started = _run_server(settings, config, url, host, port, log_level)
    except ShutdownRequested:
        logging.getLogger(__name__).info("stopped on request")
    except StartupError as error:
        raise _fail(str(error)) from None
    if not started:
        raise _fail("the service did not start; the log above says why")


def _run_server(
    settings: Settings, config: ServiceConfig, url: URL, host: str, port: int, level: LogLevel
) -> bool:
    """Serve until stopped; False when the application failed during startup."""
    try:
        application = create_app(settings, config, database_url=url)
    except (RuntimeError, ValueError) as error:
        raise StartupError(str(error)) from None
    server = uvicorn.Server(
        # log_config=None: uvicorn's loggers go through our handler (text or JSON).
        uvicorn.Config(application, host=host, port=port, log_level=level.value, log_config=None)
    )
    server.run()
    return bool(server.started)


@app.command()
def migrate(data_dir: DataDirOption = None) -> None:
    """Apply pending database migrations (own version table) and exit."""
    configure_logging("warning")
    settings = _settings()
    try:
        with service_database(settings, data_dir) as url:
            check_and_migrate(url, migrate=True)
    except StartupError as error:
        raise _fail(str(error)) from None
    except ShutdownRequested:
        raise _fail("interrupted before the migration finished") from None
    typer.echo("database schema is up to date")


register_client_commands(app)


@app.command("config-schema")
def config_schema() -> None:
    """Print the JSON Schema of the configuration file (every known item type included)."""
    schema = ServiceConfig.model_json_schema()
    definitions = schema.setdefault("$defs", {})
    sections: dict[str, object] = {}
    for name, model in type_config_models().items():
        section = model.model_json_schema(ref_template="#/$defs/{model}")
        definitions.update(section.pop("$defs", {}))
        definitions[model.__name__] = section
        sections[name] = {"anyOf": [{"$ref": f"#/$defs/{model.__name__}"}, {"type": "null"}]}
    schema["properties"]["handled_types"] = {
        "description": "Item types this replica serves, each with its own settings (DDR-25).",
        "type": "object",
        "properties": sections,
        "additionalProperties": False,
    }
    typer.echo(json.dumps(schema, indent=2, sort_keys=True))


def main() -> None:
    app()
