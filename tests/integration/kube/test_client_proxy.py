"""The client resolves its proxy once, and still honours it: a real HTTP CONNECT proxy on loopback.

The client turns off aiohttp's per-request environment lookup (docs/runtime.md#client), so these
tests check that ``HTTPS_PROXY`` and ``NO_PROXY`` keep working the way client-go's
``http.ProxyFromEnvironment`` reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest

from shared.kube.client import NAMESPACES, KubeClient, proxy_for
from tools.controlplane import LocalControlPlane

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def connect_proxy() -> AsyncIterator[tuple[str, list[str]]]:
    """A minimal HTTP CONNECT proxy on a free loopback port; yields its URL and the targets it tunnelled."""
    tunnelled: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            writer.close()
            return
        tunnelled.append(target)
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", tunnelled
    finally:
        server.close()


async def test_requests_go_through_the_https_proxy_of_the_environment(
    private_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connect_proxy() as (url, tunnelled):
        monkeypatch.setenv("HTTPS_PROXY", url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
            await client.get(NAMESPACES, "default")
            await client.get(NAMESPACES, "kube-system")
    assert tunnelled, "no request went through the proxy"
    assert set(tunnelled) == {urlsplit(private_plane.server).netloc}


async def test_no_proxy_sends_requests_directly(
    private_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connect_proxy() as (url, tunnelled):
        monkeypatch.setenv("HTTPS_PROXY", url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
            await client.get(NAMESPACES, "default")
    assert tunnelled == []


@pytest.mark.parametrize(
    ("env", "configured", "expected"),
    [
        ({}, None, None),
        ({"HTTPS_PROXY": "http://proxy:3128"}, None, "http://proxy:3128"),
        ({"https_proxy": "http://lower:3128"}, None, "http://lower:3128"),
        ({"HTTP_PROXY": "http://plain:3128"}, None, None),  # an https:// server uses HTTPS_PROXY only
        ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "api.example"}, None, None),
        ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "other.example"}, None, "http://proxy:3128"),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "http://kubeconfig:8080", "http://kubeconfig:8080"),
    ],
)
def test_proxy_for(env: dict[str, str], configured: str | None, expected: str | None,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert proxy_for("https://api.example:6443", configured)[0] == expected
