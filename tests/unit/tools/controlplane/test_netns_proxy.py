"""The netns proxy's parsers (addresses, forwards, the egress selector's CONNECT head, the allow list) and its
splice, which copies bytes both ways between real sockets and passes a half-close (EOF) on."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterator

import anyio
import pytest

from tools.controlplane.netns_proxy import Forward, allowed, parse_address, parse_connect, parse_forward, splice

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


# -- parse_address -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.250.0.1:6443", ("10.250.0.1", 6443)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
    ],
    ids=["the node's API forward", "the lowest port", "the highest port"],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "10.250.0.1",
        "10.250.0.1:",
        "10.250.0.1:0",
        "10.250.0.1:65536",
        "10.250.0.1:-1",
        "10.250.0.1:http",
        ":6443",
        "localhost:6443",
        "kubernetes.default.svc:443",
        "10.250.0.256:6443",
        "[::1]:6443",
        "::1:6443",
    ],
    ids=[
        "no port", "an empty port", "port 0", "a port above 65535", "a negative port", "a service name as port",
        "no host", "a name as host", "a DNS name as host", "an octet above 255", "a bracketed IPv6 address",
        "a bare IPv6 address",
    ],
)
def test_parse_address_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_address(text)


# -- parse_forward -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.250.0.1:6443=127.0.0.1:41234", Forward(("10.250.0.1", 6443), ("127.0.0.1", 41234))),
        ("10.250.0.1:14222=127.0.0.1:14222", Forward(("10.250.0.1", 14222), ("127.0.0.1", 14222))),
        ("10.250.0.1:80=127.1.2.3:8080", Forward(("10.250.0.1", 80), ("127.1.2.3", 8080))),
    ],
    ids=["the API server", "the same port on both sides (NATS)", "anywhere on 127.0.0.0/8 is loopback"],
)
def test_parse_forward(text: str, expected: Forward) -> None:
    assert parse_forward(text) == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("10.250.0.1:6443=10.0.0.5:443", "loopback"),
        ("10.250.0.1:6443=192.168.1.1:6443", "loopback"),
        ("10.250.0.1:6443=0.0.0.0:6443", "loopback"),
        ("10.250.0.1:6443", "expected NODE_ADDR:PORT="),
        ("10.250.0.1:6443=127.0.0.1", "expected HOST:PORT"),
        ("10.250.0.1=127.0.0.1:6443", "expected HOST:PORT"),
        ("10.250.0.1:6443=127.0.0.1:99999", "out of range"),
        ("10.250.0.1:6443=localhost:6443", "localhost"),
        ("", "expected NODE_ADDR:PORT="),
    ],
    ids=[
        "a host target on another network", "a host target on the LAN", "the wildcard address as target",
        "no '='", "a target without port", "a listen address without port", "a target port out of range",
        "a name as target", "empty",
    ],
)
def test_parse_forward_refuses(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_forward(text)


# -- parse_connect -------------------------------------------------------------------------------------------

# What kube-apiserver's egress selector writes on the UNIX socket (staging/src/k8s.io/apiserver/pkg/server/
# egressselector/egress_selector.go, the HTTPConnect over UDS dialer).
EGRESS_HEAD = b"CONNECT 10.250.0.1:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (EGRESS_HEAD, ("10.250.0.1", 10250)),
        (b"CONNECT 10.244.0.7:8080 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ("10.244.0.7", 8080)),
        (b"CONNECT 10.250.0.1:10250 HTTP/1.0\r\n\r\n", ("10.250.0.1", 10250)),
        (b"CONNECT 10.250.0.1:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: x\r\n\r\n", ("10.250.0.1", 10250)),
    ],
    ids=["the kubelet, as the egress selector asks", "a pod's port (port-forward, proxy)", "HTTP/1.0",
         "more headers are ignored"],
)
def test_parse_connect(head: bytes, expected: tuple[str, int]) -> None:
    assert parse_connect(head) == expected


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET http://10.250.0.1:10250/ HTTP/1.1\r\n\r\n",
        b"connect 10.250.0.1:10250 HTTP/1.1\r\n\r\n",
        b"CONNECT 10.250.0.1:10250\r\n\r\n",
        b"CONNECT 10.250.0.1:10250 SPDY/3\r\n\r\n",
        b"CONNECT 10.250.0.1:10250 HTTP/1.1 extra\r\n\r\n",
        b"CONNECT tatara-node:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"CONNECT kubernetes.default.svc:443 HTTP/1.1\r\n\r\n",
        b"CONNECT 10.250.0.1 HTTP/1.1\r\n\r\n",
        b"CONNECT 10.250.0.1:0 HTTP/1.1\r\n\r\n",
        b"CONNECT [::1]:10250 HTTP/1.1\r\n\r\n",
        b"\r\n\r\n",
        b"",
    ],
    ids=[
        "GET", "an absolute-form GET (a forward proxy request)", "a lower-case method", "no HTTP version",
        "not HTTP", "four words", "the node's name", "a Service name", "no port", "port 0", "IPv6", "a blank head",
        "nothing",
    ],
)
def test_parse_connect_refuses(head: bytes) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_connect(head)


# -- allowed -------------------------------------------------------------------------------------------------

NODE_AND_PODS = [ipaddress.IPv4Network("10.250.0.0/24"), ipaddress.IPv4Network("10.244.0.0/24")]


@pytest.mark.parametrize(
    ("host", "networks", "expected"),
    [
        ("10.250.0.1", NODE_AND_PODS, True),
        ("10.244.0.255", NODE_AND_PODS, True),
        ("10.244.0.0", NODE_AND_PODS, True),
        ("10.244.1.1", NODE_AND_PODS, False),
        ("10.0.0.1", NODE_AND_PODS, False),
        ("127.0.0.1", NODE_AND_PODS, False),
        ("10.250.0.1", [], False),
        ("169.254.169.254", [ipaddress.IPv4Network("0.0.0.0/0")], True),
    ],
    ids=[
        "the node IP", "the last pod address", "the pods' network address", "just past the pods' subnet",
        "the Service VIP", "the host's loopback", "no allowed network refuses everything", "0.0.0.0/0 allows all",
    ],
)
def test_allowed(host: str, networks: list[ipaddress.IPv4Network], expected: bool) -> None:
    assert allowed(host, networks) is expected


def test_allowed_refuses_a_name() -> None:
    with pytest.raises(ValueError, match="tatara-node"):
        allowed("tatara-node", NODE_AND_PODS)


# -- splice on real sockets ----------------------------------------------------------------------------------


def _unix_pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair()


def _tcp_loopback_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted


PairFactory = Callable[[], tuple[socket.socket, socket.socket]]


@pytest.fixture(params=[_unix_pair, _tcp_loopback_pair], ids=["unix socketpair", "tcp on loopback"])
def pair_factory(request: pytest.FixtureRequest) -> Iterator[PairFactory]:
    made: list[socket.socket] = []

    def make() -> tuple[socket.socket, socket.socket]:
        a, b = request.param()
        made.extend((a, b))
        return a, b

    yield make
    for sock in made:
        sock.close()


async def _streams(sock: socket.socket) -> Streams:
    sock.setblocking(False)
    return await asyncio.open_connection(sock=sock)


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


@pytest.mark.anyio
async def test_splice_copies_both_ways_and_passes_each_half_close_on(pair_factory: PairFactory) -> None:
    # client <-> [a | splice | b] <-> server: the proxy holds a (towards the client) and b (towards the server)
    client_sock, a_sock = pair_factory()
    b_sock, server_sock = pair_factory()
    client, a, b, server = [await _streams(s) for s in (client_sock, a_sock, b_sock, server_sock)]
    upload = bytes(range(256)) * 4096  # 1 MiB: many chunks of the proxy's 64 KiB reads, and back-pressure
    download = b"pong" * 50_000

    with anyio.fail_after(10):
        spliced = asyncio.ensure_future(splice(a, b))
        received_by_server = bytearray()

        async def server_reads() -> None:
            while chunk := await server[0].read(1 << 16):
                received_by_server.extend(chunk)

        reading = asyncio.ensure_future(server_reads())
        await _send(client[1], upload)
        client[1].write_eof()  # the client half-closes: the server must see EOF ...
        await reading
        assert bytes(received_by_server) == upload

        # ... while the way back stays open: the server still answers through the half-closed connection
        assert not spliced.done()
        await _send(server[1], download)
        assert await client[0].readexactly(len(download)) == download
        server[1].write_eof()
        assert await client[0].read() == b""  # and the server's EOF reaches the client

        await spliced  # both directions ended: splice returns ...

    assert a[1].is_closing()  # ... having closed both of its ends
    assert b[1].is_closing()
    for _, writer in (client, server):
        writer.close()


@pytest.mark.anyio
async def test_splice_ends_when_both_peers_close_without_sending(pair_factory: PairFactory) -> None:
    client_sock, a_sock = pair_factory()
    b_sock, server_sock = pair_factory()
    client, a, b, server = [await _streams(s) for s in (client_sock, a_sock, b_sock, server_sock)]
    with anyio.fail_after(10):
        spliced = asyncio.ensure_future(splice(a, b))
        server[1].write_eof()
        assert await client[0].read() == b""
        assert not spliced.done()  # the other direction is still open
        client[1].write_eof()
        assert await server[0].read() == b""
        await spliced
    assert a[1].is_closing()
    assert b[1].is_closing()
    for _, writer in (client, server):
        writer.close()
