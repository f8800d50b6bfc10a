"""`serve` runs uvicorn on uvloop and httptools, which the package depends on."""

from __future__ import annotations

import socket

import uvloop
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from workqueue.cli.server import build_uvicorn


def test_the_server_uses_uvloop_and_httptools():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        server = build_uvicorn(FastAPI(), listener, "info")
        server.config.load()

        loop = server.config.get_loop_factory()()
        try:
            assert isinstance(loop, uvloop.Loop)
        finally:
            loop.close()
        assert server.config.http_protocol_class is HttpToolsProtocol
