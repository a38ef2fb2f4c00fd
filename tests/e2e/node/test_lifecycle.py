"""The release's life on the node: ``helm upgrade`` with a changed value and ``kubectl rollout restart`` replace
the controller's pods, and the new leader re-reads every Process without writing any of their children
(counted from a watch on the children, opened before and closed after); ``helm uninstall`` leaves the CRDs and
the custom objects (docs/architecture.md#helm-uninstall)."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from shared.domain.resources import KUSTOMIZATIONS, PROCESSES
from shared.kube.client import KubeClient
from tests.e2e.node.conftest import NodeEnv
from tests.e2e.node.support import HEALTH_PORTS, chart_pods, flux_standin, holder_pod, lease, pod_metrics, total
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tools.node_stack import POOL_RECONCILER, RECONCILER, RELEASE_NAMESPACE

pytestmark = pytest.mark.anyio

NAMES = [f"u{i}" for i in range(3)]


async def attested(kc: KubeClient, ns: str, names: list[str]) -> dict[str, Any] | None:
    items = msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]
    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in items}
    return phases if all(phases.get(n) == "Attested" for n in names) else None


async def new_leader_has_reconciled(kc: KubeClient, old_pods: set[str]) -> str:
    """Wait until the reconciler's Lease is held by a pod not in ``old_pods`` whose Process controller has
    finished as many reconciles as there are Processes in the cluster, or more (a new leader reconciles every
    Process it lists once); return that pod."""
    count = len(msgspec.json.decode(await kc.list(PROCESSES))["items"])

    async def probe() -> str | None:
        holder = holder_pod(await lease(kc, RECONCILER))
        current = {p["metadata"]["name"] for p in await chart_pods(kc, RECONCILER)}
        if not holder or holder in old_pods or holder not in current:
            return None
        samples = await pod_metrics(kc, holder, HEALTH_PORTS[RECONCILER])
        done = total(samples, "controller_runtime_reconcile_total", controller="process")
        return holder if done >= count else None
    return await wait_for(probe, timeout=180, interval=0.5, what="a new leader that reconciled every Process")


async def test_upgrade_and_rollout_restart_rewrite_no_child(node_env: NodeEnv, kc: KubeClient, node_ns: str) -> None:
    async with flux_standin(kc, node_ns):
        for name in NAMES:
            await kc.create(PROCESSES, flux_process(name), node_ns)
        await wait_for(lambda: attested(kc, node_ns, NAMES), timeout=120, what="the Processes Attested")
    # the stand-in has stopped: from here on only a controller could write a child
    listed = msgspec.json.decode(await kc.list(KUSTOMIZATIONS, node_ns))
    before = {k["metadata"]["name"]: k["metadata"]["resourceVersion"] for k in listed["items"]}
    assert sorted(before) == NAMES
    events: list[tuple[str, str]] = []

    async def watch_children() -> None:
        async for event in kc.watch(KUSTOMIZATIONS, node_ns, resource_version=listed["metadata"]["resourceVersion"],
                                    timeout_seconds=900, inactivity_timeout=900):
            if event.type != "BOOKMARK":
                events.append((event.type, msgspec.json.decode(event.object)["metadata"]["name"]))

    changed = node_env.values(RECONCILER)
    changed["logLevel"] = "debug"
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_children)
            # 1. helm upgrade with a changed value: a new ReplicaSet, rolled out one pod at a time
            old = {p["metadata"]["name"] for p in await chart_pods(kc, RECONCILER)}
            await anyio.to_thread.run_sync(lambda: node_env.stack.install(RECONCILER, changed, upgrade=True))
            upgraded = await new_leader_has_reconciled(kc, old)
            # 2. kubectl rollout restart: the pods replaced again, with the same spec
            old = {p["metadata"]["name"] for p in await chart_pods(kc, RECONCILER)}
            assert upgraded in old
            await anyio.to_thread.run_sync(lambda: node_env.kubectl(
                "rollout", "restart", f"deployment/{RECONCILER}", "-n", RELEASE_NAMESPACE))
            await anyio.to_thread.run_sync(lambda: node_env.kubectl(
                "rollout", "status", f"deployment/{RECONCILER}", "-n", RELEASE_NAMESPACE, "--timeout=180s"))
            await new_leader_has_reconciled(kc, old)
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(lambda: node_env.stack.install(
            RECONCILER, node_env.values(RECONCILER), upgrade=True))
    after = {k["metadata"]["name"]: k["metadata"]["resourceVersion"]
             for k in msgspec.json.decode(await kc.list(KUSTOMIZATIONS, node_ns))["items"]}
    assert events == [], f"children written across the upgrade and the restart: {events}"
    assert after == before


async def test_uninstall_keeps_crds_and_objects_and_a_reinstall_finishes_a_deletion(
        node_env: NodeEnv, kc: KubeClient, node_ns: str) -> None:
    async with flux_standin(kc, node_ns):
        await kc.create(PROCESSES, flux_process("kept"), node_ns)
        await wait_for(lambda: attested(kc, node_ns, ["kept"]), timeout=120, what="the Process Attested")
    try:
        for chart in (RECONCILER, POOL_RECONCILER):
            await anyio.to_thread.run_sync(lambda c=chart: node_env.stack.helm(
                "uninstall", c, "-n", RELEASE_NAMESPACE, "--wait", "--timeout", "120s"))
        assert await chart_pods(kc, RECONCILER) == []
        # helm never deletes what a chart's crds/ installed, and the objects stay with them
        crds = node_env.kubectl("get", "crd", "-o", "name").split()
        assert {"customresourcedefinition.apiextensions.k8s.io/processes.tatara.pleme.io",
                "customresourcedefinition.apiextensions.k8s.io/ephemeralpools.tatara.pleme.io"} <= set(crds)
        kept = msgspec.json.decode(await kc.get(PROCESSES, "kept", node_ns))
        finalizers = kept["metadata"].get("finalizers") or []
        assert finalizers, "an Attested Process carries the reconciler's finalizer"
        # with no controller, a deletion waits on the finalizer (the object stays, Terminating)
        await kc.delete(PROCESSES, "kept", node_ns)
        terminating = msgspec.json.decode(await kc.get(PROCESSES, "kept", node_ns))
        assert terminating["metadata"].get("deletionTimestamp")
        assert terminating["metadata"]["finalizers"] == finalizers
    finally:
        for chart in (RECONCILER, POOL_RECONCILER):
            await anyio.to_thread.run_sync(lambda c=chart: node_env.stack.install(c, node_env.values(c)))

    async def gone() -> bool:
        return not any(p["metadata"]["name"] == "kept"
                       for p in msgspec.json.decode(await kc.list(PROCESSES, node_ns))["items"])
    await wait_for(gone, timeout=120, what="the reinstalled reconciler to finish the deletion")
