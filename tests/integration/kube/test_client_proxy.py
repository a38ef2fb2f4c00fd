"""The client resolves its proxy once, and still honours it: a real HTTP CONNECT proxy on loopback.

The client looks the proxy up once, when it is built (docs/runtime.md#client), and tunnels through it with
``CONNECT``; these tests check that ``HTTPS_PROXY`` and ``NO_PROXY`` work the way client-go's
``http.ProxyFromEnvironment`` reads them, and that credentials in the proxy URL reach the proxy.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest

from shared.kube.client import NAMESPACES, KubeClient, proxy_for
from shared.kube.errors import ApiError
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
async def connect_proxy(authorization: str | None = None) -> AsyncIterator[tuple[str, list[str]]]:
    """A minimal HTTP CONNECT proxy on a free loopback port; yields its URL and the targets it tunnelled.

    With ``authorization``, a CONNECT without that ``Proxy-Authorization`` value is refused with 407."""
    tunnelled: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = request.decode().split("\r\n")
        method, target, _ = status_line.split(" ", 2)
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            writer.close()
            return
        if authorization is not None and headers.get("proxy-authorization") != authorization:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
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


async def test_credentials_in_the_proxy_url_reach_the_proxy(
    private_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = "Basic " + base64.b64encode(b"tatara:p@ss word").decode()  # RFC 7617, percent-decoded first
    async with connect_proxy(expected) as (url, tunnelled):
        monkeypatch.setenv("HTTPS_PROXY", url.replace("http://", "http://tatara:p%40ss%20word@"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
            await client.get(NAMESPACES, "default")
    assert set(tunnelled) == {urlsplit(private_plane.server).netloc}


async def test_a_proxy_refusing_the_tunnel_is_a_failed_request(
    private_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connect_proxy("Basic bm90OnRoaXM=") as (url, tunnelled):
        monkeypatch.setenv("HTTPS_PROXY", url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
            with pytest.raises(ApiError) as raised:
                await client.get(NAMESPACES, "default")
    assert raised.value.status == 0
    assert "407" in str(raised.value)
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
    assert proxy_for("https://api.example:6443", configured) == expected
