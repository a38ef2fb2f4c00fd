"""kstatus and ``kubectl wait`` agree on every phase of every kind we own (issue 13; docs/behaviour.md#conditions).

Both reconcilers and a Flux stand-in run against the real API server while every kind is driven through
its phases: Processes to Attested, through a spec change (Reconverging), to Failed (a child stalled), a
wait on a missing dependency, a stall on a self-dependency, SIGKILL (Reaped kept), deletion (Exiting,
Zombie, Reaped) and a phase edited by hand; a pool from empty to Steady and Draining; a pool capped by
``maxSize`` below its target (Stalled ``MaxSizeReached``, so Failed, issue 28); allocations
Queued, NoMatchingPool, Bound, Releasing, Released and Failed (member deleted by hand); the ProcessTable
throughout. A watch records every version of every object.

Each recorded version is then judged twice:

1. by kstatus (``sigs.k8s.io/cli-utils`` v0.37.2 ``pkg/kstatus/status``, the pinned Go judge of
   :mod:`tools.controlplane.kstatus`), against the verdict the phase tables of docs/behaviour.md give;
2. as a *mirror*: a copy of the object with that status, created in a namespace no reconciler watches,
   so it holds still; ``kubectl wait --for=condition=Ready --timeout=0s`` (check once) must succeed
   exactly when kstatus calls the mirror Current. Mirrors are made for one version per distinct
   (kind, phase, conditions, generation observed or not).

The ``kubectl`` on PATH is used (the control-plane build does not make one); without it the second
check is skipped with a message and kstatus judges alone.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared.domain import annotations as ann
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESS_TABLES, PROCESSES
from shared.kube.client import NAMESPACES, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, members, pool_doc
from tests.integration.pool_reconciler.test_pool_scenarios import capped_pool
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.controlplane.kstatus import KstatusJudge
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio

TIMEOUT = 90.0
KINDS = {r.kind: r for r in (PROCESSES, EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS, PROCESS_TABLES)}


def owned_by(obj: dict[str, Any], name: str) -> bool:
    return any(ref.get("name") == name for ref in obj["metadata"].get("ownerReferences", []))


def doomed_verdict(resource: Resource, obj: dict[str, Any]) -> str | None:
    """The Flux stand-in fails the children of Process ``doomed`` terminally (Flux's RetriesExceeded)."""
    return "RetriesExceeded" if owned_by(obj, "doomed") else None


class Recorder:
    """Every version of every object of ``KINDS`` in ``namespace`` (and the ProcessTables), from watches."""

    def __init__(self, kc: KubeClient, namespace: str) -> None:
        self.kc, self.namespace = kc, namespace
        self.versions: dict[tuple[str, str, str], dict[str, Any]] = {}

    async def watch(self, resource: Resource) -> None:
        ns = self.namespace if resource.namespaced else None
        listed = msgspec.json.decode(await self.kc.list(resource, ns))
        for item in listed["items"]:
            self.keep({**item, "kind": resource.kind, "apiVersion": resource.api_version})
        async for event in self.kc.watch(resource, ns, resource_version=listed["metadata"]["resourceVersion"],
                                         timeout_seconds=600, inactivity_timeout=120):
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                self.keep(msgspec.json.decode(event.object))

    def keep(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.versions[(obj["kind"], meta["name"], meta["resourceVersion"])] = obj

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Recorder]:
        async with anyio.create_task_group() as tg:
            for resource in KINDS.values():
                tg.start_soon(self.watch, resource)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()


@asynccontextmanager
async def reconcilers(kc: KubeClient, namespace: str) -> AsyncIterator[None]:
    process = build_process(kc, ReconcilerConfig(watch_namespace=namespace, leader_elect=False,
                                                 health_host="127.0.0.1", health_port=0, table_status_interval=0.2),
                            registry=CollectorRegistry(), handle_signals=False)
    pool = build_pool(kc, PoolReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                                               health_port=0), registry=CollectorRegistry(), handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(process.run)
        tg.start_soon(pool.run)
        tg.start_soon(FluxStandIn(kc, namespace=namespace, verdict=doomed_verdict).run)
        try:
            yield
        finally:
            pool.stop()
            process.stop()
            tg.cancel_scope.cancel()


async def get(kc: KubeClient, resource: Resource, name: str, ns: str | None) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = msgspec.json.decode(await kc.get(resource, name, ns))
    except NotFound:
        return None
    return found


async def reach(kc: KubeClient, resource: Resource, ns: str, name: str, phase: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await get(kc, resource, name, ns)
        return obj if obj is not None and obj.get("status", {}).get("phase") == phase else None

    return await wait_for(probe, timeout=TIMEOUT, what=f"{resource.kind} {name} {phase}")


async def disappear(kc: KubeClient, resource: Resource, ns: str, name: str) -> None:
    async def probe() -> bool:
        return await get(kc, resource, name, ns) is None

    await wait_for(probe, timeout=TIMEOUT, what=f"{resource.kind} {name} gone")


async def drive(kc: KubeClient, ns: str) -> None:
    """Every kind through its phases (see the module docstring)."""
    for name in ("web", "doomed", "killed", "gone", "hand"):
        await kc.create(PROCESSES, flux_process(name), ns)
    waiting = flux_process("waiting")
    waiting["spec"]["dependsOn"] = [{"name": "absent", "mustReach": "Attested"}]
    await kc.create(PROCESSES, waiting, ns)
    selfish = flux_process("selfish")  # a self-dependency: Stalled in Forking, kstatus Failed
    selfish["spec"]["dependsOn"] = [{"name": "selfish", "mustReach": "Attested"}]
    await kc.create(PROCESSES, selfish, ns)
    # a precondition never met: it waits in Execing (a new Process only passes through Execing otherwise,
    # its first pass folded into one write: docs/behaviour.md#folded-phases)
    gated = flux_process("gated")
    gated["spec"]["boundary"] = {"preconditions": [{"kind": "ProcessPhase",
                                                    "params": {"processRef": "absent", "phase": "Attested"}}]}
    await kc.create(PROCESSES, gated, ns)
    typed = flux_process("typed")  # a CEL postcondition that returns a string: Stalled CelTypeError, kstatus Failed
    typed["spec"]["boundary"] = {"postconditions": [{"kind": "Cel", "params": {"expression": "'ready'"}}]}
    await kc.create(PROCESSES, typed, ns)
    await kc.create(EPHEMERAL_POOLS, pool_doc("pool", 1), ns)
    await kc.create(EPHEMERAL_POOLS, capped_pool("capped", 1, 1), ns)  # its one member will be allocated
    for name in ("web", "killed", "gone", "hand"):
        await reach(kc, PROCESSES, ns, name, "Attested")
    await reach(kc, PROCESSES, ns, "doomed", "Failed")
    await reach(kc, PROCESSES, ns, "gated", "Execing")

    web = await get(kc, PROCESSES, "web", ns)
    assert web is not None
    await kc.merge_patch(PROCESSES, "web", {"spec": {"intent": {"flux": {"path": "./apps/other"}}}}, ns)

    after: int = web["metadata"]["generation"] + 1

    async def reattested() -> bool:
        now = await get(kc, PROCESSES, "web", ns)
        status: dict[str, Any] = (now or {}).get("status", {})
        return status.get("phase") == "Attested" and status.get("observedGeneration") == after

    await wait_for(reattested, timeout=TIMEOUT, what="web Attested at its new generation")
    await kc.merge_patch(PROCESSES, "killed", {"metadata": {"annotations": {ann.SIGNAL: "SIGKILL"}}}, ns)
    await reach(kc, PROCESSES, ns, "killed", "Reaped")
    await kc.delete(PROCESSES, "gone", ns)
    await disappear(kc, PROCESSES, ns, "gone")
    await kc.merge_patch(PROCESSES, "hand", {"status": {"phase": "Failed"}}, ns, subresource="status")

    async def rewritten() -> bool:
        now = await get(kc, PROCESSES, "hand", ns)
        conds = {c["type"]: c["status"] for c in (now or {}).get("status", {}).get("conditions", [])}
        return conds == {"Ready": "False", "Reconciling": "False", "Stalled": "True"}

    await wait_for(rewritten, timeout=TIMEOUT, what="hand's conditions rewritten for Failed")

    async def stalled() -> bool:
        now = await get(kc, PROCESSES, "selfish", ns)
        return ("Stalled", "True") in truths(now or {})

    await wait_for(stalled, timeout=TIMEOUT, what="selfish Stalled on its self-dependency")

    async def type_error() -> bool:
        now = await get(kc, PROCESSES, "typed", ns)
        conds = {c["type"]: (c["status"], c["reason"]) for c in (now or {}).get("status", {}).get("conditions", [])}
        return conds.get("Stalled") == ("True", "CelTypeError")

    await wait_for(type_error, timeout=TIMEOUT, what="typed Stalled on its CEL type error")

    await reach(kc, EPHEMERAL_POOLS, ns, "pool", "Steady")
    await reach(kc, EPHEMERAL_POOLS, ns, "capped", "Steady")
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("c1", "capped", ns), ns)
    await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "c1", "Bound")

    async def capped() -> bool:  # its member allocated, maxSize 1 reached below desiredSize 1: Stalled
        now = await get(kc, EPHEMERAL_POOLS, "capped", ns)
        return any(c["type"] == "Stalled" and c["status"] == "True" and c["reason"] == "MaxSizeReached"
                   for c in (now or {}).get("status", {}).get("conditions", []))

    await wait_for(capped, timeout=TIMEOUT, what="pool capped Stalled at maxSize")
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a1", "pool", ns), ns)
    await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "a1", "Bound")
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a2", "pool", ns), ns)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a3", "nopool", ns), ns)
    await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "a3", "NoMatchingPool")
    await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "a2", "Queued")
    await kc.delete(EPHEMERAL_ALLOCATIONS, "a1", ns)
    await disappear(kc, EPHEMERAL_ALLOCATIONS, ns, "a1")
    bound = await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "a2", "Bound")
    await kc.delete(PROCESSES, bound["status"]["assignedProcess"]["name"], ns)
    await reach(kc, EPHEMERAL_ALLOCATIONS, ns, "a2", "Failed")
    await kc.delete(EPHEMERAL_POOLS, "pool", ns)
    await disappear(kc, EPHEMERAL_POOLS, ns, "pool")

    async def no_members() -> bool:
        return await members(kc, ns, "pool") == []

    await wait_for(no_members, timeout=TIMEOUT, what="the pool's members gone")


def truths(obj: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((c["type"], c["status"]) for c in obj.get("status", {}).get("conditions", [])))


def observed(obj: dict[str, Any]) -> bool:
    seen = obj.get("status", {}).get("observedGeneration")
    return seen is None or seen == obj["metadata"].get("generation")


def expected(obj: dict[str, Any]) -> str:
    """kstatus's verdict as docs/behaviour.md's tables give it (#conditions, #pool-status,
    #allocation-conditions, #processtable-status)."""
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if not observed(obj):
        return "InProgress"
    kind, status = obj["kind"], obj["status"]
    phase = status.get("phase")
    if kind == "Process":
        stalled = ("Stalled", "True") in truths(obj)
        return {"Attested": "Current", "Failed": "Failed"}.get(phase, "Failed" if stalled else "InProgress")
    if kind == "EphemeralPool":
        stalled = ("Stalled", "True") in truths(obj)
        return "Current" if phase == "Steady" else "Failed" if stalled else "InProgress"
    if kind == "EphemeralAllocation":
        return {"Bound": "Current", "Failed": "Failed"}.get(phase, "InProgress")
    return "Current"  # the table, once written


REQUIRED = {
    "Process": {"Forking", "Execing", "Running", "Attested", "Reconverging", "Failed", "Exiting", "Zombie", "Reaped"},
    "EphemeralPool": {"Steady", "Draining"},
    "EphemeralAllocation": {"Queued", "NoMatchingPool", "Bound", "Releasing", "Released", "Failed"},
}


def mirror_of(obj: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the object to create, its status) for a mirror named ``name``: the status's observed generations
    are mapped onto the mirror's generation 1 (0 where the original's lagged)."""
    body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {"name": name},
            "spec": obj.get("spec", {})}
    generation = obj["metadata"].get("generation")

    def mapped(seen: int | None) -> int | None:
        return None if seen is None else (1 if seen == generation else 0)

    status = dict(obj["status"])
    if "observedGeneration" in status:
        status["observedGeneration"] = mapped(status["observedGeneration"])
    status["conditions"] = [
        {**c, "observedGeneration": mapped(c["observedGeneration"])} if "observedGeneration" in c else c
        for c in status.get("conditions", [])]
    return body, status


def kubectl_ready(kubectl: str, kubeconfig: str, kind: str, name: str, ns: str | None) -> bool:
    """``kubectl wait --for=condition=Ready --timeout=0s`` (check once): True when it succeeds."""
    args = [kubectl, "--kubeconfig", kubeconfig, "wait", f"{KINDS[kind].plural}.{KINDS[kind].group}/{name}",
            "--for=condition=Ready", "--timeout=0s"]
    if ns is not None:
        args += ["-n", ns]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


# cli-utils' kstatus README ("Conditions"): a deletionTimestamp is Terminating; an unobserved generation
# InProgress; Reconciling=True InProgress; Stalled=True Failed; otherwise a Ready condition decides, and
# an object with no known condition is Current.
@pytest.mark.parametrize(("meta", "status", "verdict"), [
    ({"deletionTimestamp": "2025-06-01T12:00:00Z"}, {}, "Terminating"),
    ({"generation": 2}, {"observedGeneration": 1}, "InProgress"),
    ({}, {"conditions": [{"type": "Reconciling", "status": "True"}]}, "InProgress"),
    ({}, {"conditions": [{"type": "Stalled", "status": "True"}]}, "Failed"),
    ({}, {"conditions": [{"type": "Ready", "status": "False"}]}, "InProgress"),
    ({"generation": 3}, {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]}, "Current"),
    ({}, {}, "Current"),
], ids=["deleting", "generation-unobserved", "reconciling", "stalled", "not-ready", "ready", "no-conditions"])
def test_the_judge_is_kstatus(meta: dict[str, Any], status: dict[str, Any], verdict: str) -> None:
    obj = {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": "x", **meta},
           "status": status}
    (found,) = KstatusJudge.default().judge([obj])
    assert (found.kind, found.name, found.status) == ("Process", "x", verdict)


async def test_kstatus_and_kubectl_wait_agree_on_every_phase_of_every_kind(
        kc: KubeClient, namespace: str, control_plane: LocalControlPlane) -> None:
    judge = KstatusJudge.default()
    judge.ensure_built()
    recorder = Recorder(kc, namespace)
    async with recorder.running(), reconcilers(kc, namespace):
        await drive(kc, namespace)
        # the ProcessTable (shared by every test) as it stands
        table = await get(kc, PROCESS_TABLES, "proc", None)
        assert table is not None
        recorder.keep({**table, "kind": "ProcessTable"})

    written = [o for o in recorder.versions.values()
               if o.get("status") and (o["kind"] != "ProcessTable" or o["metadata"]["name"] == "proc")]
    # the test's own hand edit (Failed under Ready=True) is the lie the reconciler corrects, not its write
    edits = [o for o in written if o["metadata"]["name"] == "hand" and o["status"].get("phase") == "Failed"
             and ("Ready", "True") in truths(o)]
    assert len(edits) == 1
    written = [o for o in written if o is not edits[0]]
    seen = {kind: {o["status"].get("phase") for o in written if o["kind"] == kind} for kind in REQUIRED}
    for kind, phases in REQUIRED.items():
        assert phases <= seen[kind], f"{kind}: never seen in {sorted(phases - seen[kind])}"
    capped_versions = [o for o in written if o["kind"] == "EphemeralPool" and o["metadata"]["name"] == "capped"
                       and ("Stalled", "True") in truths(o)]
    assert capped_versions, "the capped pool was never seen Stalled"

    # 1. kstatus on every recorded version, against the docs' tables
    verdicts = judge.judge(written)
    typed = [(o, v) for o, v in zip(written, verdicts, strict=True) if o["metadata"]["name"] == "typed"]
    last_typed, last_verdict = max(typed, key=lambda ov: int(ov[0]["metadata"]["resourceVersion"]))
    assert (last_typed["status"]["phase"], last_verdict.status) == ("Running", "Failed")
    assert last_typed["status"]["message"] == (
        "spec.boundary.postconditions[0]: CEL expression \"'ready'\" returned string, not a bool")
    wrong = [(o["kind"], o["metadata"]["name"], o["status"].get("phase"), truths(o), v.status, expected(o))
             for o, v in zip(written, verdicts, strict=True) if v.status != expected(o)]
    assert wrong == [], "\n".join(map(str, wrong))
    # issue 28: a pool capped below its target is Failed to kstatus, never InProgress
    assert {v.status for o, v in zip(written, verdicts, strict=True) if any(o is c for c in capped_versions)} == {
        "Failed"}

    # 2. mirrors: kstatus Current exactly when kubectl wait says Ready
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on PATH: kstatus judged alone (part 1 passed)")
    classes: dict[tuple[object, ...], dict[str, Any]] = {}
    for o in written:
        classes.setdefault((o["kind"], o["status"].get("phase"), truths(o), observed(o)), o)
    mirror_ns = f"m-{uuid.uuid4().hex[:10]}"
    await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": mirror_ns}})
    tables: list[str] = []
    try:
        mirrors: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for i, original in enumerate(classes.values()):
            resource = KINDS[original["kind"]]
            ns = mirror_ns if resource.namespaced else None
            name = f"m{i}" if resource.namespaced else f"{mirror_ns}-m{i}"
            body, status = mirror_of(original, name)
            await kc.create(resource, body, ns)
            if not resource.namespaced:
                tables.append(name)
            stored = msgspec.json.decode(await kc.merge_patch(resource, name, {"status": status}, ns,
                                                              subresource="status"))
            mirrors.append((original, {**stored, "kind": resource.kind}))
        mirror_verdicts = judge.judge([m for _, m in mirrors])
        disagree = []
        capped_mirrors: list[tuple[str, bool]] = []
        for (original, mirror), verdict in zip(mirrors, mirror_verdicts, strict=True):
            resource = KINDS[mirror["kind"]]
            ready = kubectl_ready(kubectl, str(control_plane.kubeconfig), mirror["kind"], mirror["metadata"]["name"],
                                  mirror_ns if resource.namespaced else None)
            if any(original is o for o in capped_versions):
                capped_mirrors.append((verdict.status, ready))
            if (verdict.status == "Current") != ready:
                disagree.append((original["kind"], original["metadata"]["name"], original["status"].get("phase"),
                                 truths(original), verdict.status, f"kubectl Ready={ready}"))
        assert disagree == [], "\n".join(map(str, disagree))
        assert len(mirrors) >= sum(len(p) for p in REQUIRED.values())
        # issue 28: the capped pool's mirror is Failed to kstatus and not Ready to kubectl wait
        assert ("Failed", False) in capped_mirrors
    finally:
        for name in tables:
            await kc.delete(PROCESS_TABLES, name, None)
        await kc.delete(NAMESPACES, mirror_ns, None)
