"""The documentation site: builds strictly, generates the API and CLI references, needs no CDN."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import typer.main
from mkdocs.commands.build import build
from mkdocs.config import load_config

from workqueue.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reference_pages", ROOT / "docs" / "hooks" / "reference_pages.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("site")
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(directory))
    assert config["strict"] is True  # a broken link or anchor fails the build
    build(config)
    return directory


def test_the_generated_reference_pages_are_built(site):
    for page in ("reference/api.html", "reference/cli-commands.html", "reference/openapi.json"):
        assert (site / page).is_file(), page
    for page in ("howto/deploy-kubernetes.html", "howto/upgrade.html", "howto/operate.html"):
        assert (site / page).is_file(), page


def test_pages_load_nothing_from_other_hosts(site):
    external = re.compile(r"""<(?:script|link|img)\b[^>]*(?:src|href)=["']https?://""")
    offenders = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if external.search(page.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_operation_and_schema_of_the_openapi_document_is_rendered():
    hook = _hook()
    document = hook.openapi_document()
    page = hook.render_openapi(document)
    operations = [
        (method, path)
        for path, methods in document["paths"].items()
        for method in methods
        if method in hook.METHODS
    ]
    assert len(operations) >= 8
    for method, path in operations:
        assert f"## `{method.upper()} {path}`" in page
    assert "## `POST /api/work-items/mr`" in page
    assert "## `POST /api/webhooks/gitlab`" in page
    for name in document["components"]["schemas"]:
        assert f"### {name}\n" in page


def test_every_command_and_option_of_the_cli_is_rendered():
    page = _hook().render_cli()
    root = typer.main.get_command(app)
    context = root.make_context("workqueue-service", [], resilient_parsing=True)
    names = root.list_commands(context)  # type: ignore[attr-defined]
    assert {"serve", "migrate", "config-schema", "submit", "status", "retry", "cancel"} <= set(
        names
    )
    for name in names:
        assert f"## `{name}`" in page
        command = root.get_command(context, name)  # type: ignore[attr-defined]
        for parameter in command.get_params(context):
            for option in parameter.opts:
                if option != "--help":
                    section = page.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
                    assert option in section, (name, option)
    assert "`--no-migrate`" in page


def test_the_index_links_the_deployment_guides():
    index = (ROOT / "docs" / "index.md").read_text()
    for page in ("howto/deploy-kubernetes.md", "howto/upgrade.md", "howto/operate.md"):
        assert f"]({page})" in index, page
