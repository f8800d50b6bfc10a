"""Where the client commands look for the service, what they send it, and when it is away.

The commands here need no real service (stand-ins record what they receive), so
the module starts them all at once and each test checks one of the outcomes.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from cli_client_support import finish, recording_server, start_cli

SECRET = "s3cr3t-cli-token"
ITEM_ID = str(uuid.uuid4())


@contextmanager
def closed_port() -> Iterator[int]:
    """A port nobody listens on, held bound (never listening) so that no other test's
    server can take it meanwhile: a connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@pytest.fixture(scope="module")
def outcomes():
    with ExitStack() as stack:
        # The stand-ins echo the Authorization header back in their error detail.
        echo = {"detail": "token rejected: {authorization}"}
        with_token = stack.enter_context(recording_server(401, echo))
        anonymous = stack.enter_context(recording_server(401, echo))
        closed = f"http://127.0.0.1:{stack.enter_context(closed_port())}"
        processes = {
            "closed_port": start_cli("retry", "--id", ITEM_ID, url=closed),
            "with_token": start_cli(
                "status", "--id", ITEM_ID, url=with_token.url, WORKQUEUE_SERVICE_TOKEN=SECRET
            ),
            # An empty variable means no token, not an empty one.
            "anonymous": start_cli(
                "status", "--id", ITEM_ID, url=anonymous.url, WORKQUEUE_SERVICE_TOKEN=""
            ),
        }
        results = {name: finish(process) for name, process in processes.items()}
        results["with_token_headers"] = with_token.headers
        results["anonymous_headers"] = anonymous.headers
    return results


def test_a_closed_port_is_unreachable(outcomes):
    result = outcomes["closed_port"]
    assert (result.returncode, result.stdout) == (3, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: cannot reach http://127.0.0.1:")


def test_the_token_from_the_environment_is_sent_and_never_printed(outcomes):
    (headers,) = outcomes["with_token_headers"]
    assert headers["Authorization"] == f"Bearer {SECRET}"
    result = outcomes["with_token"]
    assert result.returncode == 1
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr == "error: HTTP 401 Unauthorized: token rejected: Bearer ***\n"


def test_without_a_token_no_authorization_header_is_sent(outcomes):
    (headers,) = outcomes["anonymous_headers"]
    assert "Authorization" not in headers
    result = outcomes["anonymous"]
    assert result.returncode == 1
    assert result.stderr == (
        "error: HTTP 401 Unauthorized: token rejected:  (WORKQUEUE_SERVICE_TOKEN is not set)\n"
    )
