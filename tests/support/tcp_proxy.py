"""A TCP proxy for fault injection between the service and PostgreSQL (or anything else).

It listens on 127.0.0.1 and forwards each connection to an upstream, a unix socket
(the embedded cluster listens on one) or a TCP address. From any thread, a test can:

* `drop()` — abort every open connection at once (a network reset, a failover);
* `stall(seconds)` — delay every chunk by `seconds` in both directions until
  `unstall()` (a congested link);
* `blackhole(seconds)` — pass no byte in either direction, on open and new
  connections alike, then abort all of them after `seconds` (packets vanishing until
  the peers' timeouts give up, as toxiproxy's `timeout` toxic does);
* `cut()` — abort every connection and close each new one at once, until `restore()`
  (the server is down).

The event loop runs in a daemon thread; `close()` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CHUNK = 65536


@dataclass
class ProxyCounters:
    connections: int = 0
    aborted: int = 0


class _Connection:
    def __init__(self, downstream: asyncio.StreamWriter) -> None:
        self.writers: list[asyncio.StreamWriter] = [downstream]

    def abort(self) -> None:
        for writer in self.writers:
            writer.transport.abort()


class TcpProxy:
    def __init__(self, upstream: Path | tuple[str, int]) -> None:
        self._upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tcp-proxy", daemon=True
        )
        self._connections: set[_Connection] = set()
        self._latency = 0.0
        self._refusing = False
        self.counters = ProxyCounters()
        self._thread.start()
        self._flowing: asyncio.Event = self._call(self._new_event())
        self._server = self._call(self._listen())
        self.port: int = self._server.sockets[0].getsockname()[1]

    # -- control, from any thread --------------------------------------------------------

    def drop(self) -> int:
        """Abort every open connection; returns how many there were."""
        return self._call(self._abort_all())

    def stall(self, seconds: float) -> None:
        self._latency = seconds

    def unstall(self) -> None:
        self._latency = 0.0

    def blackhole(self, seconds: float) -> int:
        """Swallow all traffic for `seconds`, then abort the connections; blocks meanwhile."""
        self._loop.call_soon_threadsafe(self._flowing.clear)
        try:
            threading.Event().wait(seconds)
            return self.drop()
        finally:
            self._loop.call_soon_threadsafe(self._flowing.set)

    def cut(self) -> int:
        self._refusing = True
        return self.drop()

    def restore(self) -> None:
        self._refusing = False

    def close(self) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- the loop's side -----------------------------------------------------------------

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    @staticmethod
    async def _new_event() -> asyncio.Event:
        event = asyncio.Event()
        event.set()
        return event

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _abort_all(self) -> int:
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        self.counters.aborted += len(connections)
        return len(connections)

    async def _shutdown(self) -> None:
        self._server.close()
        await self._abort_all()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(writer)
        if self._refusing:
            connection.abort()
            return
        self._connections.add(connection)
        self.counters.connections += 1
        try:
            await self._flowing.wait()
            if isinstance(self._upstream, Path):
                up_reader, up_writer = await asyncio.open_unix_connection(str(self._upstream))
            else:
                up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            connection.writers.append(up_writer)
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(connection)
            connection.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(_CHUNK):
                await self._flowing.wait()
                if self._latency:
                    await asyncio.sleep(self._latency)
                writer.write(data)
                await writer.drain()
        finally:
            # One direction ending (or failing) ends the connection: the peer learns at once.
            writer.transport.abort()


@contextmanager
def running_proxy(upstream: Path | tuple[str, int]) -> Iterator[TcpProxy]:
    proxy = TcpProxy(upstream)
    try:
        yield proxy
    finally:
        proxy.close()
