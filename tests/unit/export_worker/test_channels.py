"""export_worker/channels.py against real sinks on loopback: the HTTP receiver and nats-server with JetStream."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import nats
import pytest
from aiohttp import web
from nats.js.client import JetStreamContext

from export_worker import channels
from export_worker.event import ExportEvent
from export_worker.outcome import ExportOutcome, OutcomeKind
from shared.domain.api.export import HttpEventChannel, NatsSubjectChannel, StdoutChannel, VectorChannel
from tests.support.proxies import NatsAckProxy
from tools.controlplane.cluster import free_port
from tools.http_receiver import HttpReceiver
from tools.nats_server import NatsServer

pytestmark = pytest.mark.anyio

EVENT = ExportEvent(signal_type="s", run_id="ns/p", timestamp=datetime(2026, 5, 19, 12, tzinfo=UTC),
                    labels={"run_id": "ns/p"}, payload={"b": [1, {}], "a": "ü"})
BYTES = EVENT.compact()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(store_dir=tmp_path_factory.mktemp("js")) as server:
        yield server


def http(url: str) -> VectorChannel:
    return VectorChannel(http_event=HttpEventChannel(endpoint=url, signal_type="sig"))


async def test_http_posts_the_bytes_with_the_headers_and_a_2xx_ships() -> None:
    async with HttpReceiver(status=204) as receiver:
        outcome = await channels.ship(http(f"{receiver.url}/in"), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome == ExportOutcome.shipped()
    (request,) = receiver.requests
    assert (request.method, request.path, request.body) == ("POST", "/in", BYTES)
    assert (request.header("content-type"), request.header("x-tatara-signal-type")) == ("application/json", "sig")


async def test_http_answers_other_than_2xx_are_rejected_with_the_status() -> None:
    async with HttpReceiver(status=503) as receiver:
        outcome = await channels.ship(http(receiver.url), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome == ExportOutcome.rejected("HTTP 503 Service Unavailable")


async def test_http_without_an_answer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = await channels.ship(http(f"http://127.0.0.1:{free_port()}/"), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.message is not None
    assert outcome.message.startswith("HTTP error: cannot connect to http://127.0.0.1:")
    monkeypatch.setattr(channels, "HTTP_TIMEOUT", 0.3)
    async with HttpReceiver(hold=asyncio.Event()) as receiver:
        outcome = await channels.ship(http(receiver.url), EVENT, BYTES, "ns/p", io.StringIO())
        assert len(receiver.requests) == 1, "the request arrived; its answer never did"
    assert outcome == ExportOutcome.failed("HTTP error: no answer within 0.3 s")


@contextlib.asynccontextmanager
async def redirecting_sink() -> AsyncIterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """aiohttp's web server: ``/307`` and ``/308`` redirect to ``/in`` (a relative ``Location``), ``/302`` too,
    ``/loop`` to itself; ``/in`` answers 204. Yields its URL and the (method, path, body) of every request."""
    seen: list[tuple[str, str, bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, await request.read()))
        if request.path == "/in":
            return web.Response(status=204)
        target = request.path if request.path == "/loop" else "in"
        return web.Response(status=int(request.path[1:]) if request.path != "/loop" else 307,
                            headers={"Location": target})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("status", [307, 308])
async def test_http_follows_a_redirect_that_keeps_the_post(status: int) -> None:
    async with redirecting_sink() as (url, seen):
        outcome = await channels.ship(http(f"{url}/{status}"), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome == ExportOutcome.shipped()
    assert seen == [("POST", f"/{status}", BYTES), ("POST", "/in", BYTES)]


async def test_http_a_redirect_that_would_drop_the_body_is_the_answer() -> None:
    async with redirecting_sink() as (url, seen):
        outcome = await channels.ship(http(f"{url}/302"), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome == ExportOutcome.rejected("HTTP 302 Found")
    assert seen == [("POST", "/302", BYTES)]


async def test_http_gives_up_after_ten_redirects() -> None:
    async with redirecting_sink() as (url, seen):
        outcome = await channels.ship(http(f"{url}/loop"), EVENT, BYTES, "ns/p", io.StringIO())
    assert outcome == ExportOutcome.failed("HTTP error: more than 10 redirects")
    assert len(seen) == 11  # the first POST and ten redirected ones


@contextlib.asynccontextmanager
async def stream(server: NatsServer, name: str, subject: str) -> AsyncIterator[tuple[JetStreamContext, VectorChannel]]:
    """A JetStream stream ``name`` over ``<prefix>.>`` (the prefix: ``subject`` up to its first dot), and a
    channel publishing to ``subject``."""
    client = await nats.connect(server.url)
    try:
        js = client.jetstream()
        await js.add_stream(name=name, subjects=[f"{subject.split('.', 1)[0]}.>"])
        yield js, VectorChannel(nats_subject=NatsSubjectChannel(subject=subject, stream=name, url=server.url))
    finally:
        await client.close()


async def test_nats_publishes_to_the_expanded_subject_and_a_subject_without_a_stream_fails_the_ack(
        nats_server: NatsServer) -> None:
    async with stream(nats_server, "EXP", "exp.{{run_id}}.x") as (js, channel):
        assert await channels.ship(channel, EVENT, BYTES, "r1", io.StringIO()) == ExportOutcome.shipped()
        message = await js.get_msg("EXP", 1)
        assert (message.subject, message.data) == ("exp.r1.x", BYTES)
        nowhere = VectorChannel(nats_subject=NatsSubjectChannel(subject="unstreamed.x", stream="EXP",
                                                                url=nats_server.url))
        outcome = await channels.ship(nowhere, EVENT, BYTES, "r1", io.StringIO())
        assert outcome == ExportOutcome.failed("NATS ack: nats: no response from stream")


async def test_nats_that_cannot_be_reached_fails_the_connect_with_its_cause() -> None:
    channel = VectorChannel(nats_subject=NatsSubjectChannel(subject="a", stream="A",
                                                            url=f"nats://127.0.0.1:{free_port()}"))
    outcome = await channels.ship(channel, EVENT, BYTES, "r", io.StringIO())
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.message is not None
    assert outcome.message.startswith("NATS connect: nats: no servers available for connection (")
    assert "Connect call failed" in outcome.message


@pytest.mark.parametrize("pretty", [False, True], ids=["one compact line", "pretty"])
async def test_stdout_prints_the_event_and_a_newline(pretty: bool) -> None:
    out = io.StringIO()
    channel = VectorChannel(stdout=StdoutChannel(pretty=pretty))
    assert await channels.ship(channel, EVENT, BYTES, "r", out) == ExportOutcome.shipped()
    text = out.getvalue()
    assert text == (EVENT.pretty() if pretty else BYTES).decode() + "\n"
    assert json.loads(text) == json.loads(BYTES)


async def test_a_channel_with_no_variant_fails_without_shipping() -> None:
    outcome = await channels.ship(VectorChannel(), EVENT, BYTES, "r", io.StringIO())
    assert outcome == ExportOutcome.failed(
        "channel: vector channel has no variant set (one of httpEvent/natsSubject/stdout required)")


KEY = "tatara-export/u-1/3/0"


async def test_http_sends_the_idempotency_key_as_a_structured_field_string() -> None:
    async with HttpReceiver() as receiver:
        assert await channels.ship(http(receiver.url), EVENT, BYTES, "ns/p", io.StringIO(), KEY) == \
            ExportOutcome.shipped()
        assert await channels.ship(http(receiver.url), EVENT, BYTES, "ns/p", io.StringIO()) == ExportOutcome.shipped()
    with_key, without = receiver.requests
    assert with_key.header("Idempotency-Key") == f'"{KEY}"'  # RFC 8941 sf-string, as the IETF draft defines it
    assert without.header("Idempotency-Key") is None


async def test_nats_sends_the_key_as_nats_msg_id_and_a_retry_is_stored_once_and_reported_a_duplicate(
        nats_server: NatsServer) -> None:
    async with stream(nats_server, "DEDUP", "dedup.x") as (js, channel):
        assert await channels.ship(channel, EVENT, BYTES, "r", io.StringIO(), KEY) == ExportOutcome.shipped()
        retry = BYTES.replace(b"2026", b"2027")  # a retry's event carries a later timestamp
        outcome = await channels.ship(channel, EVENT, retry, "r", io.StringIO(), KEY)
        assert outcome == ExportOutcome.shipped(duplicate=True, stored=BYTES), "the stream kept the first bytes"
        other = await channels.ship(channel, EVENT, retry, "r", io.StringIO(), "tatara-export/u-1/3/1")
        assert other == ExportOutcome.shipped(), "another export is another message"
        info = await js.stream_info("DEDUP")
        assert info.state.messages == 2
        first = await js.get_msg("DEDUP", 1)
        assert (first.data, (first.headers or {}).get("Nats-Msg-Id")) == (BYTES, KEY)


async def test_a_lost_acknowledgement_fails_the_ack_and_the_retry_is_the_duplicate_of_the_stored_message(
        nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channels, "NATS_TIMEOUT", 1.0)
    async with stream(nats_server, "LOST", "lost.x") as (js, _), \
            NatsAckProxy(upstream_port=nats_server.port or 0, drop_acks=1) as proxy:
        channel = VectorChannel(nats_subject=NatsSubjectChannel(subject="lost.x", stream="LOST", url=proxy.url))
        assert await channels.ship(channel, EVENT, BYTES, "r", io.StringIO(), KEY) == ExportOutcome.failed(
            "NATS ack: nats: timeout")
        assert (proxy.acks, proxy.dropped) == (1, 1), "the stream acknowledged; the publisher never heard"
        retry = BYTES.replace(b"2026", b"2027")
        assert await channels.ship(channel, EVENT, retry, "r", io.StringIO(), KEY) == ExportOutcome.shipped(
            duplicate=True, stored=BYTES)
        assert (await js.stream_info("LOST")).state.messages == 1
