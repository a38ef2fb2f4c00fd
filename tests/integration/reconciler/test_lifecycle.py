"""A flux-intent Process walks Pending → … → Attested with the reconciler running, then is deleted cleanly."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import KubeClient
from shared.kube.errors import NotFound
from tests.integration.reconciler.conftest import reconciler_running
from tests.support.kube import wait_for
from tools.standins.flux import KUSTOMIZATIONS

pytestmark = pytest.mark.anyio


def flux_process(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Observability", "horizon": {"kind": "Bounded"},
                               "calm": "Monotone", "dataClassification": "Internal"},
            "intent": {"flux": {"gitRepository": "infra", "path": "./apps/demo"}},
        },
    }


async def read(kc: KubeClient, resource: Any, name: str, ns: str | None) -> dict[str, Any]:
    result: dict[str, Any] = msgspec.json.decode(await kc.get(resource, name, ns))
    return result


async def phase_of(kc: KubeClient, ns: str, name: str) -> str | None:
    phase = (await read(kc, PROCESSES, name, ns)).get("status", {}).get("phase")
    return phase if isinstance(phase, str) else None


async def test_a_flux_process_reaches_attested_and_is_deleted_cleanly(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_process("demo"), namespace)

        async def attested() -> bool:
            return await phase_of(kc, namespace, "demo") == "Attested"

        await wait_for(attested, timeout=60, what="demo to reach Attested")
        process = await read(kc, PROCESSES, "demo", namespace)
        status = process["status"]
        assert fin.PROCESS in process["metadata"]["finalizers"]
        assert status["pid"].endswith(tuple(f".{n}" for n in range(1, 10_000)))
        assert len(status["identity"]["content_hash"]) == 26
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        assert status["attestation"]["generation"] == 0  # attested once: the first generation

        kustomization = await read(kc, KUSTOMIZATIONS, "demo", namespace)
        (owner,) = kustomization["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "Process", "demo", process["metadata"]["uid"], True)
        annotations = kustomization["metadata"]["annotations"]
        assert annotations[ann.MANAGED_BY] == "tatara-reconciler"
        assert annotations[ann.PROCESS] == f"{namespace}/demo"
        assert annotations[ann.PID] == status["pid"]
        assert kustomization["spec"]["path"] == "./apps/demo"

        async def table_counts_it() -> bool:
            table = await read(kc, PROCESS_TABLES, "proc", None)
            rows = table.get("status", {}).get("processes", [])
            return any(r.get("name") == "demo" and r.get("namespace") == namespace for r in rows)

        await wait_for(table_counts_it, timeout=30, what="the ProcessTable row for demo")

        await kc.delete(PROCESSES, "demo", namespace)

        async def gone() -> bool:
            try:
                await kc.get(PROCESSES, "demo", namespace)
            except NotFound:
                return True
            return False

        await wait_for(gone, timeout=60, what="demo to be reaped and deleted")

        async def child_gone() -> bool:
            try:
                await kc.get(KUSTOMIZATIONS, "demo", namespace)
            except NotFound:
                return True
            return False

        await wait_for(child_gone, timeout=30, what="the Kustomization to be torn down")
