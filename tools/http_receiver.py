"""A real HTTP receiver on loopback that records every request, for the tests and ``tatara up``
(docs/architecture.md#the-tooling).

An aiohttp server bound to 127.0.0.1 (a free port unless one is given) that accepts any method on any path,
records ``(method, path, headers, body)`` and answers :attr:`HttpReceiver.status` (200 unless set) with an
empty body. It runs in the caller's event loop (asyncio, as anyio's default backend)::

    async with HttpReceiver() as receiver:
        ...  # POST to receiver.url + "/events"
        [request] = receiver.requests

Standalone: ``python -m tools.http_receiver --port P [--status S]`` logs each request as one JSON line on
stdout until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from tools.controlplane.cluster import free_port


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: ``headers`` keep their received case (lookups here are case-sensitive)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        """The value of header ``name``, case-insensitively; None when absent."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)


@dataclass
class HttpReceiver:
    """Loopback HTTP server recording every request; an async context manager.

    Args:
        port: port to listen on (default: a free one).
        status: HTTP status every request is answered with; may be changed while running.
        on_request: called with each recorded request (e.g. to print it).
    """

    port: int | None = None
    status: int = 200
    on_request: Callable[[RecordedRequest], None] | None = None
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    _runner: web.AppRunner | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.Response:
        recorded = RecordedRequest(request.method, request.path_qs, dict(request.headers), await request.read())
        self.requests.append(recorded)
        if self.on_request is not None:
            self.on_request(recorded)
        return web.Response(status=self.status)

    async def start(self) -> HttpReceiver:
        """Bind and start serving; returns once the socket listens."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        if self.port is None:
            self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> HttpReceiver:
        return await self.start()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()


def _print(request: RecordedRequest) -> None:
    print(json.dumps({"method": request.method, "path": request.path, "headers": request.headers,
                      "body": request.body.decode(errors="replace")}), flush=True)


async def _serve(port: int, status: int) -> None:
    async with HttpReceiver(port=port, status=status, on_request=_print) as receiver:
        print(f"listening on {receiver.url}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.http_receiver --port P [--status S]``: serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tools.http_receiver", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--status", type=int, default=200, help="status every request is answered with")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
