"""The real ``tatara-export-worker`` against the real API server, a real NATS JetStream and a real HTTP receiver.

Every source and every channel ships; each receipt's pillars are recomputed here from what the sink received,
the spec and the outcome, and its root from the pillars (docs/wire-format.md#export-receipts). Bad input —
an HTTP 500, an unreachable NATS, a missing report key or ConfigMap, a channel with two variants — gives a
receipt that says why, a Warning Event on the Process, and exit status 1."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import msgspec
import nats
import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import CONFIG_MAPS, EVENTS, KubeClient
from tests.integration.export_worker.conftest import (
    PROCESS,
    Run,
    canonical,
    hexdigest,
    receipt_configmap,
    run_worker,
    worker_command,
)
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.http_receiver import HttpReceiver
from tools.nats_server import NatsServer

pytestmark = pytest.mark.anyio

RECEIPT_JSON = json.dumps({"version": "tatara-receipt/v1", "kind": "test-suite", "composed_root": "r",
                           "intent_hash": "i", "artifact_hash": "a", "control_hash": "",
                           "generated_at": "2026-05-19T12:00:00Z"})
RECEIPT_YAML = ("version: tatara-receipt/v1\nkind: db-migration\ncomposed_root: r2\nintent_hash: i2\n"
                "artifact_hash: a2\ncontrol_hash: ''\ngenerated_at: 2026-05-19T12:00:00Z\n")


def http(receiver: HttpReceiver, signal_type: str) -> dict[str, Any]:
    return {"httpEvent": {"endpoint": f"{receiver.url}/ingest", "signalType": signal_type}}


def spec(source: dict[str, Any], channel: dict[str, Any], **more: Any) -> dict[str, Any]:
    """An ExportSpec with every default written out (so its sorted JSON is the canonical one)."""
    return {"source": source, "channel": channel, "when": "OnAttested", **more}


async def setup(kc: KubeClient, namespace: str) -> None:
    await kc.create(PROCESSES, {**PROCESS, "metadata": {**PROCESS["metadata"], "namespace": namespace}}, namespace)
    await kc.create(CONFIG_MAPS, {"metadata": {"name": "results"}, "data": {"report.ndjson": '{"t":"a"}\n\nnope\n'},
                                  "binaryData": {"junit.xml": "PG9rLz4="}}, namespace)
    annotated = {"tatara.pleme.io/process": f"{namespace}/pr-1"}
    await kc.create(CONFIG_MAPS, {"metadata": {"name": "job-a-receipt", "annotations": annotated},
                                  "data": {"receipt.json": RECEIPT_JSON, "receipt.yaml": RECEIPT_YAML,
                                           "notes.txt": "not a receipt"}}, namespace)
    await kc.create(CONFIG_MAPS, {"metadata": {"name": "other-receipt",
                                               "annotations": {"tatara.pleme.io/process": f"{namespace}/pr-2"}},
                                  "data": {"receipt.json": RECEIPT_JSON}}, namespace)


async def events_for(kc: KubeClient, namespace: str) -> list[tuple[str, str, str]]:
    items = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == "pr-1"]


def assert_receipt_metadata(run: Run, namespace: str) -> None:
    meta = run.configmap["metadata"]
    assert meta["labels"] == {"tatara.pleme.io/role": "export", "tatara.pleme.io/receipt": "tatara-receipt.v1"}
    assert meta["annotations"] == {"tatara.pleme.io/process": f"{namespace}/pr-1"}
    assert "ownerReferences" not in meta
    assert {m["manager"] for m in meta["managedFields"]} == {"tatara-export-worker"}
    assert run.receipt["process_ref"] == f"{namespace}/pr-1"


async def test_every_source_ships_over_http_and_each_receipt_verifies(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, receiver: HttpReceiver) -> None:
    await setup(kc, namespace)
    cases = [
        ("runMarker", {"runMarker": {"labels": {"pr": "1"}}}),
        ("testReport", {"testReport": {"configmap": "results", "key": "report.ndjson", "format": "NdJson"}}),
        ("testReport-binary", {"testReport": {"configmap": "results", "key": "junit.xml", "format": "Junit"}}),
        ("processSnapshot", {"processSnapshot": {"includeAttestationChain": False}}),
        ("receipts", {"receipts": {}}),
    ]
    for index, (signal, source) in enumerate(cases):
        export = spec(source, http(receiver, signal))
        cm = f"pr-1-export-{index}-receipt"
        run = await run_worker(control_plane.kubeconfig, kc, export, namespace, configmap=cm)
        assert run.returncode == 0, run.stderr
        request = receiver.requests[-1]
        assert (request.method, request.path) == ("POST", "/ingest")
        assert request.header("Content-Type") == "application/json"
        assert request.header("X-Tatara-Signal-Type") == signal
        evidence = run.verify(export, "shipped", request.body)
        assert (evidence["outcome"], evidence["run_id"]) == ("Shipped", f"{namespace}/pr-1")
        assert "error" not in evidence
        assert_receipt_metadata(run, namespace)
        event = json.loads(request.body)
        assert list(event)[:5] == ["signal_type", "run_id", "timestamp", "labels", "payload"]
        if signal == "runMarker":
            assert (event["labels"], event["payload"]) == ({"pr": "1", "run_id": f"{namespace}/pr-1"}, None)
        elif signal == "testReport":
            assert (event["payload"], event["format"]) == ({"ndjson": [{"t": "a"}]}, "NdJson")
        elif signal == "testReport-binary":
            assert event["payload"] == {"raw_b64": "PG9rLz4="}
        elif signal == "processSnapshot":
            live = msgspec.json.decode(await kc.get(PROCESSES, "pr-1", namespace))
            snapshot = event["payload"]["snapshot"]
            assert (snapshot["metadata"]["uid"], snapshot["spec"]) == (live["metadata"]["uid"], live["spec"])
        else:  # receipts: the two of job-a-receipt; the notes skipped; pr-2's and the export receipts not read
            assert sorted(r["kind"] for r in event["payload"]["receipts"]) == ["db-migration", "test-suite"]
            assert evidence["skipped_receipts"] == 1
    events = await events_for(kc, namespace)
    assert ("Normal", "ExportShipped", "export receipt pr-1-export-0-receipt: Shipped") in events
    skipped = [e for e in events if e[1] == "ReceiptsSkipped"]
    assert skipped == [("Warning", "ReceiptsSkipped", "export receipt pr-1-export-4-receipt: 1 value(s) annotated "
                        f"tatara.pleme.io/process={namespace}/pr-1 did not parse as a receipt and were skipped "
                        "(evidence.skipped_receipts): job-a-receipt/notes.txt")]


async def test_nats_publishes_to_the_expanded_subject_and_stdout_prints(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, nats_server: NatsServer) -> None:
    await setup(kc, namespace)
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        stream = f"S{namespace.replace('-', '')}"
        await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        export = spec({"runMarker": {"labels": {}}},
                      {"natsSubject": {"subject": f"{stream}.{{{{run_id}}}}.done", "stream": stream,
                                       "url": nats_server.url}}, experimentIdOverride="run-7")
        run = await run_worker(control_plane.kubeconfig, kc, export, namespace, "--previous-root", "cd" * 32)
        assert run.returncode == 0, run.stderr
        message = await js.get_msg(stream, 1)
        assert message.subject == f"{stream}.run-7.done"
        assert json.loads(message.data)["signal_type"] == "done"
        evidence = run.verify(export, "shipped", message.data, previous="cd" * 32)
        assert evidence["run_id"] == "run-7"
    finally:
        await client.close()

    for pretty in (False, True):
        export = spec({"runMarker": {"labels": {}}}, {"stdout": {"pretty": pretty}})
        run = await run_worker(control_plane.kubeconfig, kc, export, namespace)
        assert run.returncode == 0, run.stderr
        printed = run.stdout
        assert printed.endswith("\n")
        assert (printed.count("\n") > 1) is pretty
        compact = json.dumps(json.loads(printed), separators=(",", ":"), ensure_ascii=False).encode()
        run.verify(export, "shipped", compact)


async def test_an_http_500_is_rejected_with_a_receipt_and_exit_1(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, receiver: HttpReceiver) -> None:
    await setup(kc, namespace)
    receiver.status = 500
    export = spec({"runMarker": {"labels": {}}}, http(receiver, "marker"))
    run = await run_worker(control_plane.kubeconfig, kc, export, namespace)
    assert run.returncode == 1
    message = "HTTP 500 Internal Server Error"
    evidence = run.verify(export, {"rejected": message}, receiver.requests[-1].body)
    assert (evidence["outcome"], evidence["error"]) == ("Rejected", message)
    assert ("Warning", "ExportRejected", f"export receipt pr-1-export-0-receipt: Rejected: {message}") in \
        await events_for(kc, namespace)


async def test_an_unreachable_nats_fails_with_a_receipt_and_exit_1(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str) -> None:
    await setup(kc, namespace)
    export = spec({"runMarker": {"labels": {}}},
                  {"natsSubject": {"subject": "a.b", "stream": "A", "url": f"nats://127.0.0.1:{free_port()}"}})
    run = await run_worker(control_plane.kubeconfig, kc, export, namespace)
    assert run.returncode == 1
    evidence = run.receipt["evidence"]
    assert evidence["outcome"] == "Failed"
    assert evidence["error"].startswith("NATS connect: ")
    receipt = run.receipt
    assert receipt["intent_hash"] == hexdigest(canonical(export))
    assert receipt["control_hash"] == hexdigest(canonical({"failed": evidence["error"]}))
    assert receipt["composed_root"] == hexdigest(f"tatara-process/v1alpha1\n{receipt['artifact_hash']}\n"
                                                 f"{receipt['control_hash']}\n{receipt['intent_hash']}\n")
    assert evidence["shipped_bytes_len"] == 0, "the event was built; it never left"


@pytest.mark.parametrize(("source", "error"), [
    ({"testReport": {"configmap": "results", "key": "missing.xml", "format": "Raw"}},
     'testReport: ConfigMap {ns}/results has no key "missing.xml"'),
    ({"testReport": {"configmap": "absent", "key": "r", "format": "Raw"}},
     "testReport: ConfigMap {ns}/absent not found"),
    ({}, "source: artifact source has no variant set (one of receipts/testReport/processSnapshot/runMarker required)"),
], ids=["a missing key", "a missing ConfigMap", "no source variant"])
async def test_an_unreadable_source_fails_with_a_receipt_and_a_warning_event(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, receiver: HttpReceiver,
        source: dict[str, Any], error: str) -> None:
    await setup(kc, namespace)
    export = spec(source, http(receiver, "report"))
    run = await run_worker(control_plane.kubeconfig, kc, export, namespace)
    assert run.returncode == 1
    want = error.format(ns=namespace)
    evidence = run.verify(export, {"failed": want}, b"")
    assert (evidence["outcome"], evidence["error"]) == ("Failed", want)
    assert receiver.requests == [], "nothing is shipped without an artifact"
    assert ("Warning", "ExportFailed", f"export receipt pr-1-export-0-receipt: Failed: {want}") in await events_for(
        kc, namespace)


async def test_a_channel_with_two_variants_fails_and_a_rerun_overwrites_the_receipt(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, receiver: HttpReceiver,
        tmp_path: Path) -> None:
    await setup(kc, namespace)
    export = spec({"runMarker": {"labels": {}}}, {**http(receiver, "x"), "stdout": {"pretty": False}})
    first = await run_worker(control_plane.kubeconfig, kc, export, namespace)
    assert first.returncode == 1
    want = "channel: vector channel has multiple variants set; exactly one required"
    assert first.receipt["evidence"]["error"] == want
    assert receiver.requests == []
    fixed = spec({"runMarker": {"labels": {}}}, http(receiver, "x"))
    second = await run_worker(control_plane.kubeconfig, kc, fixed, namespace)
    assert second.returncode == 0, second.stderr
    second.verify(fixed, "shipped", receiver.requests[-1].body)
    assert list(second.configmap["data"]) == ["receipt.yaml"]
    assert second.configmap["metadata"]["uid"] == first.configmap["metadata"]["uid"], "the same ConfigMap, rewritten"


async def test_a_worker_killed_mid_run_leaves_no_receipt_and_its_retry_ships_again_and_writes_it(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str, receiver: HttpReceiver) -> None:
    await setup(kc, namespace)
    receiver.hold = asyncio.Event()  # the sink takes the POST and never answers
    export = spec({"runMarker": {"labels": {}}}, http(receiver, "marker"))
    args, env = worker_command(control_plane.kubeconfig, export, namespace)
    async with await anyio.open_process(args, env=env, stdin=subprocess.DEVNULL) as proc:
        await wait_for(lambda: _arrived(receiver, 1), timeout=60, what="the first POST")
        proc.kill()
        assert await proc.wait() != 0
    assert await receipt_configmap(kc, namespace, "pr-1-export-0-receipt") == {}, "killed before the receipt"
    receiver.hold.set()
    receiver.hold = None
    retry = await run_worker(control_plane.kubeconfig, kc, export, namespace)
    assert retry.returncode == 0, retry.stderr
    assert len(receiver.requests) == 2, "at least once: the retry ships again"
    retry.verify(export, "shipped", receiver.requests[-1].body)


async def _arrived(receiver: HttpReceiver, count: int) -> bool:
    return len(receiver.requests) >= count
