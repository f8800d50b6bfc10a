"""The server-side commands' work: settings, config, database, uvicorn.

Kept apart from `main.py` so that client commands never import FastAPI,
Alembic or the item types.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import uvicorn
from pydantic import ValidationError
from sqlalchemy.engine import URL

from workqueue.cli.database import (
    ShutdownRequested,
    StartupError,
    check_and_migrate,
    service_database,
)
from workqueue.cli.listener import EXIT_CANNOT_LISTEN, ListenError, listen_on
from workqueue.cli.logging_setup import LogFormat, configure_logging
from workqueue.config import ConfigError, ServiceConfig, describe_validation_error, load_config
from workqueue.db.url import InvalidDatabaseURLError
from workqueue.settings import Settings
from workqueue.types.catalog import build_registry, type_config_models
from workqueue.types.plugin import HandledTypeError, install_context

if TYPE_CHECKING:
    from fastapi import FastAPI

EXIT_ERROR = 1
EXIT_USAGE = 2
# Set by the container image, which has no writable place for an embedded cluster.
REQUIRE_DATABASE_URL = "WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL"


def _fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings() -> Settings:
    try:
        settings = Settings()
    except ValidationError as error:
        raise _fail(f"invalid settings: {describe_validation_error(error)}", EXIT_USAGE) from None
    except InvalidDatabaseURLError as error:
        raise _fail(f"invalid settings: {error}", EXIT_USAGE) from None
    if not settings.database_url and os.environ.get(REQUIRE_DATABASE_URL, "") not in ("", "0"):
        raise _fail(
            f"DATABASE_URL is not set, and {REQUIRE_DATABASE_URL} says this installation "
            "does not run an embedded PostgreSQL: set DATABASE_URL",
            EXIT_USAGE,
        )
    return settings


def validated_config(settings: Settings) -> ServiceConfig:
    """Load the file and validate every type's section before anything touches the database."""
    try:
        config = load_config(settings.config_path)
        build_registry(config.handled_types, install_context(settings))
    except ConfigError as error:
        raise _fail(f"invalid configuration: {error}", EXIT_USAGE) from None
    except HandledTypeError as error:
        raise _fail(f"invalid configuration: {settings.config_path}: {error}", EXIT_USAGE) from None
    return config


def serve(
    *,
    host: str,
    port: int,
    data_dir: Path | None,
    no_migrate: bool,
    log_level: str,
    log_format: LogFormat,
) -> None:
    """Run the HTTP API and the processing engine until stopped."""
    configure_logging(log_level, log_format)
    settings = _settings()
    if settings.local_auth_user and not is_loopback_host(host):
        raise _fail(
            f"WORKQUEUE_SERVICE_LOCAL_AUTH_USER is set, so every request without a token "
            f"would get all permissions: serve it on a loopback address "
            f"(--host 127.0.0.1 or ::1), not {host}",
            EXIT_USAGE,
        )
    config = validated_config(settings)
    try:
        listener = listen_on(host, port)
    except ListenError as error:
        raise _fail(str(error), EXIT_CANNOT_LISTEN) from None
    started = True
    try:
        with listener, service_database(settings, data_dir) as url:
            check_and_migrate(url, migrate=not no_migrate)
            started = _run_server(settings, config, url, listener, log_level)
    except ShutdownRequested:
        logging.getLogger(__name__).info("stopped on request")
    except StartupError as error:
        raise _fail(str(error)) from None
    if not started:
        raise _fail("the service did not start; the log above says why")


def is_loopback_host(host: str) -> bool:
    """Whether binding `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # any other name may resolve to a public address


def _run_server(
    settings: Settings, config: ServiceConfig, url: URL, listener: socket.socket, level: str
) -> bool:
    """Serve until stopped; False when the application failed during startup."""
    # Here, not at the top: `prune`, `migrate` and `config-schema` share this module
    # and need none of the web application (half a second of imports).
    from workqueue.api.app import create_app  # noqa: PLC0415

    try:
        application = create_app(settings, config, database_url=url)
    except (RuntimeError, ValueError) as error:
        raise StartupError(str(error)) from None
    server = build_uvicorn(application, listener, level)
    # uvicorn announces only the addresses it bound itself.
    logging.getLogger(__name__).info("listening on %s", listener_url(listener))
    server.run(sockets=[listener])
    return bool(server.started)


def build_uvicorn(application: FastAPI, listener: socket.socket, level: str) -> uvicorn.Server:
    host, port = listener.getsockname()[:2]
    # log_config=None: uvicorn's loggers go through our handler (text or JSON).
    # "auto": uvloop and httptools when installed (dependencies), else asyncio and h11.
    config = uvicorn.Config(
        application,
        host=host,
        port=port,
        log_level=level,
        log_config=None,
        loop="auto",
        http="auto",
    )
    return uvicorn.Server(config)


def listener_url(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def migrate(data_dir: Path | None) -> None:
    """Apply pending database migrations (own version table)."""
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
