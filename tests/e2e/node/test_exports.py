"""``examples/ephemeral-exports.yaml`` on the node: the reconciler in its pod creates the three export Jobs, the
real Job controller runs each as a pod under the export worker's own ServiceAccount (which the chart gave the
namespace), and from the node the pods ship the JUnit report to the HTTP receiver and the receipts to NATS
JetStream on the host, then write their receipts (docs/behaviour.md#the-export-worker)."""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import msgspec
import nats
import pytest
import yaml

from shared.domain.labels import ROLE, ROLE_EXPORT
from shared.domain.resources import JOBS, PROCESSES
from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.errors import NotFound
from tests.e2e.node.conftest import EXPORTS_NAMESPACE, ROOT, NodeEnv
from tests.e2e.node.support import PODS, flux_standin
from tests.support.kube import wait_for
from tools.controlplane.nodenet import NODE_NAME
from tools.http_receiver import HttpReceiver
from tools.nats_server import NatsServer
from tools.up_exports import ensure_streams, nats_streams, retarget_exports
from tools.up_node import node_sink_urls

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "ephemeral-exports.yaml"
WORKER_SERVICE_ACCOUNT = "tatara-export-worker"
"""The chart's ``config.exportWorkerServiceAccount`` default (charts/tatara-reconciler/values.yaml)."""
WORKER_FIELD_MANAGER = "tatara-export-worker"
"""The field manager tatara-export-worker applies its receipt with (docs/wire-format.md#export-receipts)."""


def documents(env: NodeEnv) -> list[dict[str, Any]]:
    """The example's objects, moved to the namespace the chart gave the worker's RBAC, its exports pointed at
    the sinks as pods see them (the node IP)."""
    assert env.nats.port is not None
    nats_url, receiver_url = node_sink_urls(env.nats.port, env.receiver_port)
    out = []
    for doc in yaml.safe_load_all(EXAMPLE.read_text()):
        doc["metadata"]["namespace"] = EXPORTS_NAMESPACE
        annotations = doc["metadata"].get("annotations") or {}
        if "tatara.pleme.io/process" in annotations:
            annotations["tatara.pleme.io/process"] = f"{EXPORTS_NAMESPACE}/release-train"
        out.append(retarget_exports(doc, nats_url, receiver_url) if doc["kind"] == "Process" else doc)
    return out


async def stream_payloads(server: NatsServer, stream: str) -> list[bytes]:
    client = await nats.connect(server.url, connect_timeout=5)
    try:
        js = client.jetstream()
        info = await js.stream_info(stream)
        return [(await js.get_msg(stream, seq)).data or b"" for seq in range(info.state.first_seq,
                                                                              info.state.last_seq + 1)]
    finally:
        await client.close()


async def test_the_export_jobs_run_as_pods_and_ship_from_the_node(node_env: NodeEnv, kc: KubeClient) -> None:
    docs = documents(node_env)
    process = next(d for d in docs if d["kind"] == "Process")
    await ensure_streams(node_env.nats.url, nats_streams([process]))
    async with HttpReceiver(port=node_env.receiver_port) as receiver, flux_standin(kc, EXPORTS_NAMESPACE):
        for doc in docs:
            resource = PROCESSES if doc["kind"] == "Process" else CONFIG_MAPS
            await kc.create(resource, doc, EXPORTS_NAMESPACE)

        pods: dict[str, dict[str, Any]] = {}
        succeeded_jobs: set[str] = set()
        receipts: dict[str, dict[str, Any]] = {}

        async def shipped() -> bool:
            # every version seen is kept: the Process is torn down (and its Jobs and pods with it) once done
            selector = f"{ROLE}={ROLE_EXPORT}"
            for pod in msgspec.json.decode(await kc.list(PODS, EXPORTS_NAMESPACE, label_selector=selector))["items"]:
                if pods.get(pod["metadata"]["name"], {}).get("status", {}).get("phase") != "Succeeded":
                    pods[pod["metadata"]["name"]] = pod
            for job in msgspec.json.decode(await kc.list(JOBS, EXPORTS_NAMESPACE, label_selector=selector))["items"]:
                if (job.get("status") or {}).get("succeeded") == 1:
                    succeeded_jobs.add(job["metadata"]["name"])
            for i in range(3):
                if str(i) not in receipts:
                    with contextlib.suppress(NotFound):
                        receipts[str(i)] = msgspec.json.decode(
                            await kc.get(CONFIG_MAPS, f"release-train-export-{i}-receipt", EXPORTS_NAMESPACE))
            done = [p for p in pods.values() if p["status"].get("phase") == "Succeeded"]
            return len(receipts) == 3 and len(succeeded_jobs) == 3 and len(done) == 3

        await wait_for(shipped, timeout=180, interval=0.2, what="three succeeded export pods and their receipts")
        (request,) = receiver.requests
    # every Job ran one pod on the node under the worker's ServiceAccount, and it succeeded
    expected_jobs = [f"release-train-export-{i}" for i in range(3)]
    assert sorted(succeeded_jobs) == expected_jobs
    assert sorted(p["metadata"]["labels"]["job-name"] for p in pods.values()) == expected_jobs
    for pod in pods.values():
        assert pod["spec"]["serviceAccountName"] == WORKER_SERVICE_ACCOUNT
        assert pod["spec"]["nodeName"] == NODE_NAME
        assert pod["status"]["phase"] == "Succeeded"
    # the receipts, written by the worker (its field manager), each Shipped
    for i, receipt in receipts.items():
        managers = {m["manager"] for m in receipt["metadata"].get("managedFields") or []}
        assert managers == {WORKER_FIELD_MANAGER}, (i, managers)
        envelope = yaml.safe_load(receipt["data"]["receipt.yaml"])
        assert envelope["evidence"]["outcome"] == "Shipped", (i, envelope)
    # what reached the sinks on the host, from the pods on the node
    assert request.method == "POST"
    assert request.path == "/events"
    assert request.header("X-Tatara-Signal-Type") == "test-report"
    event = json.loads(request.body)
    report = next(d for d in docs if d["metadata"]["name"] == "release-train-report")["data"]["junit.xml"]
    assert base64.b64decode(event["payload"]["raw_b64"]).decode() == report
    (payload,) = await stream_payloads(node_env.nats, "TATARA_RECEIPTS")
    smoke = next(d for d in docs if d["metadata"]["name"] == "release-train-smoke-receipt")
    composed_root = yaml.safe_load(smoke["data"]["receipt.yaml"])["composed_root"]
    assert composed_root.encode() in payload, payload[:400]
