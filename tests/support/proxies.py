"""TCP proxies on loopback that put a fault at an exact point of a real exchange, for the fault tests.

:class:`TcpProxy` passes bytes both ways between a client and a real server; while its ``hold`` event is
unset it accepts connections and forwards nothing (a server that has stopped answering — e.g. the API server
seen by a worker about to write its receipt). :class:`NatsAckProxy` sits between a NATS client and a real
nats-server, passes every protocol frame as it is, and drops the first ``drop_acks`` JetStream publish
acknowledgements (a reply whose JSON has ``stream`` and ``seq``): the stream has stored the message, the
publisher never learns it. Both run in the caller's asyncio loop::

    async with NatsAckProxy(upstream_port=server.port, drop_acks=1) as proxy:
        ...  # connect to proxy.url
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from types import TracebackType

from tools.controlplane.cluster import free_port

__all__ = ["NatsAckProxy", "TcpProxy", "is_pub_ack"]


def is_pub_ack(payload: bytes) -> bool:
    """Whether a NATS message payload is a JetStream publish acknowledgement (``{"stream":…,"seq":…}``)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return False
    return isinstance(value, dict) and "stream" in value and "seq" in value


@dataclass
class TcpProxy:
    """A loopback TCP proxy to ``127.0.0.1:upstream_port``; an async context manager.

    Args:
        upstream_port: the real server's port.
        hold: when set and not yet set (``is_set()`` false), each new connection is accepted and counted in
            :attr:`held` but not forwarded until the event is set.
    """

    upstream_port: int
    hold: asyncio.Event | None = None
    port: int = field(default=0, init=False)
    connections: int = field(default=0, init=False)
    """Connections accepted so far."""
    held: int = field(default=0, init=False)
    """Connections that arrived while :attr:`hold` was unset."""
    _server: asyncio.Server | None = field(default=None, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    async def start(self) -> TcpProxy:
        self.port = free_port()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            if self.hold is not None and not self.hold.is_set():
                self.held += 1
                await self.hold.wait()
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            pipes = [asyncio.ensure_future(self._client_to_server(reader, up_writer)),
                     asyncio.ensure_future(self._server_to_client(up_reader, writer))]
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in pipes:
                    pipe.cancel()
                for pipe in pipes:
                    with contextlib.suppress(asyncio.CancelledError, OSError, asyncio.IncompleteReadError):
                        await pipe
                up_writer.close()
        except OSError:
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def _client_to_server(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._copy(reader, writer)

    async def _server_to_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._copy(reader, writer)


@dataclass
class NatsAckProxy(TcpProxy):
    """:class:`TcpProxy` for NATS that drops the first ``drop_acks`` JetStream publish acknowledgements.

    Server-to-client bytes are read frame by frame (a ``\\r\\n``-terminated line; for ``MSG`` / ``HMSG`` also
    the payload its last field counts, and its ``\\r\\n``); every other frame passes unchanged, in order.
    """

    drop_acks: int = 0
    acks: int = field(default=0, init=False)
    """Publish acknowledgements the server sent (dropped ones included)."""
    dropped: int = field(default=0, init=False)

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    async def _server_to_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line = await reader.readuntil(b"\r\n")
            op = line.split(b" ", 1)[0].strip().upper()
            frame = line
            if op in (b"MSG", b"HMSG"):
                fields = line.split()
                total = int(fields[-1])
                body = await reader.readexactly(total + 2)
                headers = int(fields[-2]) if op == b"HMSG" else 0
                frame = line + body
                if is_pub_ack(body[headers:total]):
                    self.acks += 1
                    if self.dropped < self.drop_acks:
                        self.dropped += 1
                        continue
            writer.write(frame)
            await writer.drain()
