"""Fixtures for the GitLab simulator tests: a running simulator, a python-gitlab client
configured as production will configure it, and a local webhook receiver."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gitlab
import httpx
import pytest

from workqueue.testing.gitlab_simulator import GitLabSimulator

PROJECT_PATH = "acme/platform/widgets"
INITIAL_FILES = {
    "README.md": "# widgets\n",
    "requirements.txt": "requests==2.31.0\nflask==3.0.0\nrich==13.7.0\n",
    "src/app.py": "print('hello')\n",
    "scripts/build.sh": "#!/bin/sh\necho build\n",
}


@pytest.fixture
def sim() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token="test-token")
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == [], "the simulator crashed while handling a request"


@pytest.fixture
def project_path() -> str:
    return PROJECT_PATH


@pytest.fixture
def project_id(sim: GitLabSimulator) -> int:
    return sim.create_project(PROJECT_PATH, INITIAL_FILES, executable=["scripts/build.sh"])


def make_client(sim: GitLabSimulator, **options: Any) -> gitlab.Gitlab:
    options.setdefault("retry_transient_errors", False)
    options.setdefault("private_token", sim.token)
    return gitlab.Gitlab(sim.url, timeout=10, **options)


@pytest.fixture
def client_factory(sim: GitLabSimulator) -> Iterator[Callable[..., gitlab.Gitlab]]:
    """Builds extra clients (other tokens, retries on); all are closed after the test."""
    clients: list[gitlab.Gitlab] = []

    def build(**options: Any) -> gitlab.Gitlab:
        client = make_client(sim, **options)
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.session.close()


@pytest.fixture
def gl(sim: GitLabSimulator) -> Iterator[gitlab.Gitlab]:
    with make_client(sim) as client:
        yield client


@pytest.fixture
def api(sim: GitLabSimulator) -> Iterator[httpx.Client]:
    """Raw HTTP access to the API with the bot's token, for what python-gitlab hides."""
    with httpx.Client(base_url=sim.api_url, headers={"PRIVATE-TOKEN": sim.token}) as client:
        yield client


@pytest.fixture
def project(gl: gitlab.Gitlab, project_id: int) -> Any:
    return gl.projects.get(PROJECT_PATH)


@pytest.fixture
def bot_branch(project: Any) -> dict[str, Any]:
    """The service's first step: one commit on a new branch built from main."""
    return project.commits.create(
        {
            "branch": "bot/bump-requests",
            "start_branch": "main",
            "commit_message": "Bump requests to 2.32.3",
            "actions": [
                {
                    "action": "update",
                    "file_path": "requirements.txt",
                    "content": "requests==2.32.3\nflask==3.0.0\nrich==13.7.0\n",
                }
            ],
        }
    ).attributes


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    payload: Any


@dataclass
class Receiver:
    url: str
    deliveries: list[Delivery] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A minimal webhook endpoint that records what it is sent."""
    received: list[Delivery] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append(Delivery(self.path, dict(self.headers.items()), json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hooks", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
