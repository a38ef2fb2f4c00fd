"""HTTP/1.1 on asyncio for the binaries: a connection pool to one origin, and a small server.

The binaries speak HTTP to the API server (every request and watch), to Prometheus (boundary prefetch), to
export sinks, and serve ``/metrics``, ``/healthz`` and ``/readyz``. That used to be aiohttp, a third of every
binary's start and a quarter of its memory (docs/runtime.md#client has the figures). This module is the
part of it we use, on asyncio's own transports (its TLS included) with the messages parsed by httptools
(llhttp, the parser of Node.js and uvicorn); nothing here parses HTTP by hand.

The pool (:class:`ConnectionPool`) keeps keep-alive connections to one ``scheme://host:port``:

- at most ``limit`` connections, idle ones reused newest first and dropped after ``keepalive_expiry`` s;
- a request that finds its reused connection closed by the server before any byte of the answer is sent
  again once on a new connection when it may be replayed: GET, OPTIONS, TRACE, or one carrying an
  ``Idempotency-Key`` (Go's ``net/http`` rule: the server most likely closed an idle connection, but may
  have processed the request first, so a POST or PATCH fails instead);
- ``gzip``/``deflate`` bodies are decompressed; the caller asks for them with ``Accept-Encoding``;
- through an HTTP proxy: ``CONNECT`` for an ``https`` origin (then TLS inside the tunnel), the absolute
  URL as request target for ``http``; credentials in the proxy URL become ``Proxy-Authorization: Basic``.

Failures below HTTP (refused, reset, TLS, a peer closing mid-answer, bytes that are not HTTP/1.1) raise
:class:`HttpError`; deadlines raise :class:`TimeoutError`.

The server (:class:`HttpServer`) answers requests in order with one handler, keeps connections alive, and
bounds what a client can make it hold (docs/runtime.md#health).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import weakref
import zlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final
from urllib.parse import unquote, urlsplit

import httptools

__all__ = ["ConnectionPool", "HttpError", "HttpServer", "Request", "Response", "StreamingResponse",
           "basic_authorization", "basic_credentials"]

KEEPALIVE_EXPIRY: Final = 30.0
"""Seconds an idle connection is kept for reuse (client-go's transport keeps them 90 s; shorter here, so that a
server's own idle timeout seldom closes one just as a request goes out on it)."""

READ_BUFFER: Final = 2 << 20
"""Bytes of a streamed body held before the socket is paused (2 MiB: etcd's request limit of 1.5 MiB rounded
up, so the largest watch event arrives without a pause)."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

_REPLAYABLE: Final = frozenset({"GET", "OPTIONS", "TRACE"})
"""Methods sent again after a reused connection was found closed (Go's ``Request.isReplayable``)."""


def _replayable(method: str, headers: Mapping[str, str]) -> bool:
    return method in _REPLAYABLE or any(name.lower() in ("idempotency-key", "x-idempotency-key") for name in headers)


class HttpError(Exception):
    """The exchange failed below HTTP: connect, TLS, the connection closed before the whole answer arrived,
    or an answer that is not HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class Response:
    """A whole answer: ``headers`` by lower-case name (repeated ones joined with ``", "``), ``body``
    decompressed."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


def basic_credentials(user: str, password: str) -> str:
    """The ``Authorization`` value ``Basic <base64 of user:password>`` (RFC 7617, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def basic_authorization(url: str) -> str | None:
    """:func:`basic_credentials` from the credentials in ``url``, percent-decoded; None when it has none."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    return basic_credentials(unquote(parts.username), unquote(parts.password or ""))


def _check_header(text: str) -> str:
    if "\r" in text or "\n" in text:
        raise ValueError(f"a line break in an HTTP header or request target: {text!r}")
    return text


def _request_bytes(method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
    lines = [f"{method} {_check_header(target)} HTTP/1.1\r\nHost: {host}\r\n"]
    lines += [f"{_check_header(name)}: {_check_header(value)}\r\n" for name, value in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body) if body else 0}\r\n")
    lines.append("\r\n")
    head = "".join(lines).encode("latin-1")
    return head + body if body else head


class _Answer:
    """The state of one answer on a connection, filled by the parser's callbacks."""

    __slots__ = ("body", "buffered", "compressed", "decompress", "done", "error", "head", "headers", "interim",
                 "reason", "started", "status", "streaming", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, streaming: bool) -> None:
        self.head: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.done = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.streaming = streaming
        self.decompress: zlib._Decompress | None = None
        self.compressed = False
        """Whether any compressed byte arrived (an empty body needs no end of the compressed stream)."""
        self.started = False
        """Whether a message of this answer began (a second one is bytes the server should not have sent)."""
        self.interim = False
        """Whether the message being parsed is a 1xx interim answer (skipped: the final one follows)."""

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one answer at a time. Callbacks named ``on_*`` are httptools' parser's."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_buffer: int) -> None:
        self.loop = loop
        self.read_buffer = read_buffer
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: _Answer | None = None
        self.closed = False
        self.paused = False
        self.exchanges = 0
        self.idle_since = 0.0
        self.received = False
        """Whether any byte of the current answer arrived (before that, a reused connection found closed may be
        retried)."""
        self._tunnel: asyncio.Future[bytes] | None = None
        self._tunnel_bytes = bytearray()
        self._close_delimited = False
        self.keep_alive = False

    # -- asyncio.Protocol ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._tunnel is not None:
            self._tunnel_received(data)
            return
        answer = self.answer
        if answer is None or answer.done:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as err:
            cause = err.__context__ if isinstance(err.__context__, HttpError) else err
            self._fail(HttpError(f"malformed HTTP answer: {cause}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._tunnel is not None and not self._tunnel.done():
            self._tunnel.set_exception(HttpError(f"the proxy closed the connection: {exc or 'EOF'}"))
        answer = self.answer
        if answer is None or answer.done:
            return
        if self._close_delimited and answer.head.done() and exc is None:
            self.on_message_complete()  # a body without a length ends with the connection (closed, not reset)
            return
        self._fail(HttpError(f"the server closed the connection before the whole answer: {exc or 'EOF'}"))

    def pause_writing(self) -> None:  # bodies are small; the transport buffers them
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        answer = self.answer
        assert answer is not None
        if answer.started:  # bytes after the end of the answer: the connection is out of step with its requests
            self.closed = True
            raise HttpError("the server sent more than one answer")
        answer.started = True

    def on_status(self, status: bytes) -> None:
        assert self.answer is not None
        self.answer.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.answer is not None
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.answer.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        answer = self.answer
        assert answer is not None
        answer.status = self.parser.get_status_code()
        if 100 <= answer.status < 200:  # 100 Continue, 103 Early Hints: the final answer follows (101 is refused)
            answer.interim = True
            return
        encoding = answer.headers.get("content-encoding", "").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            answer.decompress = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            answer.decompress = zlib.decompressobj()
        self._close_delimited = ("content-length" not in answer.headers
                                 and "chunked" not in answer.headers.get("transfer-encoding", "").lower()
                                 and answer.status not in (204, 304) and answer.status >= 200)
        if not answer.head.done():
            answer.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        answer = self.answer
        assert answer is not None
        answer.compressed = answer.decompress is not None
        answer.body.append(body)
        if answer.streaming:
            answer.buffered += len(body)
            if answer.buffered > self.read_buffer and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
            answer.wake()

    def on_message_complete(self) -> None:
        answer = self.answer
        assert answer is not None
        if answer.interim:
            answer.interim = answer.started = False
            answer.status, answer.reason, answer.headers = 0, "", {}
            return
        self.keep_alive = self.parser.should_keep_alive()  # read now: the parser resets after this callback
        answer.done = True
        if not answer.head.done():
            answer.head.set_result(None)
        answer.wake()

    # -- used by the pool ------------------------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        return (not self.closed and self.answer is not None and self.answer.done and self.answer.error is None
                and not self._close_delimited and self.keep_alive)

    def send(self, request: bytes, streaming: bool) -> _Answer:
        assert self.transport is not None
        self.answer = _Answer(self.loop, streaming)
        self.received = False
        self._close_delimited = False
        self.keep_alive = False
        self.exchanges += 1
        self.transport.write(request)
        return self.answer

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, error: BaseException) -> None:
        answer = self.answer
        if answer is None or answer.done:
            return
        answer.error = error
        answer.done = True
        if not answer.head.done():
            answer.head.set_exception(error)
            answer.head.exception()  # retrieved: a failure nobody waits for is not logged as lost
        answer.wake()

    async def body(self, answer: _Answer) -> bytes:
        """The whole (decompressed) body once the answer is complete. Raises HttpError."""
        while not answer.done:
            answer.waiter = self.loop.create_future()
            await answer.waiter
        if answer.error is not None:
            raise answer.error
        data = b"".join(answer.body)
        answer.body.clear()
        return _decompress(answer, data, final=True)

    async def chunk(self, answer: _Answer, read_timeout: float | None) -> bytes:
        """The body bytes received since the last call (decompressed), waiting up to ``read_timeout`` s for
        some; ``b""`` at the end. Raises HttpError, TimeoutError."""
        while True:
            if answer.body:
                data = b"".join(answer.body) if len(answer.body) > 1 else answer.body[0]
                answer.body.clear()
                answer.buffered = 0
                if self.paused and self.transport is not None and not self.closed:
                    self.paused = False
                    self.transport.resume_reading()
                data = _decompress(answer, data, final=False)
                if data:
                    return data
                continue
            if answer.error is not None:
                raise answer.error
            if answer.done:
                return _decompress(answer, b"", final=True)
            answer.waiter = self.loop.create_future()
            if read_timeout is None:
                await answer.waiter
            else:
                async with asyncio.timeout(read_timeout):
                    await answer.waiter

    # -- a CONNECT tunnel ------------------------------------------------------------------------------------

    async def tunnel(self, request: bytes) -> None:
        """Send ``request`` (a ``CONNECT``) and wait for the proxy's answer head. Raises HttpError unless 2xx."""
        assert self.transport is not None
        self._tunnel = self.loop.create_future()
        self.transport.write(request)
        try:
            head = await self._tunnel
        finally:
            self._tunnel = None
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise HttpError(f"the proxy answered CONNECT with {status_line!r}")
        if not 200 <= int(parts[1]) < 300:
            raise HttpError(f"the proxy refused CONNECT: {status_line}")
        if len(self._tunnel_bytes) > len(head) + 4:
            raise HttpError("the proxy sent bytes after its CONNECT answer")

    def _tunnel_received(self, data: bytes) -> None:
        assert self._tunnel is not None
        self._tunnel_bytes += data
        end = self._tunnel_bytes.find(b"\r\n\r\n")
        if end >= 0 and not self._tunnel.done():
            self._tunnel.set_result(bytes(self._tunnel_bytes[:end]))
        elif len(self._tunnel_bytes) > 65536 and not self._tunnel.done():
            self._tunnel.set_exception(HttpError("the proxy's CONNECT answer has no end"))


def _decompress(answer: _Answer, data: bytes, *, final: bool) -> bytes:
    if answer.decompress is None:
        return data
    try:
        out = answer.decompress.decompress(data)
        if not final:
            return out
        out += answer.decompress.flush()
    except zlib.error as err:
        raise HttpError(f"undecodable {answer.headers.get('content-encoding')} body: {err}") from err
    if answer.compressed and not answer.decompress.eof:
        raise HttpError(f"a {answer.headers.get('content-encoding')} body cut short")
    return out


class StreamingResponse:
    """An answer whose body is read as it arrives (:meth:`chunks`), from :meth:`ConnectionPool.stream`."""

    def __init__(self, connection: _Connection, answer: _Answer, read_timeout: float | None) -> None:
        self._connection = connection
        self._answer = answer
        self._read_timeout = read_timeout
        self.status = answer.status
        self.reason = answer.reason
        self.headers = answer.headers

    async def read(self) -> bytes:
        """The rest of the body. Raises HttpError, TimeoutError (no byte for the read timeout)."""
        parts = [part async for part in self.chunks()]
        return b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, in the pieces the socket gave (joined when several wait). Raises
        HttpError, TimeoutError (no byte for the read timeout)."""
        while data := await self._connection.chunk(self._answer, self._read_timeout):
            yield data


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one origin (``scheme://host[:port]``, any path ignored).

    Args:
        origin: ``http://`` or ``https://`` URL of the server.
        ssl_context: for ``https`` (default: the system's trust store, ``ssl.create_default_context()``).
        server_hostname: the name TLS verifies and sends as SNI (default the origin's host).
        limit: connections open at once; a request waits for one beyond it (watches hold theirs).
        proxy: ``http://[user:password@]host:port`` to go through, or None.
        read_buffer: bytes of a streamed body held before the socket is paused (:data:`READ_BUFFER`).
        keepalive_expiry: seconds an idle connection is kept (:data:`KEEPALIVE_EXPIRY`).

    Raises ValueError for an origin or proxy that is not ``http``/``https``. Use on one event loop;
    :meth:`close` when done.
    """

    def __init__(self, origin: str, *, ssl_context: ssl.SSLContext | None = None,
                 server_hostname: str | None = None, limit: int = 100, proxy: str | None = None,
                 read_buffer: int = READ_BUFFER, keepalive_expiry: float = KEEPALIVE_EXPIRY) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {origin!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or _DEFAULT_PORTS[parts.scheme]
        self.authority = parts.netloc.rpartition("@")[2]
        """The ``Host`` header: host and port as the URL gave them."""
        self._ssl = ssl_context
        self._server_hostname = server_hostname or self.host
        self._limit = limit
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[_Connection] = []
        self._connections: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._read_buffer = read_buffer
        self._keepalive_expiry = keepalive_expiry
        self._proxy: tuple[str, int] | None = None
        self._proxy_authorization: str | None = None
        if proxy:
            proxy_parts = urlsplit(proxy)
            if proxy_parts.scheme != "http" or not proxy_parts.hostname:
                raise ValueError(f"not an http:// proxy URL: {proxy!r}")
            self._proxy = (proxy_parts.hostname, proxy_parts.port or 80)
            self._proxy_authorization = basic_authorization(proxy)
        self._closed = False

    @property
    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        return self._slots

    async def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None = None, *,
                      deadline: float | None) -> Response:
        """Send ``method target`` (path and query) and read the whole answer, within ``deadline`` s in all
        (waiting for a connection included; None: no deadline).

        Raises:
            HttpError: below HTTP (see the module docstring).
            TimeoutError: the deadline passed.
            ValueError: a line break in ``target`` or a header.
        """
        message, replayable = self._message(method, target, headers, body)
        async with asyncio.timeout(deadline), self._semaphore:
            connection, answer = await self._send(message, replayable, streaming=False)
            try:
                data = await connection.body(answer)
            except BaseException:
                connection.abort()
                raise
            self._release(connection)
            return Response(answer.status, answer.reason, answer.headers, data)

    @asynccontextmanager
    async def stream(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None = None, *,
                     connect_timeout: float | None, read_timeout: float | None) -> AsyncIterator[StreamingResponse]:
        """Send ``method target`` and yield the answer once its head arrived; the body is read as it comes.

        ``connect_timeout`` bounds waiting for a connection and opening it; ``read_timeout`` every wait for
        bytes (the head, then each read). The connection goes back to the pool when the body was read to
        its end, else it is closed.

        Raises:
            HttpError: below HTTP.
            TimeoutError: a deadline passed.
        """
        message, replayable = self._message(method, target, headers, body)
        async with asyncio.timeout(connect_timeout):
            await self._semaphore.acquire()
        try:
            connection, answer = await self._send(message, replayable, streaming=True,
                                                  connect_timeout=connect_timeout, read_timeout=read_timeout)
            try:
                yield StreamingResponse(connection, answer, read_timeout)
            except BaseException:
                connection.abort()
                raise
            if connection.reusable:
                self._release(connection)
            else:
                connection.abort()
        finally:
            self._semaphore.release()

    async def close(self) -> None:
        """Close every connection, idle or in use (a request or stream on one fails with HttpError); the pool
        refuses new requests afterwards."""
        self._closed = True
        self._idle = []
        for connection in list(self._connections):
            connection.abort()

    # -- connections ---------------------------------------------------------------------------------------------

    def _message(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
                 ) -> tuple[bytes, bool]:
        """The request's bytes, and whether it may be sent again (:func:`_replayable`). Raises ValueError for
        HEAD or a line break in a header."""
        if method == "HEAD":
            raise ValueError("HEAD is not supported: the answer's parser would wait for the body it announces")
        replayable = _replayable(method, headers)
        if self._proxy is not None and self.scheme == "http":
            target = f"http://{self.authority}{target}"  # a plain HTTP request through a proxy names its URL
            if self._proxy_authorization:
                headers = {**headers, "Proxy-Authorization": self._proxy_authorization}
        return _request_bytes(method, target, self.authority, headers, body), replayable

    async def _send(self, message: bytes, replayable: bool, *, streaming: bool, connect_timeout: float | None = None,
                    read_timeout: float | None = None) -> tuple[_Connection, _Answer]:
        """Send ``message`` on a connection (an idle one, else a new one) and wait for the answer's head;
        once more on a new connection when a reused one turns out closed before any byte of the answer and
        the request is ``replayable``. Raises HttpError, TimeoutError (``connect_timeout`` for getting a
        connection, ``read_timeout`` for the head)."""
        for attempt in (1, 2):
            async with asyncio.timeout(connect_timeout):
                connection = await (self._connection() if attempt == 1 else self._open())
            reused = connection.exchanges > 0
            answer = connection.send(message, streaming)
            try:
                async with asyncio.timeout(read_timeout):
                    await answer.head
            except HttpError:
                connection.abort()
                if attempt == 1 and reused and not connection.received and replayable:
                    continue  # most likely the server had closed the idle connection
                raise
            except BaseException:
                connection.abort()
                raise
            return connection, answer
        raise AssertionError("unreachable")

    def _release(self, connection: _Connection) -> None:
        if self._closed or not connection.reusable:
            connection.abort()
            return
        connection.answer = None
        if connection.paused and connection.transport is not None:  # the answer ended while its reads were paused
            connection.paused = False
            connection.transport.resume_reading()
        now = connection.idle_since = time.monotonic()
        while self._idle and now - self._idle[0].idle_since >= self._keepalive_expiry:
            self._idle.pop(0).abort()  # the oldest first: under light traffic only the newest are reused
        self._idle.append(connection)

    async def _connection(self) -> _Connection:
        if self._closed:
            raise HttpError("the connection pool is closed")
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            transport = connection.transport
            if (not connection.closed and transport is not None and not transport.is_closing()
                    and now - connection.idle_since < self._keepalive_expiry):
                return connection  # (a transport closing after the server's EOF is not reused either)
            connection.abort()
        return await self._open()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        connection = _Connection(loop, self._read_buffer)
        self._connections.add(connection)
        host, port = self._proxy or (self.host, self.port)
        tls = self.scheme == "https"
        if tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            if self._proxy is not None and tls:
                await loop.create_connection(lambda: connection, host, port)
                request = f"CONNECT {self.authority} HTTP/1.1\r\nHost: {self.authority}\r\n"
                if self._proxy_authorization:
                    request += f"Proxy-Authorization: {self._proxy_authorization}\r\n"
                await connection.tunnel((request + "\r\n").encode("latin-1"))
                assert connection.transport is not None
                assert self._ssl is not None
                transport = await loop.start_tls(connection.transport, connection, self._ssl,
                                                 server_hostname=self._server_hostname)
                assert isinstance(transport, asyncio.Transport)
                connection.transport = transport
            else:
                await loop.create_connection(lambda: connection, host, port, ssl=self._ssl if tls else None,
                                             server_hostname=self._server_hostname if tls else None)
        except OSError as err:  # ssl.SSLError and ConnectionRefusedError are OSErrors
            connection.abort()
            raise HttpError(f"cannot connect to {self.scheme}://{self.authority}: {err}") from err
        except BaseException:
            connection.abort()
            raise
        return connection


# -- the server ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request as the server's handler sees it: ``path`` without the query, ``headers`` by lower-case name."""

    method: str
    path: str
    query: str
    headers: dict[str, str]


Handler = Callable[[Request], Awaitable[tuple[int, Mapping[str, str], bytes]]]
"""Answers a request: ``(status, headers, body)``; ``Content-Length`` is added."""

MAX_REQUEST_HEAD: Final = 64 << 10
"""Bytes of request line and headers the server accepts (431 above)."""

MAX_PIPELINED: Final = 8
"""Requests a connection may have waiting for their answers before the server stops reading it."""


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class _ServerConnection(asyncio.Protocol):
    """One client connection; requests are answered in order, one at a time. A request the server cannot
    take (malformed, a head over :data:`MAX_REQUEST_HEAD`, ``CONNECT``) is answered 400 or 431 after the
    requests before it, and the connection closed. An ``Upgrade`` offer is declined by answering in HTTP/1.1
    and closing."""

    def __init__(self, handler: Handler, tasks: set[asyncio.Task[None]],
                 connections: set[_ServerConnection]) -> None:
        self.handler = handler
        self.tasks = tasks
        self.connections = connections
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.queue: deque[tuple[Request, str | None]] = deque()
        """Requests to answer, each with its ``Connection`` answer: None (HTTP/1.1 keep-alive), ``keep-alive``
        (HTTP/1.0 asking for it) or ``close``."""
        self.busy = False
        self.refusal: int | None = None
        """The status to end the connection with once the queue is answered (400, 431), or None."""
        self.paused = False
        self._url = b""
        self._headers: dict[str, str] = {}
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            return
        self._head_bytes += len(data)  # counted before the parser, which holds a header until it ends
        if self._head_bytes > MAX_REQUEST_HEAD:
            self._refuse(431)
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self.parser.get_method() == b"CONNECT":
                self._refuse(400)
            else:  # declined: the request is queued; answer it in HTTP/1.1, then close
                if self.queue:
                    request, _ = self.queue[-1]
                    self.queue[-1] = (request, "close")
                self._stop_reading()
        except httptools.HttpParserError:
            self._refuse(400)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.connections.discard(self)

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = {}

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._head_bytes = 0  # what follows is a body (the parser bounds it by its length) or the next request

    def on_message_complete(self) -> None:
        path, _, query = self._url.decode("latin-1").partition("?")
        request = Request(self.parser.get_method().decode("latin-1"), path, query, self._headers)
        if not self.parser.should_keep_alive():
            connection: str | None = "close"
        else:
            connection = "keep-alive" if self.parser.get_http_version() == "1.0" else None
        self.queue.append((request, connection))
        if len(self.queue) > MAX_PIPELINED:
            self._stop_reading()
        self._start_answering()

    def _start_answering(self) -> None:
        if not self.busy:
            self.busy = True
            task = asyncio.get_running_loop().create_task(self._answer())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _stop_reading(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _refuse(self, status: int) -> None:
        self.refusal = status
        self._stop_reading()
        self._start_answering()

    async def _answer(self) -> None:
        try:
            while self.queue and self.transport is not None:
                request, connection = self.queue.popleft()
                try:
                    status, headers, body = await self.handler(request)
                except Exception:
                    status, headers, body = 500, {"Content-Type": "text/plain"}, b"internal error\n"
                if self.transport is None:
                    return
                head = [f"HTTP/1.1 {status} {_reason(status)}\r\n"]
                head += [f"{name}: {value}\r\n" for name, value in headers.items()]
                head.append(f"Content-Length: {len(body)}\r\n")
                head.append(f"Connection: {connection}\r\n\r\n" if connection else "\r\n")
                self.transport.write("".join(head).encode("latin-1") + (body if request.method != "HEAD" else b""))
                if connection == "close":
                    self.transport.close()
                    return
                if self.paused and self.refusal is None and len(self.queue) <= MAX_PIPELINED // 2:
                    self.paused = False
                    self.transport.resume_reading()
            if self.refusal is not None and self.transport is not None:
                self.transport.write(f"HTTP/1.1 {self.refusal} {_reason(self.refusal)}\r\nContent-Length: 0\r\n"
                                     "Connection: close\r\n\r\n".encode("latin-1"))
                self.transport.close()
        finally:
            self.busy = False


class HttpServer:
    """An HTTP/1.1 server answering every request with ``handler`` (keep-alive, requests in order).

    ``await start()`` binds (port 0: a free one, then in :attr:`port`); ``await close()`` stops listening and
    closes every connection. Raises OSError when the address cannot be bound.
    """

    def __init__(self, handler: Handler, host: str, port: int) -> None:
        self._handler = handler
        self._host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_ServerConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        loop = asyncio.get_running_loop()

        self._server = await loop.create_server(
            lambda: _ServerConnection(self._handler, self._tasks, self._connections), self._host,
            self._requested_port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for made in list(self._connections):
                if made.transport is not None:
                    made.transport.close()
            for task in list(self._tasks):
                task.cancel()
            await self._server.wait_closed()
            self._server = None
