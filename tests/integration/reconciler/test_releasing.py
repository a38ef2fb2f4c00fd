"""Releasing with export Jobs against the real API server, the real reconciler wiring and a Flux stand-in
(docs/behaviour.md#releasing). No Job controller runs here: the tests finish Jobs themselves
(tests/support/jobs.py), as the Job controller of Kubernetes 1.36 would.

HEARTBEAT is far beyond every wait, so each step the Process takes after a Job changes was woken by the
Job watch, not by a timer."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.support.jobs import finish_job
from tests.support.kube import wait_for
from tools.controlplane.cluster import LocalControlPlane

pytestmark = pytest.mark.anyio

JOBS = Resource("batch", "v1", "jobs", "Job")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
IMAGE, SERVICE_ACCOUNT = "registry.local/tatara-export-worker:test", "exporter"
MARKER = {"source": {"runMarker": {"labels": {"pr": "7"}}}, "channel": {"stdout": {}}}
REPORT = {"source": {"testReport": {"configmap": "results", "key": "junit.xml"}},
          "channel": {"httpEvent": {"endpoint": "http://127.0.0.1:9/ingest", "signalType": "test.report"}}}
ON_FAILED = {"source": {"receipts": {}}, "channel": {"stdout": {}}, "when": "OnFailed"}


def ephemeral(name: str, exports: list[dict[str, Any]]) -> dict[str, Any]:
    """A flux Process that attests, then is torn down at once (teardownPolicy Always) through Releasing."""
    process = flux_process(name)
    process["spec"]["lifetime"] = {"ephemeral": {"ttl": "1h", "teardownPolicy": "Always", "maxConcurrent": 0,
                                                 "exports": exports}}
    return process


async def job_of(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        job: dict[str, Any] = msgspec.json.decode(await kc.get(JOBS, name, ns))
    except NotFound:
        return None
    return job


async def gone(kc: KubeClient, resource: Resource, name: str, ns: str) -> bool:
    try:
        await kc.get(resource, name, ns)
    except NotFound:
        return True
    return False


async def events_of(kc: KubeClient, ns: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == "Process"]


def receipt_config_map(name: str, evidence: dict[str, Any]) -> dict[str, Any]:
    """A receipt ConfigMap as the export worker writes it (a JSON document is valid YAML)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    envelope = {"version": "tatara-receipt/v1", "kind": "tatara.export", "composed_root": "c" * 64,
                "intent_hash": "i" * 64, "artifact_hash": "a" * 64, "control_hash": "k" * 64,
                "generated_at": now, "evidence": evidence}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"receipt.yaml": json.dumps(envelope)}}


async def test_exports_run_as_jobs_and_a_failed_one_does_not_block(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, export_worker_image=IMAGE,
                                  export_worker_service_account=SERVICE_ACCOUNT):
        await kc.create(PROCESSES, ephemeral("pr", [MARKER, ON_FAILED, REPORT]), namespace)
        first = await wait_for(lambda: job_of(kc, namespace, "pr-export-0"), timeout=60, what="export Job 0")
        second = await wait_for(lambda: job_of(kc, namespace, "pr-export-2"), timeout=30, what="export Job 2")
        assert await job_of(kc, namespace, "pr-export-1") is None  # OnFailed does not fire on Attested
        process = await read(kc, PROCESSES, "pr", namespace)
        assert process["status"]["phase"] == "Releasing"

        # The Job, field by field (lifetime-pool-allocation §5.6, process-reconciler §10.5).
        labels = {"tatara.pleme.io/process": f"{namespace}.pr", "tatara.pleme.io/role": "export",
                  "tatara.pleme.io/export-index": "2"}
        meta = second["metadata"]
        assert {k: meta["labels"][k] for k in (*labels, "tatara.pleme.io/managed-by")} == {
            **labels, "tatara.pleme.io/managed-by": "tatara-reconciler"}
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
            "Process", "pr", process["metadata"]["uid"], True, True)
        spec = second["spec"]
        assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"]) == (1, 3600)
        assert {k: spec["template"]["metadata"]["labels"][k] for k in labels} == labels
        pod = spec["template"]["spec"]
        assert (pod["restartPolicy"], pod["serviceAccountName"]) == ("Never", SERVICE_ACCOUNT)
        (container,) = pod["containers"]
        assert (container["name"], container["image"]) == ("worker", IMAGE)
        assert container["args"] == [
            "--spec", '{"source":{"testReport":{"configmap":"results","key":"junit.xml","format":"Raw"}},'
                      '"channel":{"httpEvent":{"endpoint":"http://127.0.0.1:9/ingest","signalType":"test.report"}},'
                      '"when":"OnAttested"}',
            "--process-namespace", namespace, "--process-name", "pr",
            "--receipt-configmap", "pr-export-2-receipt",
            "--previous-root", process["status"]["attestation"]["composedRoot"],
            # docs/wire-format.md#export-idempotency-keys: uid, generation, export index
            "--idempotency-key", f"tatara-export/{process['metadata']['uid']}/{process['metadata']['generation']}/2",
        ]
        assert first["spec"]["template"]["spec"]["containers"][0]["args"][1] == (
            '{"source":{"runMarker":{"labels":{"pr":"7"}}},"channel":{"stdout":{"pretty":false}},"when":"OnAttested"}')

        # Export 2 fails with a receipt saying why; export 0 succeeds. Neither blocks the other.
        await kc.create(CONFIG_MAPS, receipt_config_map("pr-export-2-receipt", {
            "error": "HTTP 503", "outcome": "Rejected", "run_id": f"{namespace}/pr", "shipped_bytes_len": 120}),
            namespace)
        await finish_job(kc, namespace, "pr-export-2", succeeded=False)

        async def still_waiting() -> bool:
            status = (await read(kc, PROCESSES, "pr", namespace))["status"]
            return bool(status["message"] == "releasing — waiting for 1 export Job(s) (succeeded=0, failed=1)")

        await wait_for(still_waiting, timeout=30, what="Releasing to count the failed export and wait on the other")
        await finish_job(kc, namespace, "pr-export-0", succeeded=True)
        await wait_for(lambda: gone(kc, PROCESSES, "pr", namespace), timeout=60,
                       what="pr to leave Releasing, then be reaped and deleted")

        events = await events_of(kc, namespace, "pr")
        exiting = [e["message"] for e in events if e["reason"] == "PhaseExiting"]
        assert exiting == ["releasing → Exiting — exports complete (succeeded=1, failed=1)"]
        failed = [e["message"] for e in events if e["reason"] == "ExportFailed"]
        assert failed == ["export 2 (Job pr-export-2) failed: HTTP 503"]
        assert all(e["type"] == "Warning" for e in events if e["reason"] == "ExportFailed")


async def test_a_job_deleted_before_it_finished_is_started_again(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        await kc.create(PROCESSES, ephemeral("lost", [MARKER]), namespace)
        job = await wait_for(lambda: job_of(kc, namespace, "lost-export-0"), timeout=60, what="the export Job")

        async def running() -> bool:
            status = (await read(kc, PROCESSES, "lost", namespace))["status"]
            return bool(status["message"] == "releasing — waiting for 1 export Job(s) (succeeded=0, failed=0)")

        await wait_for(running, timeout=30, what="Releasing to record that it started the Job")
        await kc.delete(JOBS, "lost-export-0", namespace, propagation_policy="Background")

        async def recreated() -> dict[str, Any] | None:
            again = await job_of(kc, namespace, "lost-export-0")
            return again if again is not None and again["metadata"]["uid"] != job["metadata"]["uid"] else None

        await wait_for(recreated, timeout=30, what="the deleted Job to be applied again")
        process = await read(kc, PROCESSES, "lost", namespace)
        assert process["status"]["phase"] == "Releasing"
        ready = next(c for c in process["status"]["conditions"] if c["type"] == "Ready")
        assert ready["reason"] in ("ExportJobLost", "ExportsRunning")
        lost = [e for e in await events_of(kc, namespace, "lost") if e["reason"] == "ExportJobLost"]
        assert [e["type"] for e in lost][:1] == ["Warning"]
        assert lost[0]["message"] == "export 0: Job lost-export-0 was deleted before it finished; starting it again"

        await finish_job(kc, namespace, "lost-export-0", succeeded=True)
        await wait_for(lambda: gone(kc, PROCESSES, "lost", namespace), timeout=60, what="lost to finish Releasing")
        exiting = [e["message"] for e in await events_of(kc, namespace, "lost") if e["reason"] == "PhaseExiting"]
        assert exiting == ["releasing → Exiting — exports complete (succeeded=1, failed=0)"]


async def test_a_long_named_process_s_export_job_is_created_and_writes_its_receipt(
        kc: KubeClient, namespace: str, control_plane: LocalControlPlane) -> None:
    """A 56-character name: ``<name>-export-0`` would be 65 characters. The Job gets the cut name
    (computed here from docs/wire-format.md#export-job-names), the real worker run with the Job's own
    container arguments writes the receipt it names, and the export counts as shipped."""
    name = "preview-" + "p" * 48
    job_name = f"{name[:45]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}-export-0"
    assert len(name) == 56
    assert len(job_name) == 63
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, export_worker_image=IMAGE):
        await kc.create(PROCESSES, ephemeral(name, [MARKER]), namespace)
        job = await wait_for(lambda: job_of(kc, namespace, job_name), timeout=60, what="the cut-name export Job")
        (container,) = job["spec"]["template"]["spec"]["containers"]
        args = container["args"]
        receipt = args[args.index("--receipt-configmap") + 1]
        assert receipt == f"{job_name}-receipt"

        env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig), "PYTHONUNBUFFERED": "1"}
        with anyio.fail_after(120):
            run = await anyio.run_process([sys.executable, "-m", "export_worker.main", *args], env=env, check=False)
        assert run.returncode == 0, run.stderr.decode()
        written = msgspec.json.decode(await kc.get(CONFIG_MAPS, receipt, namespace))
        assert written["metadata"]["annotations"]["tatara.pleme.io/process"] == f"{namespace}/{name}"

        await finish_job(kc, namespace, job_name, succeeded=True)
        await wait_for(lambda: gone(kc, PROCESSES, name, namespace), timeout=60, what="the Process to finish Releasing")
        exiting = [e["message"] for e in await events_of(kc, namespace, name) if e["reason"] == "PhaseExiting"]
        assert exiting == ["releasing → Exiting — exports complete (succeeded=1, failed=0)"]
