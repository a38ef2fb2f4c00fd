"""tools/http_receiver.py: a real loopback HTTP server that records requests and answers a set status."""

from __future__ import annotations

import aiohttp
import pytest

from tools.http_receiver import HttpReceiver


@pytest.mark.anyio
async def test_every_request_is_recorded_with_method_path_headers_and_body() -> None:
    async with HttpReceiver() as receiver, aiohttp.ClientSession() as session:
        async with session.post(f"{receiver.url}/hooks/a?x=1", data=b'{"a":1}',
                                headers={"X-Tatara-Signal-Type": "export"}) as response:
            assert response.status == 200
        async with session.get(f"{receiver.url}/other") as response:
            assert response.status == 200
    first, second = receiver.requests
    assert (first.method, first.path, first.body) == ("POST", "/hooks/a?x=1", b'{"a":1}')
    assert first.header("x-tatara-signal-type") == "export"
    assert (second.method, second.path, second.body) == ("GET", "/other", b"")


@pytest.mark.anyio
async def test_the_configured_status_is_answered_and_can_change_while_running() -> None:
    async with HttpReceiver(status=500) as receiver, aiohttp.ClientSession() as session:
        async with session.post(receiver.url, data=b"x") as response:
            assert response.status == 500
        receiver.status = 202
        async with session.post(receiver.url, data=b"y") as response:
            assert response.status == 202
    assert [r.body for r in receiver.requests] == [b"x", b"y"]
