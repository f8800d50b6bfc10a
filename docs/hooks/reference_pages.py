"""MkDocs hook: the generated reference pages, rendered at build time from the code itself.

- `reference/api.md` from the app's OpenAPI document (and the document itself
  as `reference/openapi.json`), rendered as plain Markdown: no JavaScript and
  nothing fetched from a CDN when the page is read;
- `reference/cli-commands.md` from the `workqueue-service` click command tree
  (typer builds it), so every command, argument and option is listed exactly
  as the program parses it.

The pages are generated files (not in git), so they cannot drift from the
code; tests/deploy/test_docs_site.py checks what they contain.
"""

# ruff: noqa: INP001 - loaded by MkDocs from mkdocs.yml `hooks:`, not imported as a package

from __future__ import annotations

import json
import logging
from typing import Any

import typer.main
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from sqlalchemy.engine import URL

API_PAGE = "reference/api.md"
OPENAPI_FILE = "reference/openapi.json"
CLI_PAGE = "reference/cli-commands.md"
METHODS = ("get", "put", "post", "delete", "patch")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    document = openapi_document()
    files.append(File.generated(config, API_PAGE, content=render_openapi(document)))
    files.append(
        File.generated(config, OPENAPI_FILE, content=json.dumps(document, indent=2) + "\n")
    )
    files.append(File.generated(config, CLI_PAGE, content=render_cli()))
    return files


# -- OpenAPI ---------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The document `GET /openapi.json` serves, from an app that is never started."""
    from workqueue.api.app import create_app  # noqa: PLC0415 - heavy, only when building
    from workqueue.config import ServiceConfig  # noqa: PLC0415
    from workqueue.settings import Settings  # noqa: PLC0415

    # model_construct: defaults only, nothing read from this machine's environment.
    settings = Settings.model_construct()
    config = ServiceConfig.model_validate({"handled_types": {}})
    # No connection is made: the engine connects lazily, and the app never starts.
    url = URL.create("postgresql+psycopg", host="localhost", database="docs")
    quiet = logging.getLogger("workqueue")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the start-up warnings (no webhook secret) are not news here
    try:
        return dict(create_app(settings, config, database_url=url).openapi())
    finally:
        quiet.setLevel(level)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " or ".join(_schema_name(part) for part in schema[combinator])
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


def render_openapi(document: dict[str, Any]) -> str:
    info = document["info"]
    lines = [
        "# HTTP API (generated)",
        "",
        (
            f"Generated from the OpenAPI {document['openapi']} document of "
            f"{info['title']} {info['version']} at build time; the same document is "
            "served by the service at `/openapi.json` and is here as "
            "[openapi.json](openapi.json). The [hand-written reference](http-api.md) "
            "explains the behaviour behind each answer."
        ),
        "",
    ]
    for path, operations in document["paths"].items():
        for method in METHODS:
            if method in operations:
                lines += _render_operation(method, path, operations[method])
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", ""]
        for name, schema in schemas.items():
            lines += _render_schema(name, schema)
    return "\n".join(lines) + "\n"


def _render_operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    if operation.get("summary"):
        lines += [f"**{operation['summary']}**", ""]
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += [
            "| parameter | in | type | required | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for parameter in parameters:
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | "
                f"{_schema_name(parameter.get('schema', {}))} | "
                f"{'yes' if parameter.get('required') else 'no'} | "
                f"{_cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {})
    for media_type, content in body.items():
        lines += [f"Request body (`{media_type}`): {_schema_name(content.get('schema', {}))}", ""]
    responses = operation.get("responses", {})
    if responses:
        lines += ["| status | meaning | body |", "| --- | --- | --- |"]
        for status, response in responses.items():
            contents: dict[str, Any] = response.get("content", {})
            first: dict[str, Any] = next(iter(contents.values()), {})
            schema = first.get("schema")
            lines.append(
                f"| {status} | {_cell(response.get('description', ''))} | "
                f"{_schema_name(schema) if schema else ''} |"
            )
        lines.append("")
    return lines


def _render_schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    properties = schema.get("properties", {})
    if not properties:
        lines += [f"Type: {_schema_name(schema)}", ""]
        return lines
    required = set(schema.get("required", []))
    lines += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
    for field, definition in properties.items():
        lines.append(
            f"| `{field}` | {_schema_name(definition)} | {'yes' if field in required else 'no'} | "
            f"{_cell(definition.get('description', definition.get('title', '')))} |"
        )
    lines.append("")
    return lines


# -- CLI ---------------------------------------------------------------------------
# typer builds the command tree on its own copy of click, so the tree is read
# through click's public attributes only, never by isinstance on click's classes.


def render_cli() -> str:
    from workqueue.cli.main import app  # noqa: PLC0415

    root = typer.main.get_command(app)
    context = root.make_context("workqueue-service", [], resilient_parsing=True)
    lines = [
        "# Command line (generated)",
        "",
        (
            "Every `workqueue-service` command with its arguments and options, read from "
            "the program's own command definitions when the site is built. What the "
            "commands do, their exit codes and examples: the [command line reference](cli.md)."
        ),
        "",
    ]
    for name in sorted(root.list_commands(context)):  # type: ignore[attr-defined]
        command = root.get_command(context, name)  # type: ignore[attr-defined]
        if command is not None and not command.hidden:
            lines += _render_command(name, command, context)
    return "\n".join(lines) + "\n"


def _render_command(name: str, command: Any, parent: Any) -> list[str]:
    context = command.make_context(name, [], parent=parent, resilient_parsing=True)
    usage = " ".join(command.collect_usage_pieces(context))
    lines = [f"## `{name}`", "", f"```\nworkqueue-service {name} {usage}\n```", ""]
    if command.help:
        lines += [command.help.strip(), ""]
    rows = []
    for parameter in command.get_params(context):
        # The same (option and value, help with default) pair `--help` prints.
        record = parameter.get_help_record(context)
        if record is None or parameter.name == "help":
            continue
        rows.append((f"`{record[0]}`", _cell(record[1])))
    if rows:
        lines += ["| option | meaning |", "| --- | --- |"]
        lines += [f"| {option} | {meaning} |" for option, meaning in rows]
        lines.append("")
    return lines
