"""Running the real `workqueue-service` client commands against a live app (tests/cli).

One app per test module (a fresh database, the GitLab simulator behind it),
served over real HTTP; tests keep apart by using their own source branches and
packages. The commands run as `python -m workqueue ...` subprocesses with an
environment that has no server config and no DATABASE_URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from databases import create_database_from, drop_database
from live_app import serve_in_thread
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.plugin import InstallContext

LOCAL_USER = "dev-user"
COMMAND_TIMEOUT = 60


@dataclass
class Service:
    url: str
    simulator: GitLabSimulator
    http: httpx.Client  # the API directly, for setting up and checking


@contextmanager
def live_service(
    database_url,
    *,
    mr_options: dict[str, Any] | None = None,
    projects: dict[str, dict[str, str]] | None = None,
) -> Iterator[Service]:
    """`mr_options` go into `handled_types.mr`; `projects` (path: files) replace PROJECT."""
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    for path, files in (projects or {PROJECT: FILES}).items():
        simulator.create_project(path, files)
    config = ServiceConfig.model_validate(
        {
            "authorization": {"rules": []},
            "processing": {
                "workers": 2,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                # A failed action waits long enough that items stay `active` for the
                # whole module: the tests decide when an item ends.
                "backoff_initial_seconds": 60,
                "backoff_max_seconds": 60,
            },
            # The CLI sends any file; binary ones only pass where the type accepts them.
            "handled_types": {
                "mr": {
                    "gitlab_url": simulator.url,
                    "content": {"binary_paths": ["assets/**"]},
                    **(mr_options or {}),
                }
            },
        }
    )
    app = create_app(
        Settings(WORKQUEUE_SERVICE_LOCAL_AUTH_USER=LOCAL_USER),
        config,
        database_url=database_url,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    try:
        with (
            serve_in_thread(app) as base_url,
            httpx.Client(base_url=base_url, timeout=30) as http,
        ):
            yield Service(base_url, simulator, http)
    finally:
        simulator.stop()
    assert simulator.errors == []


def module_service(server_url, template_url, **options: Any) -> Iterator[Service]:
    """Body of each module's `service` fixture: a fresh database and app for the module
    (`options`: those of `live_service`)."""
    database_url = create_database_from(server_url, template_url.database)
    try:
        with live_service(database_url, **options) as running:
            yield running
    finally:
        drop_database(server_url, database_url)


def cli_env(url: str | None, **extra: str) -> dict[str, str]:
    """The caller's environment: no server settings at all, a config path that does not exist."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["WORKQUEUE_SERVICE_CONFIG"] = "/nonexistent/workqueue/config.yml"
    env["COLUMNS"] = "160"  # rich tables without folding, whatever the test runner's terminal
    if url is not None:
        env["WORKQUEUE_SERVICE_URL"] = url
    env.update(extra)
    return env


def start_cli(*args: str, url: str | None, **extra_env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "workqueue", *args],
        env=cli_env(url, **extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cli(*args: str, url: str | None, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return finish(start_cli(*args, url=url, **extra_env))


def run_cli_together(
    *commands: tuple[str, ...], url: str | None
) -> list[subprocess.CompletedProcess[str]]:
    """Several independent commands at once (each pays the interpreter's start-up)."""
    processes = [start_cli(*command, url=url) for command in commands]
    return [finish(process) for process in processes]


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert "Traceback" not in stderr, stderr
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def branch() -> str:
    return f"workqueue/cli-{uuid.uuid4().hex[:10]}"


def submit_body(**overrides: Any) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "source_branch": branch(),
        "title": "Sync kernel sources",
        "commit_message": "Sync sources from upstream",
        "file_actions": [
            {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}
        ],
        **overrides,
    }


def api_submit(service: Service, **overrides: Any) -> dict[str, Any]:
    answer = service.http.post("/api/work-items/mr", json=submit_body(**overrides))
    assert answer.status_code == 201, answer.text
    return answer.json()


def submit_args(*extra: str, source_branch: str | None = None) -> tuple[str, ...]:
    return (
        "submit",
        "--project",
        PROJECT,
        "--source-branch",
        source_branch or branch(),
        "--title",
        "Sync kernel sources",
        "--commit-message",
        "Sync sources from upstream",
        *extra,
    )


@dataclass
class RecordingServer:
    """A stand-in service that records request headers and answers one canned response."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""


@contextmanager
def recording_server(status: int, body: Any, content_type: str = "application/json"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    recorder = RecordingServer(status, raw, content_type)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            recorder.headers.append(dict(self.headers.items()))
            payload = recorder.body.replace(
                b"{authorization}", self.headers.get("Authorization", "").encode()
            )
            self.send_response(recorder.status)
            self.send_header("Content-Type", recorder.content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
