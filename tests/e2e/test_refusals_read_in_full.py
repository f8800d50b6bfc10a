"""A refusal the sender can read (API.md v1.2): a client that writes its whole body before
reading, as GitLab's hook sender and plain HTTP libraries do, gets the 413 (or the
token-less 401) instead of a connection reset. Against `workqueue-service serve` as an
operator runs it (uvicorn with httptools), and uvicorn's h11 fallback as `serve` builds it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import yaml
from auth_support import LocalIssuer, claims_for, rsa_key, sign
from databases import create_database_from, drop_database
from harness import wait_until
from live_app import free_port

from workqueue.api.app import create_app
from workqueue.cli.server import build_uvicorn
from workqueue.config import ServiceConfig
from workqueue.settings import Settings

pytestmark = pytest.mark.slow

SECRET = "drain-secret"
MIB = 1024 * 1024
WEBHOOK = "/api/webhooks/gitlab"
SUBMIT = "/api/work-items/mr"


@dataclass(frozen=True)
class Service:
    base_url: str
    token: str  # a bearer token the service accepts


@pytest.fixture(scope="module")
def issuer() -> Iterator[tuple[LocalIssuer, object]]:
    key = rsa_key("drain-key")
    server = LocalIssuer()
    server.publish(key)
    server.start()
    yield server, key
    server.stop()


@pytest.fixture(scope="module")
def module_database(server_url, template_url) -> Iterator[object]:
    url = create_database_from(server_url, template_url.database)
    yield url
    drop_database(server_url, url)


def config(issuer_url: str) -> dict[str, object]:
    return {
        "authorization": {
            "rules": [
                {
                    "issuer": issuer_url,
                    "claims": {"aud": "workqueue-service", "sub": "drain-test"},
                    "permissions": ["read", "submit"],
                    "projects": ["**"],
                }
            ]
        },
        "processing": {"workers": 1},
        "handled_types": {},
    }


def bearer(issuer: LocalIssuer, key: object) -> str:
    claims = claims_for(issuer.issuer, sub="drain-test", aud="workqueue-service")
    return f"Bearer {sign(claims, key)}"


@pytest.fixture(scope="module")
def serve_process(module_database, issuer, tmp_path_factory) -> Iterator[Service]:
    """`workqueue-service serve`, a real process, on the module's database."""
    local_issuer, key = issuer
    directory = tmp_path_factory.mktemp("drain")
    config_path = directory / "config.yml"
    config_path.write_text(yaml.safe_dump(config(local_issuer.issuer)))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env.update(
        DATABASE_URL=module_database.render_as_string(hide_password=False),
        WORKQUEUE_SERVICE_CONFIG=str(config_path),
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRET,
    )
    log_path = directory / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "workqueue", "serve", "--port", str(port), "--no-migrate"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(base_url, process), timeout=60, what="serve to be ready")
        yield Service(base_url, bearer(local_issuer, key))
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert "Traceback" not in log_path.read_text(errors="replace")


def _ready(base_url: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"serve exited with {process.returncode}")
    try:
        return httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def h11_server(module_database, issuer) -> Iterator[Service]:
    """The same application and server configuration as `serve`, on h11 (uvicorn's
    parser when httptools is not installed), in a thread of this process."""
    local_issuer, key = issuer
    app = create_app(
        Settings(WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRET),
        ServiceConfig.model_validate(config(local_issuer.issuer)),
        database_url=module_database,
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = build_uvicorn(app, listener, "warning")
    server.config.http = "h11"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=30, what="the h11 server to start")
        port = listener.getsockname()[1]
        yield Service(f"http://127.0.0.1:{port}", bearer(local_issuer, key))
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


@pytest.fixture(params=["serve", "h11"])
def service(request) -> Service:
    return request.getfixturevalue("serve_process" if request.param == "serve" else "h11_server")


def send_everything_then_read(base_url: str, head: bytes, body: bytes) -> bytes:
    """Write the request head and the whole body without waiting, then read the answer."""
    port = int(base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(head + body)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, BrokenPipeError) as error:
            pytest.fail(f"the connection was reset instead of answered: {error!r}")
    return received


def request_head(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_body(size: int) -> bytes:
    return b'{"pad": "' + b"x" * (size - 11) + b'"}'


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_webhook_over_its_limit_sent_in_full_reads_its_413(service):
    body = json_body(2 * MIB)
    head = request_head(WEBHOOK, {"X-Gitlab-Token": SECRET, "Content-Length": str(len(body))})
    answer = send_everything_then_read(service.base_url, head, body)
    assert status_of(answer) == 413
    assert answer.endswith(b'{"detail":"request body larger than 1048576 bytes"}')


def test_a_chunked_webhook_over_its_limit_sent_in_full_reads_its_413(service):
    piece = b"x" * 65536
    chunks = [b'{"pad": "', *([piece] * 32), b'"}']
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    head = request_head(WEBHOOK, {"X-Gitlab-Token": SECRET, "Transfer-Encoding": "chunked"})
    assert status_of(send_everything_then_read(service.base_url, head, body)) == 413


def test_an_api_body_over_its_limit_sent_in_full_reads_its_413(service):
    body = json_body(17 * MIB)  # over the API's 16 MiB
    head = request_head(SUBMIT, {"Authorization": service.token, "Content-Length": str(len(body))})
    answer = send_everything_then_read(service.base_url, head, body)
    assert status_of(answer) == 413
    assert b"request body larger than 16777216 bytes" in answer


def test_a_body_without_a_token_sent_in_full_reads_its_401(service):
    body = json_body(2 * MIB)
    for path, status in ((SUBMIT, 401), (WEBHOOK, 401)):
        head = request_head(path, {"Content-Length": str(len(body))})
        answer = send_everything_then_read(service.base_url, head, body)
        assert status_of(answer) == status
        assert b"cache-control: no-store" in answer.lower()
