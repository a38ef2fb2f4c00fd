"""export_worker/channels.py against real sinks on loopback: the HTTP receiver and nats-server with JetStream."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import nats
import pytest

from export_worker import channels
from export_worker.event import ExportEvent
from export_worker.outcome import ExportOutcome, OutcomeKind
from shared.domain.api.export import HttpEventChannel, NatsSubjectChannel, StdoutChannel, VectorChannel
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
    assert outcome.message.startswith("HTTP error: Cannot connect to host 127.0.0.1:")
    monkeypatch.setattr(channels, "HTTP_TIMEOUT", 0.3)
    async with HttpReceiver(hold=asyncio.Event()) as receiver:
        outcome = await channels.ship(http(receiver.url), EVENT, BYTES, "ns/p", io.StringIO())
        assert len(receiver.requests) == 1, "the request arrived; its answer never did"
    assert outcome == ExportOutcome.failed("HTTP error: no answer within 0.3 s")


async def test_nats_publishes_to_the_expanded_subject_and_a_subject_without_a_stream_fails_the_ack(
        nats_server: NatsServer) -> None:
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        await js.add_stream(name="EXP", subjects=["exp.>"])
        channel = VectorChannel(nats_subject=NatsSubjectChannel(subject="exp.{{run_id}}.x", stream="EXP",
                                                                url=nats_server.url))
        assert await channels.ship(channel, EVENT, BYTES, "r1", io.StringIO()) == ExportOutcome.shipped()
        message = await js.get_msg("EXP", 1)
        assert (message.subject, message.data) == ("exp.r1.x", BYTES)
        nowhere = VectorChannel(nats_subject=NatsSubjectChannel(subject="unstreamed.x", stream="EXP",
                                                                url=nats_server.url))
        outcome = await channels.ship(nowhere, EVENT, BYTES, "r1", io.StringIO())
        assert outcome == ExportOutcome.failed("NATS ack: nats: no response from stream")
    finally:
        await client.close()


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
