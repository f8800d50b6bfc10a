"""`workqueue-service serve` / `migrate` as an operator runs them: real processes, real signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml
from databases import create_database_from, drop_database
from harness import wait_until

from workqueue.db.engine import build_engine
from workqueue.db.migrate import current_revision, head_revision

pytestmark = pytest.mark.slow

CONFIG = "processing:\n  workers: 2\nhandled_types: {}\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(config_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["WORKQUEUE_SERVICE_CONFIG"] = str(config_path)
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workqueue", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def config_path(tmp_path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def data_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="workqueue-serve-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_with_embedded_postgres_answers_and_stops_cleanly(config_path, data_dir, stop_signal):
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workqueue",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        env=_environment(config_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=60, what="the service to become ready")
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{base}/openapi.json").status_code == 200
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        server.send_signal(stop_signal)
        output, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, output
    assert "Traceback" not in output
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    assert (
        not Path(f"/proc/{postmaster}").exists()
        or "zombie" in Path(f"/proc/{postmaster}/status").read_text()
    )


def test_unreachable_database_is_one_line_naming_the_masked_url(config_path):
    result = _run(
        ["serve"],
        _environment(config_path, DATABASE_URL="postgresql://bot:s3cret@127.0.0.1:1/queue"),
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        "error: cannot connect to the database at postgresql+psycopg://bot:***@127.0.0.1:1/queue"
    )
    assert "s3cret" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("extra", "config_text", "expected"),
    [
        ({"DATABASE_URL": "mysql://a:pw@h/db"}, CONFIG, "error: invalid settings: DATABASE_URL"),
        ({}, "processing:\n  workers: 0\n", "processing.workers: Input should be greater"),
        ({}, "procesing: {}\n", "procesing: Extra inputs are not permitted"),
        ({}, "handled_types:\n  teapot: {}\n", "handled_types.teapot: unknown item type"),
    ],
)
def test_invalid_settings_or_config_are_one_clear_line(tmp_path, extra, config_text, expected):
    config_path = tmp_path / "config.yml"
    config_path.write_text(config_text)
    env = _environment(config_path, **{"DATABASE_URL": "postgresql://127.0.0.1:1/x", **extra})
    result = _run(["serve"], env)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_config_file_is_named(tmp_path):
    missing = tmp_path / "nope.yml"
    result = _run(["serve"], _environment(missing, DATABASE_URL="postgresql://127.0.0.1:1/x"))
    assert result.returncode == 2
    assert f"{missing}: configuration file not found" in result.stderr


def test_migrate_brings_a_database_to_head(server_url, config_path):
    url = create_database_from(server_url, "template0")
    try:
        env = _environment(config_path, DATABASE_URL=url.render_as_string(hide_password=False))
        first, second = _run(["migrate"], env), _run(["migrate"], env)
        assert (first.returncode, second.returncode) == (0, 0), first.stderr
        assert "up to date" in first.stdout
        engine = build_engine(url, pool_size=1)
        try:
            with engine.connect() as connection:
                assert current_revision(connection) == head_revision()
        finally:
            engine.dispose()
    finally:
        drop_database(server_url, url)


def test_help_lists_the_server_commands():
    result = _run(["--help"], dict(os.environ))
    assert result.returncode == 0
    assert "serve" in result.stdout
    assert "migrate" in result.stdout


def _serve_until_ready_then_sigterm(
    server_url, config_path, *extra_args: str
) -> tuple[int, str, str]:
    """Run `serve` on a fresh external database; return (exit code, stdout, stderr)."""
    url = create_database_from(server_url, "template0")
    port = _free_port()
    env = _environment(config_path, DATABASE_URL=url.render_as_string(hide_password=False))
    server = subprocess.Popen(
        [sys.executable, "-m", "workqueue", "serve", "--port", str(port), *extra_args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=60, what="the service to become ready")
        server.send_signal(signal.SIGTERM)
        output, errors = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
        drop_database(server_url, url)
    return server.returncode, output, errors


def test_serve_on_an_external_database_stops_cleanly_on_sigterm(server_url, config_path):
    code, output, errors = _serve_until_ready_then_sigterm(server_url, config_path)
    assert code == 0, output + errors
    assert "Traceback" not in output + errors


def test_bad_option_values_are_usage_errors(config_path):
    result = _run(["serve", "--log-level", "loud"], _environment(config_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "loud" in result.stderr


def test_json_logs_are_one_object_per_line(server_url, config_path):
    code, _, errors = _serve_until_ready_then_sigterm(
        server_url, config_path, "--log-format", "json"
    )
    assert code == 0
    lines = [line for line in errors.splitlines() if line.strip()]
    assert lines
    not_json = [line for line in lines if not line.startswith("{")]
    assert not_json == []
    records = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    assert any(record["logger"].startswith("uvicorn") for record in records)


def test_config_schema_describes_the_file(tmp_path):
    result = _run(["config-schema"], dict(os.environ))
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    validator = jsonschema.Draft202012Validator(schema)
    example = yaml.safe_load(
        (Path(__file__).parents[2] / "examples" / "dev-config.yml").read_text()
    )
    assert list(validator.iter_errors(example)) == []
    assert list(validator.iter_errors({"handled_types": {"mr": {"colour": "blue"}}}))
    assert list(validator.iter_errors({"surprise": 1}))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])  # noqa: S104
def test_the_local_dev_user_is_refused_on_a_non_loopback_address(config_path, host):
    # The database is unreachable on purpose: the refusal must come before it is needed.
    env = _environment(
        config_path,
        DATABASE_URL="postgresql://127.0.0.1:1/x",
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev",
    )
    result = _run(["serve", "--host", host], env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "WORKQUEUE_SERVICE_LOCAL_AUTH_USER" in lines[0]
    assert "loopback" in lines[0]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_the_local_dev_user_is_accepted_on_loopback(config_path, host):
    env = _environment(
        config_path,
        DATABASE_URL="postgresql://127.0.0.1:1/x",
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev",
    )
    result = _run(["serve", "--host", host], env)
    # It gets as far as the (unreachable) database.
    assert result.returncode == 1
    assert "cannot connect to the database" in result.stderr
