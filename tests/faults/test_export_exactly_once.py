"""Exactly once where the sink allows it: the real ``tatara-export-worker`` killed between its ship and its
receipt, and a JetStream acknowledgement lost once, then retried as the export Job's retry would run it
(docs/behaviour.md#exactly-once-where-the-sink-allows-it).

The faults are real and placed exactly, without hooks in the worker:

- *killed between the ship and the receipt*: the worker reaches the API server through a :class:`TcpProxy`
  that holds every connection. A runMarker export reads nothing from the API server, so the worker's first
  request is its receipt write; once the sink holds the event (the stream stored the message and its
  acknowledgement passed; the HTTP receiver answered 200) and the receipt write is held at the proxy, the
  test SIGKILLs the worker;
- *an acknowledgement lost once*: a :class:`NatsAckProxy` between worker and nats-server drops the first
  JetStream publish acknowledgement; the worker waits its 15 s, fails (``NATS ack: …``) and exits 1.

Each retry is a second run of the same command (what the Job's ``backoffLimit: 1`` retry runs), with the
same ``--idempotency-key`` the reconciler derives. Then there is one message in the stream, one distinct key
at the receiver and one receipt, whose evidence says so and whose artifact pillar is the stored message.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import nats
import pytest
import yaml
from nats.js.client import JetStreamContext

from shared.domain.export_key import export_key
from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient
from tests.integration.export_worker.conftest import PROCESS, receipt_configmap, run_worker, worker_command
from tests.support.kube import wait_for
from tests.support.proxies import NatsAckProxy, TcpProxy
from tools.controlplane import LocalControlPlane
from tools.http_receiver import HttpReceiver
from tools.nats_server import NatsServer

pytestmark = pytest.mark.anyio

RECEIPT = "pr-1-export-0-receipt"


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(store_dir=tmp_path_factory.mktemp("jetstream")) as server:
        yield server


@pytest.fixture
async def jetstream(nats_server: NatsServer, ns: str) -> AsyncIterator[tuple[JetStreamContext, str]]:
    """A JetStream context and a stream of this test's own (``<stream>.>``)."""
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        stream = f"S{ns.replace('-', '')}"
        await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        yield js, stream
    finally:
        await client.close()


async def process_key(admin: KubeClient, ns: str) -> str:
    """Create the Process ``pr-1`` and return the key the reconciler would pass its export 0."""
    created = msgspec.json.decode(await admin.create(
        PROCESSES, {**PROCESS, "metadata": {**PROCESS["metadata"], "namespace": ns}}, ns))
    return export_key(created["metadata"]["uid"], created["metadata"].get("generation"), 0)


def runmarker(channel: dict[str, Any]) -> dict[str, Any]:
    return {"source": {"runMarker": {"labels": {}}}, "channel": channel, "when": "OnAttested"}


def through(kubeconfig: Path, proxy: TcpProxy, to: Path) -> Path:
    """``kubeconfig`` with its server reached through ``proxy`` (same host, so the certificate still fits)."""
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    to.write_text(yaml.safe_dump(config))
    return to


async def kill_once_the_receipt_write_is_held(plane: LocalControlPlane, ns: str, export: dict[str, Any], key: str,
                                              shipped: Any, tmp_path: Path) -> None:
    """Run the worker with its API server behind a holding proxy; once ``shipped()`` says the sink holds the
    event and the worker's receipt write is held, SIGKILL it; check it left no receipt."""
    async with TcpProxy(upstream_port=plane.api_port, hold=asyncio.Event()) as api:
        args, env = worker_command(through(plane.kubeconfig, api, tmp_path / "kubeconfig-held"), export, ns,
                                   "--idempotency-key", key)
        async with await anyio.open_process(args, env=env, stdin=subprocess.DEVNULL) as proc:
            await wait_for(shipped, timeout=60, what="the sink to hold the event")
            await wait_for(lambda: _true(api.held > 0), timeout=60, what="the receipt write to reach the API server")
            proc.kill()  # SIGKILL: the ship is done, the receipt is not
            assert await proc.wait() == -9


async def _true(value: bool) -> bool:
    return value


async def messages(js: JetStreamContext, stream: str) -> int:
    return int((await js.stream_info(stream)).state.messages)


async def test_a_nats_export_killed_between_its_publish_and_its_receipt_is_stored_once(
        plane: LocalControlPlane, admin: KubeClient, ns: str, jetstream: tuple[JetStreamContext, str],
        nats_server: NatsServer, tmp_path: Path) -> None:
    js, stream = jetstream
    key = await process_key(admin, ns)
    async with NatsAckProxy(upstream_port=nats_server.port or 0) as nats_proxy:
        export = runmarker({"natsSubject": {"subject": f"{stream}.done", "stream": stream, "url": nats_proxy.url}})

        async def acknowledged() -> bool:
            return await messages(js, stream) == 1 and nats_proxy.acks == 1

        await kill_once_the_receipt_write_is_held(plane, ns, export, key, acknowledged, tmp_path)
        assert await receipt_configmap(admin, ns, RECEIPT) == {}, "killed before its receipt"
        retry = await run_worker(plane.kubeconfig, admin, export, ns, "--idempotency-key", key)
    assert retry.returncode == 0, retry.stderr
    assert await messages(js, stream) == 1, "the retry was not stored again"
    stored = await js.get_msg(stream, 1)
    assert (stored.headers or {}).get("Nats-Msg-Id") == key
    evidence = retry.verify(export, "shipped", stored.data)  # the artifact pillar is the stored message
    assert (evidence["duplicate"], evidence["idempotency_key"]) == (True, key)


async def test_a_lost_jetstream_acknowledgement_fails_once_and_its_retry_is_stored_once(
        plane: LocalControlPlane, admin: KubeClient, ns: str, jetstream: tuple[JetStreamContext, str],
        nats_server: NatsServer) -> None:
    js, stream = jetstream
    key = await process_key(admin, ns)
    async with NatsAckProxy(upstream_port=nats_server.port or 0, drop_acks=1) as nats_proxy:
        export = runmarker({"natsSubject": {"subject": f"{stream}.done", "stream": stream, "url": nats_proxy.url}})
        first = await run_worker(plane.kubeconfig, admin, export, ns, "--idempotency-key", key)
        assert first.returncode == 1
        assert (nats_proxy.acks, nats_proxy.dropped) == (1, 1)
        assert first.receipt["evidence"]["error"] == "NATS ack: nats: timeout"
        assert first.receipt["evidence"]["shipped_bytes_len"] == 0, "the worker never learnt the stream took it"
        assert await messages(js, stream) == 1, "the stream did store it"
        retry = await run_worker(plane.kubeconfig, admin, export, ns, "--idempotency-key", key)
    assert retry.returncode == 0, retry.stderr
    assert await messages(js, stream) == 1
    stored = await js.get_msg(stream, 1)
    evidence = retry.verify(export, "shipped", stored.data)
    assert (evidence["duplicate"], evidence["idempotency_key"], evidence["outcome"]) == (True, key, "Shipped")
    assert retry.configmap["metadata"]["uid"] == first.configmap["metadata"]["uid"], "one receipt, overwritten"
    events = msgspec.json.decode(await admin.list(EVENTS, ns))["items"]
    assert [e["message"] for e in events if e["reason"] == "ExportShipped"] == [
        f"export receipt {RECEIPT}: Shipped (duplicate: the sink already held export {key}; nothing stored twice)"]


async def test_an_http_export_killed_between_its_post_and_its_receipt_carries_one_key(
        plane: LocalControlPlane, admin: KubeClient, ns: str, tmp_path: Path) -> None:
    key = await process_key(admin, ns)
    async with HttpReceiver() as receiver:
        export = runmarker({"httpEvent": {"endpoint": f"{receiver.url}/ingest", "signalType": "marker"}})

        async def answered() -> bool:
            return len(receiver.requests) == 1

        await kill_once_the_receipt_write_is_held(plane, ns, export, key, answered, tmp_path)
        assert await receipt_configmap(admin, ns, RECEIPT) == {}, "killed before its receipt"
        retry = await run_worker(plane.kubeconfig, admin, export, ns, "--idempotency-key", key)
    assert retry.returncode == 0, retry.stderr
    assert len(receiver.requests) == 2, "HTTP cannot drop the retry itself; the receiver can, by its key"
    assert {r.header("Idempotency-Key") for r in receiver.requests} == {f'"{key}"'}
    evidence = retry.verify(export, "shipped", receiver.requests[-1].body)
    assert evidence["idempotency_key"] == key
    assert "duplicate" not in evidence, "HTTP has no way to say it already had the event"
