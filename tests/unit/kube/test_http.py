"""shared.kube.http against real servers on loopback: the pool against aiohttp's web server and raw asyncio
servers that misbehave at exact points; the server against aiohttp's client (an independent HTTP stack)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from shared.kube.http import (
    MAX_REQUEST_HEAD,
    ConnectionPool,
    HttpError,
    HttpServer,
    Request,
    Response,
    basic_authorization,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def aiohttp_server(routes: list[web.RouteDef], **kwargs: object) -> AsyncIterator[tuple[str, set[int]]]:
    """aiohttp's web server on a free loopback port; yields its URL and the ids of the connections it served."""
    connections: set[int] = set()

    @web.middleware
    async def count(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        connections.add(id(request.transport))
        return await handler(request)

    app = web.Application(middlewares=[count])
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None, **kwargs)  # type: ignore[arg-type]
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        await runner.cleanup()


@asynccontextmanager
async def raw_server(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                     ) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw asyncio TCP server; yields its URL and a one-element list counting the connections accepted. A
    handler reading past the client's close simply ends."""
    accepted = [0]

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        try:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):  # the client went away
                await handle(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        server.close()


async def hello(_request: web.Request) -> web.Response:
    return web.Response(text="hello")


async def test_sequential_requests_reuse_one_connection() -> None:
    async with aiohttp_server([web.get("/", hello)]) as (url, connections):
        pool = ConnectionPool(url)
        bodies = [(await pool.request("GET", "/", {}, deadline=5)).body for _ in range(5)]
        await pool.close()
    assert bodies == [b"hello"] * 5
    assert len(connections) == 1


async def test_no_more_connections_than_the_limit() -> None:
    in_flight, peak = [0], [0]

    async def slow(_request: web.Request) -> web.Response:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.02)  # the handler's work, so requests overlap; not a synchronisation
        in_flight[0] -= 1
        return web.Response(text="ok")

    async with aiohttp_server([web.get("/", slow)]) as (url, connections):
        pool = ConnectionPool(url, limit=2)
        answers = await asyncio.gather(*(pool.request("GET", "/", {}, deadline=10) for _ in range(8)))
        await pool.close()
    assert [a.status for a in answers] == [200] * 8
    assert peak[0] <= 2
    assert len(connections) <= 2


async def test_a_gzip_body_is_decompressed() -> None:
    text = "tatara " * 10_000

    async def compressed(_request: web.Request) -> web.Response:
        response = web.Response(text=text)
        response.enable_compression(web.ContentCoding.gzip)
        return response

    async with aiohttp_server([web.get("/", compressed)]) as (url, _):
        pool = ConnectionPool(url)
        answer = await pool.request("GET", "/", {"Accept-Encoding": "gzip"}, deadline=5)
        await pool.close()
    assert answer.headers["content-encoding"] == "gzip"
    assert answer.body == text.encode()


async def test_headers_and_request_body_reach_the_server() -> None:
    seen: dict[str, object] = {}

    async def echo(request: web.Request) -> web.Response:
        seen.update(method=request.method, path=request.path_qs, header=request.headers.get("X-Test"),
                    body=await request.read(), host=request.headers.get("Host"))
        return web.Response(status=201, text="made", headers={"X-Answer": "yes"})

    async with aiohttp_server([web.post("/things", echo)]) as (url, _):
        pool = ConnectionPool(url)
        answer = await pool.request("POST", "/things?a=1", {"X-Test": "v"}, b'{"k": 1}', deadline=5)
        await pool.close()
    assert (answer.status, answer.reason, answer.body, answer.headers["x-answer"]) == (201, "Created", b"made", "yes")
    assert seen == {"method": "POST", "path": "/things?a=1", "header": "v", "body": b'{"k": 1}',
                    "host": url.removeprefix("http://")}


async def test_a_streamed_body_arrives_in_pieces_and_a_silent_stream_times_out() -> None:
    release, never = asyncio.Event(), asyncio.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first\n")
        await release.wait()
        await response.write(b"second\n")
        await never.wait()  # the stream goes silent
        return response

    async with aiohttp_server([web.get("/", stream)]) as (url, _):
        pool = ConnectionPool(url)
        pieces: list[bytes] = []

        async def read_all() -> None:
            async with pool.stream("GET", "/", {}, connect_timeout=5, read_timeout=0.5) as answer:
                pieces.append(str(answer.status).encode())
                async for piece in answer.chunks():
                    pieces.append(piece)
                    release.set()

        with pytest.raises(TimeoutError):
            await read_all()
        never.set()  # the handler ends, so the server's shutdown does not wait for it
        await pool.close()
    assert pieces[0] == b"200"
    assert b"".join(pieces[1:]) == b"first\nsecond\n"


async def test_a_stream_larger_than_the_read_buffer_arrives_whole() -> None:
    # the pool pauses the socket whenever more than read_buffer bytes wait unread, and resumes it as they are read
    pieces = [bytes([65 + i % 26]) * 8192 for i in range(128)]  # 1 MiB in 8 KiB writes

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
        return response

    async with aiohttp_server([web.get("/", stream)]) as (url, _):
        pool = ConnectionPool(url, read_buffer=4096)
        async with pool.stream("GET", "/", {}, connect_timeout=5, read_timeout=5) as answer:
            body = await answer.read()
        await pool.close()
    assert body == b"".join(pieces)


def closing_after_one_answer(requests: list[bytes]) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                                  Awaitable[None]]:
    """A raw server's handler: answers the first request of a connection, then reads the second (recording
    both request lines in ``requests``) and closes without a byte of answer: what a server closing an idle
    connection as a request arrives looks like to the client."""
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in (True, False):
            head = await reader.readuntil(b"\r\n\r\n")
            requests.append(head.split(b"\r\n", 1)[0])
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            if answer:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
    return once


async def two_gets(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
                   first: str, second: str) -> tuple[bytes, bytes, int]:
    """Two GETs one after the other through one pool to a raw server: both bodies and the connections it
    accepted."""
    async with raw_server(handle) as (url, accepted):
        pool = ConnectionPool(url)
        try:
            one = await pool.request("GET", first, {}, deadline=5)
            two = await pool.request("GET", second, {}, deadline=5)
        finally:
            await pool.close()
    return one.body, two.body, accepted[0]


async def test_a_get_on_a_connection_the_server_closed_is_sent_again() -> None:
    requests: list[bytes] = []
    assert await two_gets(closing_after_one_answer(requests), "/1", "/2") == (b"ok", b"ok", 2)
    assert requests == [b"GET /1 HTTP/1.1", b"GET /2 HTTP/1.1", b"GET /2 HTTP/1.1"]


@pytest.mark.parametrize(("method", "headers", "sent_again"), [
    ("POST", {}, False),  # the server may have processed it: sending it again could create a second object
    ("PATCH", {}, False),
    ("POST", {"Idempotency-Key": "k1"}, True),  # the key makes a second delivery harmless (Go's rule)
])
async def test_a_write_is_sent_again_only_with_an_idempotency_key(method: str, headers: dict[str, str],
                                                                   sent_again: bool) -> None:
    requests: list[bytes] = []
    async with raw_server(closing_after_one_answer(requests)) as (url, _):
        pool = ConnectionPool(url)
        await pool.request(method, "/1", headers, b"{}", deadline=5)
        if sent_again:
            assert (await pool.request(method, "/2", headers, b"{}", deadline=5)).body == b"ok"
        else:
            with pytest.raises(HttpError, match="closed the connection"):
                await pool.request(method, "/2", headers, b"{}", deadline=5)
        await pool.close()
    assert requests.count(f"{method} /2 HTTP/1.1".encode()) == (2 if sent_again else 1)


async def get_answered_with(raw: bytes, *, hold_open: bool = False) -> Response:
    """One GET through a pool to a raw server that answers any request with ``raw``, then closes the connection
    (``hold_open``: once the client has closed it)."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()
        if hold_open:
            await reader.read()

    async with raw_server(answer) as (url, _):
        pool = ConnectionPool(url)
        try:
            return await pool.request("GET", "/", {}, deadline=5)
        finally:
            await pool.close()


async def test_a_connection_closed_mid_answer_is_an_http_error() -> None:
    with pytest.raises(HttpError, match="closed the connection"):
        await get_answered_with(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")


async def test_a_body_without_length_ends_with_the_connection() -> None:
    answer = await get_answered_with(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
    assert answer.body == b"all of it"


async def test_bytes_that_are_not_http_are_an_http_error() -> None:
    with pytest.raises(HttpError, match="malformed"):
        await get_answered_with(b"SSH-2.0-OpenSSH\r\n\r\n", hold_open=True)


async def test_a_deadline_ends_the_request_and_its_connection() -> None:
    async def silent(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the request, never answers; returns when the client closes

    async with raw_server(silent) as (url, accepted):
        pool = ConnectionPool(url)
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await pool.request("GET", "/", {}, deadline=0.2)
        await pool.close()
    assert accepted[0] == 2  # the timed-out connection was not reused


async def test_a_refused_connection_is_an_http_error() -> None:
    async with raw_server(lambda _r, _w: asyncio.sleep(0)) as (url, _):
        pass  # closed: nothing listens on the port any more
    pool = ConnectionPool(url)
    with pytest.raises(HttpError, match="cannot connect"):
        await pool.request("GET", "/", {}, deadline=5)


async def test_a_line_break_in_a_header_is_refused() -> None:
    pool = ConnectionPool("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="line break"):
        await pool.request("GET", "/", {"X": "a\r\nInjected: yes"}, deadline=5)


@pytest.mark.parametrize("url", ["ftp://host/", "nats://host:4222", "127.0.0.1:80"])
def test_only_http_origins_are_accepted(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        ConnectionPool(url)


@pytest.mark.parametrize(("url", "expected"), [
    ("http://host:1/", None),
    ("http://user:pass@host/", "Basic dXNlcjpwYXNz"),  # base64("user:pass"), RFC 7617's form
    ("http://us%3Aer:p%40ss@host/", "Basic dXM6ZXI6cEBzcw=="),  # base64("us:er:p@ss")
    ("http://user@host/", "Basic dXNlcjo="),  # base64("user:")
])
def test_basic_authorization(url: str, expected: str | None) -> None:
    assert basic_authorization(url) == expected


# -- the server, judged by aiohttp's client --------------------------------------------------------------------


async def echo_path(request: Request) -> tuple[int, dict[str, str], bytes]:
    if request.path == "/fail":
        raise RuntimeError("handler bug")
    return 200, {"Content-Type": "text/plain"}, f"{request.method} {request.path} {request.query}".encode()


async def test_the_server_answers_keeps_connections_and_survives_a_failing_handler() -> None:
    server = HttpServer(echo_path, "127.0.0.1", 0)
    port = await server.start()
    try:
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=connector) as session:
            texts = []
            for path in ("/a?x=1", "/fail", "/b"):
                async with session.get(f"http://127.0.0.1:{port}{path}") as resp:
                    texts.append((resp.status, await resp.read()))
            async with session.head(f"http://127.0.0.1:{port}/h") as resp:
                head = (resp.status, resp.headers["Content-Length"], await resp.read())
    finally:
        await server.close()
    assert texts == [(200, b"GET /a x=1"), (500, b"internal error\n"), (200, b"GET /b ")]
    assert head == (200, str(len(b"HEAD /h ")), b"")


async def send_to_server(raw: bytes) -> bytes:
    """Everything the server (on :func:`echo_path`) sends back on one connection for ``raw``, read until it closes
    the connection (within 5 s)."""
    server = HttpServer(echo_path, "127.0.0.1", 0)
    port = await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        answer = await asyncio.wait_for(reader.read(), 5)  # read() returns only once the server closed
        writer.close()
    finally:
        await server.close()
    return answer


async def test_the_server_closes_when_the_client_asks() -> None:
    raw = await send_to_server(b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nConnection: close\r\n" in raw
    assert raw.endswith(b"\r\n\r\nGET /x ")


async def test_the_server_refuses_what_is_not_http() -> None:
    raw = await send_to_server(b"\x16\x03\x01 not http at all\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400 Bad Request\r\n")


async def test_a_gzip_body_round_trips_through_both_ends() -> None:
    payload = b"x" * 50_000

    async def zipped(_request: Request) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Encoding": "gzip"}, gzip.compress(payload)

    server = HttpServer(zipped, "127.0.0.1", 0)
    port = await server.start()
    try:
        pool = ConnectionPool(f"http://127.0.0.1:{port}")
        async with pool.stream("GET", "/", {}, connect_timeout=5, read_timeout=5) as answer:
            body = await answer.read()
        again = await pool.request("GET", "/", {}, deadline=5)  # the streamed connection went back to the pool
        await pool.close()
    finally:
        await server.close()
    assert body == payload
    assert again.body == payload


async def test_closing_the_pool_ends_a_stream_in_use() -> None:
    never = asyncio.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"open\n")
        await never.wait()
        return response

    async with aiohttp_server([web.get("/", stream)]) as (url, _):
        pool = ConnectionPool(url)

        async def read_after_close() -> None:
            async with pool.stream("GET", "/", {}, connect_timeout=5, read_timeout=5) as answer:
                async for _piece in answer.chunks():
                    await pool.close()

        with pytest.raises(HttpError, match="closed the connection"):
            await read_after_close()
        never.set()


async def test_an_interim_answer_is_skipped_for_the_final_one() -> None:
    answer = await get_answered_with(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                                     b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
    assert (answer.status, answer.reason, answer.body, "link" in answer.headers) == (200, "OK", b"final", False)


async def test_bytes_after_an_answer_never_reach_the_next_request() -> None:
    # the server sends a second (partial) answer in the same segment as the first: the first stands, the
    # connection is dropped, and the next request gets its own answer on a new connection
    async def stray(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # until the client closes (raw_server ends the handler then)
            head = await reader.readuntil(b"\r\n\r\n")
            body = head.split(b" ", 2)[1]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%sHTTP/1.1 200 OK\r\nContent-Le"
                         % (len(body), body))
            await writer.drain()

    assert await two_gets(stray, "/one", "/two") == (b"/one", b"/two", 2)


async def test_a_reset_ends_a_body_without_length_as_an_error() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"items\": [1, 2")
        await writer.drain()
        # a reset (RST), not the close that would end the body: a zero linger time makes close() send it
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async with raw_server(reset) as (url, _):
        pool = ConnectionPool(url)
        with pytest.raises(HttpError, match="closed the connection"):
            await pool.request("GET", "/", {}, deadline=5)
        await pool.close()


async def test_a_gzip_body_cut_short_is_an_http_error() -> None:
    compressed = gzip.compress(b"x" * 10_000)[:-12]  # the stream's end and its trailer missing
    with pytest.raises(HttpError, match="cut short"):
        await get_answered_with(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
                                % (len(compressed), compressed))


async def test_a_stream_left_unread_while_paused_leaves_a_usable_connection() -> None:
    # the whole body arrives while reads are paused and the consumer leaves without reading it: the connection
    # goes back to the pool reading again, so the next request on it is answered
    big = b"y" * 100_000

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # until the client closes (raw_server ends the handler then)
            head = await reader.readuntil(b"\r\n\r\n")
            body = big if head.startswith(b"GET /big") else b"ok"
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async with raw_server(answer) as (url, accepted):
        pool = ConnectionPool(url, read_buffer=16_384)
        async with pool.stream("GET", "/big", {}, connect_timeout=5, read_timeout=5) as streamed:
            first = streamed.status
            async for _piece in streamed.chunks():
                break  # leaves the rest unread
        second = await pool.request("GET", "/small", {}, deadline=5)
        await pool.close()
    assert (first, second.body) == (404, b"ok")
    assert accepted[0] in (1, 2)  # reused when the body had ended, else replaced; never hung


async def test_the_server_refuses_a_head_over_its_limit_with_431() -> None:
    raw = await send_to_server(b"GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * (MAX_REQUEST_HEAD + 1))
    assert raw.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


async def test_the_server_declines_an_upgrade_and_answers_in_http_1_1() -> None:
    raw = await send_to_server(b"GET /m HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                               b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert raw.endswith(b"\r\n\r\nGET /m ")


async def test_the_server_answers_earlier_requests_before_refusing_a_malformed_one() -> None:
    raw = await send_to_server(b"GET /first HTTP/1.1\r\nHost: h\r\n\r\nNOT HTTP AT ALL\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert raw.index(b"GET /first ") < raw.index(b"HTTP/1.1 400 Bad Request\r\n")
