"""The TCP socket a server command listens on, taken before anything else starts.

Binding first means a busy port is a one-line error (exit 3) before the
embedded PostgreSQL, migrations or the engine have been started for nothing,
and no other process can take the port between our check and uvicorn's start.
"""

from __future__ import annotations

import errno
import socket

EXIT_CANNOT_LISTEN = 3
BACKLOG = 2048  # uvicorn's default


class ListenError(Exception):
    """The address cannot be listened on: busy, not ours to bind, or not a local address."""


def listen_on(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port`, ready to hand to uvicorn."""
    where = f"{host}:{port}"
    try:
        found = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise ListenError(f"cannot listen on {where}: {error.strerror}") from None
    family, kind, protocol, _, address = found[0]
    listener = socket.socket(family, kind, protocol)
    try:
        # Lets a restarted server reuse the port while old connections linger in TIME_WAIT.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(BACKLOG)
    except OSError as error:
        listener.close()
        reason = (error.strerror or str(error)).lower()
        if error.errno == errno.EADDRINUSE:
            reason += " (is another server running there? stop it or choose another --port)"
        raise ListenError(f"cannot listen on {where}: {reason}") from None
    return listener
