"""Reconciler behaviour against the real API server: PIDs under concurrency, dependsOn, signals, no hot loop."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from reconciler.controller import ChildObject
from shared.domain import annotations as ann
from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient
from shared.kube.metrics import registry as runtime_registry
from tests.integration.reconciler.conftest import reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, phase_of, read
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.standins.flux import KUSTOMIZATIONS

pytestmark = pytest.mark.anyio


async def phases(kc: KubeClient, ns: str, names: list[str]) -> dict[str, str | None]:
    return {n: await phase_of(kc, ns, n) for n in names}


async def test_twenty_processes_created_at_once_get_twenty_distinct_pids(kc: KubeClient, namespace: str) -> None:
    names = [f"p{i}" for i in range(20)]
    async with reconciler_running(kc, namespace):
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(kc.create, PROCESSES, flux_process(name), namespace)

        async def all_have_pids() -> dict[str, str] | None:
            pids = {n: (await read(kc, PROCESSES, n, namespace)).get("status", {}).get("pid") for n in names}
            return pids if all(pids.values()) else None  # type: ignore[return-value]

        pids = await wait_for(all_have_pids, timeout=90, what="20 PIDs")
    assert len(set(pids.values())) == 20


async def test_a_dependent_waits_until_its_dependency_is_attested(kc: KubeClient, namespace: str) -> None:
    dependent = flux_process("app")
    dependent["spec"]["dependsOn"] = [{"name": "db", "mustReach": "Attested"}]
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, dependent, namespace)

        async def waiting() -> bool:
            process = await read(kc, PROCESSES, "app", namespace)
            message = process.get("status", {}).get("message") or ""
            return process.get("status", {}).get("phase") == "Forking" and "db" in message

        await wait_for(waiting, timeout=30, what="app to wait in Forking naming db")
        await kc.create(PROCESSES, flux_process("db"), namespace)

        async def both_attested() -> bool:
            return await phases(kc, namespace, ["db", "app"]) == {"db": "Attested", "app": "Attested"}

        await wait_for(both_attested, timeout=60, what="db then app to reach Attested")


async def test_a_garbage_signal_is_rejected_with_a_warning_event_and_cleared(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_process("sig"), namespace)
        await wait_for(lambda: _eq(phase_of(kc, namespace, "sig"), "Attested"), timeout=60, what="Attested")
        await kc.merge_patch(PROCESSES, "sig", {"metadata": {"annotations": {ann.SIGNAL: "SIGBOGUS"}}}, namespace)

        async def cleared_with_event() -> bool:
            process = await read(kc, PROCESSES, "sig", namespace)
            if ann.SIGNAL in (process["metadata"].get("annotations") or {}):
                return False
            events = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
            return any(e["reason"] == "InvalidSignal" and e["type"] == "Warning"
                       and e["involvedObject"]["name"] == "sig" for e in events)

        await wait_for(cleared_with_event, timeout=30, what="the signal cleared with an InvalidSignal event")
        assert await phase_of(kc, namespace, "sig") == "Attested"


async def test_sighup_on_an_attested_process_attests_the_next_generation(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_process("hup"), namespace)
        await wait_for(lambda: _eq(phase_of(kc, namespace, "hup"), "Attested"), timeout=60, what="Attested")
        first = (await read(kc, PROCESSES, "hup", namespace))["status"]["attestation"]
        await kc.merge_patch(PROCESSES, "hup", {"metadata": {"annotations": {ann.SIGNAL: "SIGHUP"}}}, namespace)

        async def next_generation() -> dict[str, Any] | None:
            status = (await read(kc, PROCESSES, "hup", namespace))["status"]
            att = status.get("attestation") or {}
            done = status.get("phase") == "Attested" and att.get("generation") == first["generation"] + 1
            return att if done else None

        second = await wait_for(next_generation, timeout=60, what="generation + 1 attested")
    assert second["previousRoot"] == first["composedRoot"]


async def test_no_writes_while_waiting_on_a_child_that_is_not_ready(
    control_plane: LocalControlPlane, crds_installed: None, namespace: str
) -> None:
    """Without the Flux stand-in the Kustomization never becomes Ready: the Process must sit in Running
    without writing, even when reconciles are triggered (here: by touching the child)."""
    writes: Counter[str] = Counter()
    reconciler_client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    probe = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    reconciler_client.on_response.append(
        lambda method, code, host: writes.update([method]) if method not in ("GET", "WATCH") else None)
    config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                              health_port=0, table_status_interval=3600)
    manager = build(reconciler_client, config, registry=CollectorRegistry(), handle_signals=False)
    children = manager.informer(KUSTOMIZATIONS, ChildObject, namespace=namespace)  # the manager's own informer

    async def idle() -> bool:
        return manager.idle()

    async def touches_seen() -> bool:
        child = children.get(f"{namespace}/waits")
        return child is not None and child.metadata.labels.get("touch") == "4"

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.run)
            await probe.create(PROCESSES, flux_process("waits"), namespace)
            await wait_for(lambda: _eq(phase_of(probe, namespace, "waits"), "Running"), timeout=60, what="Running")

            async def child_seen() -> bool:  # its first sight is written once ("not yet observed")
                status = (await read(probe, PROCESSES, "waits", namespace)).get("status") or {}
                refs = status.get("fluxResources") or []
                return bool(refs) and refs[0].get("message") == "not yet observed"

            async def transitions_recorded() -> bool:  # Events are written in the background
                events = msgspec.json.decode(await probe.list(EVENTS, namespace))["items"]
                reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "waits"}
                return {"PhaseForking", "PhaseExecing", "PhaseRunning"} <= reasons
            await wait_for(child_seen, timeout=30, what="the Kustomization's first sight written")
            await wait_for(transitions_recorded, timeout=30, what="the three transitions' Events")
            await wait_for(idle, timeout=30, what="the queue to settle")
            before = sum(writes.values())
            for i in range(5):  # each label change on the child requeues its owner
                await probe.merge_patch(KUSTOMIZATIONS, "waits", {"metadata": {"labels": {"touch": str(i)}}},
                                        namespace)
            await wait_for(touches_seen, timeout=30, what="the touches to reach the cache")
            await wait_for(idle, timeout=30, what="the queue to settle again")
            assert sum(writes.values()) == before, writes
            manager.stop()
            tg.cancel_scope.cancel()
    finally:
        await reconciler_client.close()
        await probe.close()


async def _eq(awaitable: Any, expected: Any) -> bool:
    return bool(await awaitable == expected)


async def test_the_workers_setting_reaches_the_process_controller(kc: KubeClient, namespace: str) -> None:
    build(kc, ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                               health_port=0, workers=3), registry=CollectorRegistry(), handle_signals=False)
    # controller-runtime's gauge of MaxConcurrentReconciles, as /metrics shows it (the runtime's registry)
    assert runtime_registry.get_sample_value("controller_runtime_max_concurrent_reconciles",
                                             {"controller": "process"}) == 3
