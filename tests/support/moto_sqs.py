"""A real SQS API for tests: moto in server mode, on a free port of this machine."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@contextmanager
def moto_endpoint() -> Iterator[str]:
    """The endpoint URL while the server runs."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
