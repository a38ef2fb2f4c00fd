"""TCP across the node's network namespace boundary, in both directions, without touching the host's network.

The local node (:mod:`tools.controlplane.node`) runs in a network namespace of its own; the control plane, the
export sinks and the tests stay on the host's loopback. This process joins the two (README.md#a-real-node):

- **into the node**: for each ``--forward NODE_ADDR:PORT=127.0.0.1:PORT`` it listens *inside* the node's
  namespace and splices every connection to the host loopback address. The kubelet and the pods reach the
  API server (and, through the Service VIP that the namespace DNATs here, ``KUBERNETES_SERVICE_HOST``), NATS
  and the HTTP receiver this way.
- **out of the control plane**: ``--connect-socket PATH`` serves HTTP ``CONNECT`` on a UNIX socket on the host;
  kube-apiserver's egress selector (its ``cluster`` egress: logs, exec, port-forward, proxy to nodes and pods)
  dials through it, and the proxy opens the connection from inside the node's namespace. Only targets in
  ``--allow`` networks are accepted (the node's and the pods' subnets), so nothing else is ever dialled.

A socket belongs to the network namespace it was created in, whatever thread uses it later; sockets for the
node's side are created on one worker thread that has ``setns(2)``-ed into the namespace (Python 3.11 has no
``os.setns``, hence ``ctypes``). Debian 12's socat (1.7) can neither open sockets in another namespace nor
answer ``CONNECT``, which is why this is ours.

Usage: ``python -m tools.controlplane.netns_proxy --netns /proc/<pid>/ns/net --forward 10.250.0.1:6443=127.0.0.1:41234
--connect-socket /tmp/x/egress.sock --allow 10.250.0.0/24 --allow 10.244.0.0/24``; it prints ``ready`` on stdout
once every listener is bound and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ipaddress
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
"""``setns(2)``'s namespace type for a network namespace (linux/sched.h)."""

_CHUNK = 1 << 16
UNIX_PATH_MAX = 108
"""``sizeof(sockaddr_un.sun_path)`` on Linux, the terminating NUL included."""


@dataclass(frozen=True)
class Forward:
    """Listen on ``listen`` inside the node's namespace; connect to ``target`` on the host."""

    listen: tuple[str, int]
    target: tuple[str, int]


def parse_address(text: str) -> tuple[str, int]:
    """``"10.250.0.1:6443"`` → ``("10.250.0.1", 6443)``.

    Raises:
        ValueError: no port, a port outside 1–65535, or a host that is not an IPv4 address.
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"{text!r}: expected HOST:PORT")
    number = int(port)
    if not 0 < number < 65536:
        raise ValueError(f"{text!r}: port out of range")
    return str(ipaddress.IPv4Address(host)), number


def parse_forward(text: str) -> Forward:
    """``"NODE_ADDR:PORT=HOST_ADDR:PORT"`` → :class:`Forward`; the host side must be loopback.

    Raises:
        ValueError: malformed, or a host target that is not on 127.0.0.0/8.
    """
    listen, sep, target = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r}: expected NODE_ADDR:PORT=127.0.0.1:PORT")
    forward = Forward(parse_address(listen), parse_address(target))
    if not ipaddress.IPv4Address(forward.target[0]).is_loopback:
        raise ValueError(f"{text!r}: the host side of a forward must be a loopback address")
    return forward


def parse_connect(request_head: bytes) -> tuple[str, int]:
    """The ``(host, port)`` of an HTTP ``CONNECT host:port HTTP/1.1`` request head (up to the blank line).

    Raises:
        ValueError: not a CONNECT request, or a target that is not ``IPv4:port`` (kube-apiserver dials the
            node's and the pods' IP addresses, never names).
    """
    line = request_head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or parts[0] != "CONNECT" or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"not a CONNECT request: {line!r}")
    return parse_address(parts[1])


def allowed(host: str, networks: Sequence[ipaddress.IPv4Network]) -> bool:
    """True when ``host`` lies in one of ``networks``."""
    address = ipaddress.IPv4Address(host)
    return any(address in net for net in networks)


class NetnsSockets:
    """Creates sockets inside the network namespace at ``path`` (``/proc/<pid>/ns/net``) on one worker thread."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netns", initializer=self._enter)

    def _enter(self) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.setns(self._fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the node's network namespace: {os.strerror(err)}")

    async def listener(self, address: tuple[str, int]) -> socket.socket:
        """A bound, listening, non-blocking TCP socket at ``address`` in the namespace."""
        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(256)
            sock.setblocking(False)
            return sock
        return await asyncio.get_running_loop().run_in_executor(self._pool, make)

    async def connect(self, address: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``address`` opened from inside the namespace."""
        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            return sock
        sock = await asyncio.get_running_loop().run_in_executor(self._pool, make)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, address), 10)
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock, limit=_CHUNK)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        os.close(self._fd)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()


async def splice(a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 b: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    """Copy both ways until both directions have ended; then close both writers."""
    try:
        await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))
    finally:
        for writer in (a[1], b[1]):
            writer.close()


async def serve(netns: Path, forwards: Sequence[Forward], connect_socket: Path | None,
                networks: Sequence[ipaddress.IPv4Network]) -> None:
    """Run every listener until cancelled; print ``ready`` once all are bound."""
    sockets = NetnsSockets(netns)
    servers: list[asyncio.Server] = []

    def forwarder(target: tuple[str, int]) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                       Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                upstream = await asyncio.open_connection(*target, limit=_CHUNK)
            except OSError:
                writer.close()
                return
            await splice((reader, writer), upstream)
        return handle

    async def connect_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            host, port = parse_connect(head)
            if not allowed(host, networks):
                writer.write(b"HTTP/1.1 403 Forbidden\r\n\r\n")
                await writer.drain()
                writer.close()
                return
            upstream = await sockets.connect((host, port))
        except (ValueError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            with contextlib.suppress(OSError):
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                await writer.drain()
            writer.close()
            return
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        except OSError:
            upstream[1].close()
            writer.close()
            return
        await splice((reader, writer), upstream)

    try:
        for forward in forwards:
            listener = await sockets.listener(forward.listen)
            servers.append(await asyncio.start_server(forwarder(forward.target), sock=listener, limit=_CHUNK))
        if connect_socket is not None:
            if len(os.fsencode(connect_socket)) >= UNIX_PATH_MAX:
                raise SystemExit(f"netns_proxy: the socket path {connect_socket} is longer than a UNIX socket "
                                 f"allows ({UNIX_PATH_MAX - 1} bytes); use a shorter TMPDIR")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(connect_socket)  # a socket left by an earlier proxy of the same plane
            servers.append(await asyncio.start_unix_server(connect_handler, path=str(connect_socket), limit=_CHUNK))
        print("ready", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for server in servers:
            server.close()
        sockets.close()
        if connect_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(connect_socket)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.controlplane.netns_proxy",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--netns", required=True, type=Path, help="the node's network namespace (/proc/<pid>/ns/net)")
    parser.add_argument("--forward", action="append", default=[], type=parse_forward,
                        help="NODE_ADDR:PORT=127.0.0.1:PORT: listen in the node, connect on the host (repeatable)")
    parser.add_argument("--connect-socket", type=Path, default=None,
                        help="UNIX socket on the host answering HTTP CONNECT into the node (kube-apiserver's egress)")
    parser.add_argument("--allow", action="append", default=[], type=ipaddress.IPv4Network,
                        help="network a CONNECT may target (repeatable; none: every CONNECT is refused)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.netns, args.forward, args.connect_socket, args.allow))
    return 0


if __name__ == "__main__":
    sys.exit(main())
