"""The rendered manifests' own commands, run against a real PostgreSQL in Kubernetes' order.

A fresh, empty database stands for a new installation: the replicas' init
container waits while the schema is missing, the migration Job's command
migrates, the init container then lets the replica start, and `serve` with
the Deployment's arguments (`--no-migrate`) and the ConfigMap's
configuration becomes ready. Only the address is changed, to loopback and a
free port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from databases import admin_connection, drop_database
from kustomize_build import build
from live_app import free_port
from psycopg import sql
from sqlalchemy.engine import URL

ROOT = Path(__file__).resolve().parents[2]
IMAGE_SCRIPT = "/opt/workqueue/libexec/wait_for_schema.py"


@pytest.fixture
def empty_database(server_url: URL) -> Iterator[URL]:
    url = server_url.set(database=f"workqueue_deploy_{os.getpid()}_{time.monotonic_ns()}")
    with admin_connection(server_url) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(url.database)))
    try:
        yield url
    finally:
        drop_database(server_url, url)


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    resources = build(ROOT / "deploy" / "kubernetes" / "base")
    return {resource["kind"]: resource for resource in resources}


def _environment(database: URL, **extra: str) -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WORKQUEUE_SERVICE_", "OTEL_", "SENTRY_"))
    }
    environment.update(
        DATABASE_URL=database.render_as_string(hide_password=False),
        WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL="1",  # as the image sets it
        **extra,
    )
    return environment


def _local(command: list[str]) -> list[str]:
    """The container's command with this checkout's interpreter and script."""
    if command[0] == "workqueue-service":
        return [sys.executable, "-m", "workqueue", *command[1:]]
    assert command[:2] == ["python", IMAGE_SCRIPT]
    return [sys.executable, str(ROOT / "deploy" / "container" / "wait_for_schema.py"), *command[2:]]


def _wait_then_migrate(waiter: dict, job_container: dict, environment: dict[str, str]) -> None:
    # Before the Job: the init container keeps waiting, and says why.
    quick = [*_local(waiter["command"]), "--timeout", "1", "--interval", "0.2"]
    waited = subprocess.run(
        quick, env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    assert waited.returncode == 1
    assert "waiting for the migration Job: schema at None, this build needs" in waited.stdout

    waiting = subprocess.Popen(
        [*_local(waiter["command"]), "--interval", "0.2"],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        migrated = subprocess.run(
            _local(["workqueue-service", *job_container["args"]]),
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert migrated.returncode == 0, migrated.stderr
        assert waiting.wait(timeout=60) == 0
    finally:
        if waiting.poll() is None:
            waiting.kill()
        output = waiting.communicate()[0]
    assert "schema is at" in output


def _wait_until_ready(base: str, path: str, process: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            answer = httpx.get(f"{base}{path}", timeout=2)
            if answer.status_code == 200:
                return answer
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"serve never became ready (exit code {process.poll()})")


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return process.communicate()[1]


def test_init_container_waits_for_the_job_then_serve_without_migrating_is_ready(
    empty_database, manifests, tmp_path
):
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    [waiter] = pod["initContainers"]
    [job_container] = manifests["Job"]["spec"]["template"]["spec"]["containers"]
    [server] = pod["containers"]
    _wait_then_migrate(waiter, job_container, _environment(empty_database))

    config = tmp_path / "config.yml"
    config.write_text(manifests["ConfigMap"]["data"]["config.yml"])
    arguments = list(server["args"])
    port = free_port()
    arguments[arguments.index("--host") + 1] = "127.0.0.1"
    arguments[arguments.index("--port") + 1] = str(port)
    assert "--no-migrate" in arguments
    serving = subprocess.Popen(
        _local(["workqueue-service", *arguments]),
        env=_environment(
            empty_database,
            WORKQUEUE_SERVICE_CONFIG=str(config),
            WORKQUEUE_SERVICE_GITLAB_TOKEN="not-a-real-token",
            WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET="a-webhook-secret",
        ),
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        ready = _wait_until_ready(base, server["readinessProbe"]["httpGet"]["path"], serving)
        assert ready.json() == {"status": "ready"}
        assert httpx.get(f"{base}{server['livenessProbe']['httpGet']['path']}").status_code == 200
        assert "workqueue_items" in httpx.get(f"{base}/metrics").text
    finally:
        log = _stop(serving)
    assert serving.returncode == 0, log
    assert '"message"' in log  # JSON logs, as --log-format json asks
