"""Static sharding end to end (docs/architecture.md#sharding): three instances of each binary as subprocesses on
one plane — shard ``shard1``, shard ``shard2`` and the unsharded instance (``!sharding.fluxcd.io/key``) — with
leader election on, each under its own Lease, and the Flux stand-in.

Who reconciled an object is read from what each instance leaves behind, not from the code under test: the
``reportingInstance`` of the Events about it (each instance's identity is the holder of its Lease) and each
instance's own ``/metrics``. Checked: every Process, pool member and allocation is reconciled by exactly the
instance of its shard; one instance writes the ProcessTable's status (its Lease's holder), covering every shard;
PIDs stay unique across shards, also when the table writer's instance is SIGKILLed mid-run (and another takes
the table's Lease over); bindings stay exclusive; a ``poolRef`` across shards is refused with
``PoolOnOtherShard``.
"""

from __future__ import annotations

import copy
import os
import signal
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.domain.annotations import SIGNAL
from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, KUSTOMIZATIONS, PROCESS_TABLES, PROCESSES
from shared.domain.sharding import SHARD_KEY, shard_selector
from shared.kube.client import EVENTS, LEASES, NAMESPACES, KubeClient
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc, read, wait_free
from tests.support.kube import wait_for
from tests.support.standin_thread import flux_standin_thread
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.processes import stop_process_groups
from tools.up import Daemon, _start, ensure_namespace, load_examples, wait_ready

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0
SHARDS: tuple[str | None, ...] = ("shard1", "shard2", None)
"""The instances of each binary: two shards and the unsharded one (None)."""
TABLE_LEASE = "tatara-reconciler-processtable"
STANDIN_DELAY = 0.5


def tag(shard: str | None) -> str:
    return shard or "unsharded"


def lease_name(binary: str, shard: str | None) -> str:
    """As the charts name them: ``<leaseName>-<shard>``, the unsharded instance ``<leaseName>``."""
    return binary if shard is None else f"{binary}-{shard}"


@dataclass
class Plane:
    kubeconfig: Path
    logs: Path
    ns: str
    """The namespace every instance watches (and the tests work in)."""
    leases: str
    """The namespace of the instances' Leases."""
    reconcilers: dict[str | None, Daemon]
    pools: dict[str | None, Daemon]


def reconciler_args(plane_ns: str, leases: str, shard: str | None, port: int) -> list[str]:
    return ["--leader-elect=true", f"--health-addr=127.0.0.1:{port}", f"--controller-namespace={leases}",
            f"--watch-namespace={plane_ns}", f"--watch-label-selector={shard_selector(shard)}",
            f"--leader-election-lease-name={lease_name('tatara-reconciler', shard)}",
            f"--table-lease-name={TABLE_LEASE}", "--table-status-interval=1", "--heartbeat-seconds=5"]


def pool_args(plane_ns: str, leases: str, shard: str | None, port: int) -> list[str]:
    return ["--leader-elect=true", f"--health-addr=127.0.0.1:{port}", f"--controller-namespace={leases}",
            f"--watch-namespace={plane_ns}", f"--watch-label-selector={shard_selector(shard)}",
            f"--leader-election-lease-name={lease_name('tatara-pool-reconciler', shard)}", "--heartbeat-seconds=2"]


@pytest.fixture(scope="module")
def plane(control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """CRDs, two namespaces (work, Leases), the Flux stand-in, three instances of each binary; all stopped and
    deleted at the end of the module."""
    kubeconfig = control_plane.kubeconfig
    logs = tmp_path_factory.mktemp("sharded")
    suffix = uuid.uuid4().hex[:8]
    ns, leases = f"shard-{suffix}", f"shard-leases-{suffix}"

    async def setup() -> None:
        async with await KubeClient.from_kubeconfig(kubeconfig) as client:
            await install_crds(client, all_crds())
            await ensure_namespace(client, ns)
            await ensure_namespace(client, leases)

    async def teardown() -> None:
        async with await KubeClient.from_kubeconfig(kubeconfig) as client:
            for name in (ns, leases):
                await client.delete(NAMESPACES, name)

    anyio.run(setup)
    reconcilers: dict[str | None, Daemon] = {}
    pools: dict[str | None, Daemon] = {}
    with flux_standin_thread(kubeconfig, delay=STANDIN_DELAY):
        try:
            for shard in SHARDS:
                port = free_port()
                reconcilers[shard] = _start(f"tatara-reconciler-{tag(shard)}", "reconciler.main",
                                            reconciler_args(ns, leases, shard, port), kubeconfig, logs, port)
                port = free_port()
                pools[shard] = _start(f"tatara-pool-reconciler-{tag(shard)}", "pool_reconciler.main",
                                      pool_args(ns, leases, shard, port), kubeconfig, logs, port)
            anyio.run(wait_ready, [*reconcilers.values(), *pools.values()], 90.0)
            yield Plane(kubeconfig, logs, ns, leases, reconcilers, pools)
        finally:
            stop_process_groups([d.proc for d in (*reconcilers.values(), *pools.values())], 30.0)
            anyio.run(teardown)


@pytest.fixture
async def kc(plane: Plane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
        yield client


# ── reading who did what ─────────────────────────────────────────────────────────


async def holders(kc: KubeClient, plane: Plane, binary: str) -> dict[str | None, str]:
    """Each instance's identity: the holder of its own Lease (every instance leads its shard, alone in it)."""
    async def probe() -> dict[str | None, str] | None:
        out: dict[str | None, str] = {}
        for shard in SHARDS:
            lease = msgspec.json.decode(await kc.get(LEASES, lease_name(binary, shard), plane.leases))
            holder = (lease.get("spec") or {}).get("holderIdentity")
            if not holder:
                return None
            out[shard] = holder
        return out

    return await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"every {binary} Lease held")


async def reported(kc: KubeClient, ns: str, kind: str, component: str, names: list[str]) -> dict[str, set[str]]:
    """:func:`reporters`, once every one of ``names`` has an Event (they are written in the background, so
    an object may be Attested or Bound a moment before its last Event lands)."""
    async def probe() -> dict[str, set[str]] | None:
        found = await reporters(kc, ns, kind, component)
        return found if all(found.get(n) for n in names) else None

    return await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"Events about {len(names)} {kind}s")


async def reporters(kc: KubeClient, ns: str, kind: str, component: str) -> dict[str, set[str]]:
    """``involvedObject.name`` → the ``reportingInstance`` of every Event about a ``kind`` in ``ns`` that
    ``component`` wrote."""
    events = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    out: dict[str, set[str]] = defaultdict(set)
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == kind and event.get("reportingComponent") == component:
            out[involved["name"]].add(event.get("reportingInstance", ""))
    return out


def samples(port: int, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` of ``/metrics`` on ``port``, with their labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return [(dict(s.labels), s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name]


def labelled(doc: dict[str, Any], shard: str | None) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    if shard is not None:
        out["metadata"].setdefault("labels", {})[SHARD_KEY] = shard
    return out


def process_doc(name: str) -> dict[str, Any]:
    """The podinfo example (examples/flux-intent.yaml) under another name and Flux path."""
    (example,) = [ex for ex in load_examples(ROOT / "examples") if ex.name == "podinfo"]
    doc = copy.deepcopy(example.doc)
    doc["metadata"] = {"name": name}
    doc["spec"]["intent"]["flux"]["path"] = f"./apps/{name}"
    doc["spec"]["signals"] = {"sighupStrategy": "Reconverge"}
    return doc


async def wait_attested(kc: KubeClient, ns: str, names: list[str]) -> dict[str, dict[str, Any]]:
    async def probe() -> dict[str, dict[str, Any]] | None:
        listed = msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]
        found = {p["metadata"]["name"]: p for p in listed if p["metadata"]["name"] in names}
        done = all((found.get(n, {}).get("status") or {}).get("phase") == "Attested" for n in names)
        return found if done else None

    return await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"{len(names)} Processes Attested")


# ── the tests ──────────────────────────────────────────────────────────────────


async def test_each_process_is_reconciled_by_its_shard_alone_with_unique_pids(plane: Plane, kc: KubeClient) -> None:
    ns = plane.ns
    per_shard = 4
    names: dict[str | None, list[str]] = {s: [f"p-{tag(s)}-{i}" for i in range(per_shard)] for s in SHARDS}
    for shard, group in names.items():
        for name in group:
            await kc.create(PROCESSES, labelled(process_doc(name), shard), ns)
    everyone = [n for group in names.values() for n in group]
    found = await wait_attested(kc, ns, everyone)

    pids = [found[n]["status"]["pid"] for n in everyone]
    assert all(pids)
    assert len(set(pids)) == len(everyone), pids

    identity = await holders(kc, plane, "tatara-reconciler")
    assert len(set(identity.values())) == len(SHARDS)
    by_process = await reported(kc, ns, "Process", "tatara.pleme.io/tatara-reconciler", everyone)
    for shard, group in names.items():
        for name in group:
            assert by_process.get(name) == {identity[shard]}, (name, shard, by_process.get(name), identity)

    # each Kustomization carries its Process's shard label, so a Flux shard of that name takes it
    kustomizations = msgspec.json.decode(await kc.list(KUSTOMIZATIONS, ns))["items"]
    owner_shard = {k["metadata"]["ownerReferences"][0]["name"]: (k["metadata"].get("labels") or {}).get(SHARD_KEY)
                   for k in kustomizations}
    assert {n: owner_shard.get(n) for n in everyone} == {n: s for s, group in names.items() for n in group}

    # each instance's metrics count its own shard's Processes, no one else's: per_shard Attested transitions
    for shard, daemon in plane.reconcilers.items():
        attested = sum(v for labels, v in samples(daemon.port, "tatara_process_phase_transitions_total")
                       if labels.get("to") == "Attested")
        assert attested == per_shard, (tag(shard), attested)
        cached = sum(v for _, v in samples(daemon.port, "tatara_processes"))
        assert cached == per_shard, (tag(shard), cached)


async def test_one_instance_writes_the_table_and_counts_every_shard(plane: Plane, kc: KubeClient) -> None:
    mine = [f"t-{tag(s)}" for s in SHARDS]
    for shard, name in zip(SHARDS, mine, strict=True):
        await kc.create(PROCESSES, labelled(process_doc(name), shard), plane.ns)
    await wait_attested(kc, plane.ns, mine)
    table_lease = msgspec.json.decode(await kc.get(LEASES, TABLE_LEASE, plane.leases))
    writer = table_lease["spec"]["holderIdentity"]
    identity = await holders(kc, plane, "tatara-reconciler")
    assert writer in identity.values()
    leading = {tag(shard): sum(v for labels, v in samples(d.port, "leader_election_master_status")
                               if labels.get("name") == TABLE_LEASE)
               for shard, d in plane.reconcilers.items()}
    assert sorted(leading.values()) == [0.0] * (len(SHARDS) - 1) + [1.0], leading

    listed = msgspec.json.decode(await kc.list(PROCESSES, plane.ns))["items"]

    async def counted() -> dict[str, Any] | None:
        status = (msgspec.json.decode(await kc.get(PROCESS_TABLES, PROCESS_TABLE_NAME)).get("status") or {})
        return status if status.get("processCount") == len(listed) else None

    status = await wait_for(counted, timeout=TIMEOUT, interval=0.2, what=f"processCount {len(listed)}")
    shards_in_rows = {(p["metadata"].get("labels") or {}).get(SHARD_KEY) for p in listed}
    assert shards_in_rows == set(SHARDS)  # the count it wrote covers Processes of every shard
    assert status["processCount"] == len(listed)


async def test_a_pool_its_members_and_allocations_stay_on_its_shard(plane: Plane, kc: KubeClient) -> None:
    ns = plane.ns
    await kc.create(EPHEMERAL_POOLS, labelled(pool_doc("warm1", 2), "shard1"), ns)
    await kc.create(EPHEMERAL_POOLS, pool_doc("warm0", 1), ns)
    free1 = await wait_free(kc, ns, "warm1", 2)
    free0 = await wait_free(kc, ns, "warm0", 1)
    assert {(m["metadata"].get("labels") or {}).get(SHARD_KEY) for m in free1} == {"shard1"}
    assert {(m["metadata"].get("labels") or {}).get(SHARD_KEY) for m in free0} == {None}

    reconciler_ids = await holders(kc, plane, "tatara-reconciler")
    by_process = await reported(kc, ns, "Process", "tatara.pleme.io/tatara-reconciler",
                                [m["metadata"]["name"] for m in free1])
    assert {m["metadata"]["name"]: by_process.get(m["metadata"]["name"]) for m in free1} == {
        m["metadata"]["name"]: {reconciler_ids["shard1"]} for m in free1}

    for name in ("a1", "a2"):
        await kc.create(EPHEMERAL_ALLOCATIONS, labelled(allocation_doc(name, "warm1", ns), "shard1"), ns)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("b0", "warm0", ns), ns)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("stray", "warm1", ns), ns)  # unsharded, names shard1's

    async def settled() -> dict[str, dict[str, Any]] | None:
        got = {n: await read(kc, EPHEMERAL_ALLOCATIONS, n, ns) for n in ("a1", "a2", "b0", "stray")}
        phases = {n: (a.get("status") or {}).get("phase") for n, a in got.items()}
        want = {"a1": "Bound", "a2": "Bound", "b0": "Bound", "stray": "NoMatchingPool"}
        return got if phases == want else None

    got = await wait_for(settled, timeout=TIMEOUT, interval=0.2, what="allocations bound or refused")
    bound = {n: got[n]["status"]["assignedProcess"]["name"] for n in ("a1", "a2")}
    assert len(set(bound.values())) == 2, bound  # exclusive: two allocations, two members
    assert set(bound.values()) == {m["metadata"]["name"] for m in free1}
    assert got["b0"]["status"]["assignedProcess"]["name"] == free0[0]["metadata"]["name"]
    reasons = {c.get("reason") for c in got["stray"]["status"].get("conditions") or []}
    assert "PoolOnOtherShard" in reasons, got["stray"]["status"]
    assert "shard 'shard1'" in got["stray"]["status"]["message"]

    pool_ids = await holders(kc, plane, "tatara-pool-reconciler")
    by_allocation = await reported(kc, ns, "EphemeralAllocation", "tatara.pleme.io/tatara-pool-reconciler",
                                   ["a1", "a2", "b0", "stray"])
    assert {n: by_allocation.get(n) for n in ("a1", "a2", "b0", "stray")} == {
        "a1": {pool_ids["shard1"]}, "a2": {pool_ids["shard1"]}, "b0": {pool_ids[None]}, "stray": {pool_ids[None]}}


async def test_a_label_edit_moves_a_process_to_another_shard(plane: Plane, kc: KubeClient) -> None:
    """Relabelled from shard1 to shard2, a Process is reconciled by shard2 from then on: a SIGHUP sent after the
    move is taken by shard2's instance, and the re-render labels its Kustomization shard2 (Flux shard2's)."""
    ns, name = plane.ns, "mover"
    await kc.create(PROCESSES, labelled(process_doc(name), "shard1"), ns)
    before = (await wait_attested(kc, ns, [name]))[name]["status"]["attestation"]["generation"]
    identity = await holders(kc, plane, "tatara-reconciler")
    assert (await reported(kc, ns, "Process", "tatara.pleme.io/tatara-reconciler", [name]))[name] == {
        identity["shard1"]}

    def cached(shard: str) -> float:
        return sum(v for _, v in samples(plane.reconcilers[shard].port, "tatara_processes"))

    counts = (cached("shard1"), cached("shard2"))
    await kc.merge_patch(PROCESSES, name, {"metadata": {"labels": {SHARD_KEY: "shard2"}}}, ns)

    async def gone_from_shard1() -> bool:
        return (cached("shard1"), cached("shard2")) == (counts[0] - 1, counts[1] + 1)

    # shard1's cache no longer holds it (its watch saw it leave the selector), shard2's does
    await wait_for(gone_from_shard1, timeout=TIMEOUT, interval=0.2, what="the Process in shard2's cache only")
    shard1_events = sum(1 for _ in await events_by(kc, ns, name, identity["shard1"]))
    await kc.merge_patch(PROCESSES, name, {"metadata": {"annotations": {SIGNAL: "SIGHUP"}}}, ns)

    async def reconverged() -> dict[str, Any] | None:
        status = (await read(kc, PROCESSES, name, ns)).get("status") or {}
        attestation = status.get("attestation") or {}
        return status if status.get("phase") == "Attested" and attestation.get("generation", -1) > before else None

    await wait_for(reconverged, timeout=TIMEOUT, interval=0.2, what=f"{name} reconverged after SIGHUP")
    async def from_shard2() -> list[dict[str, Any]]:
        return await events_by(kc, ns, name, identity["shard2"])

    await wait_for(from_shard2, timeout=TIMEOUT, interval=0.2, what="an Event from shard2 about the reconverge")
    assert sum(1 for _ in await events_by(kc, ns, name, identity["shard1"])) == shard1_events  # nothing new
    (kustomization,) = [k for k in msgspec.json.decode(await kc.list(KUSTOMIZATIONS, ns))["items"]
                        if k["metadata"]["ownerReferences"][0]["name"] == name]
    assert kustomization["metadata"]["labels"][SHARD_KEY] == "shard2"


async def events_by(kc: KubeClient, ns: str, name: str, instance: str) -> list[dict[str, Any]]:
    """The Events about Process ``name`` that ``instance`` wrote."""
    events = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return [e for e in events if (e.get("involvedObject") or {}).get("name") == name
            and (e.get("involvedObject") or {}).get("kind") == "Process" and e.get("reportingInstance") == instance]


async def test_pids_stay_unique_and_the_table_writer_moves_when_its_instance_is_killed(
        plane: Plane, kc: KubeClient) -> None:
    """SIGKILL the instance that writes the table, while its shard's Processes fork: another instance takes the
    table's Lease over (it was not released), PIDs stay unique, and the count catches up with every shard."""
    ns = plane.ns
    identity = await holders(kc, plane, "tatara-reconciler")
    writer = msgspec.json.decode(await kc.get(LEASES, TABLE_LEASE, plane.leases))["spec"]["holderIdentity"]
    (shard,) = [s for s, ident in identity.items() if ident == writer]
    names: dict[str | None, list[str]] = {s: [f"k-{tag(s)}-{i}" for i in range(4)] for s in SHARDS}
    for group_shard, group in names.items():
        for name in group:
            await kc.create(PROCESSES, labelled(process_doc(name), group_shard), ns)

    async def forking() -> bool:
        listed = msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]
        phases = [(p.get("status") or {}).get("phase") for p in listed if p["metadata"]["name"] in names[shard]]
        return sum(ph is not None for ph in phases) >= 1 and sum(ph != "Attested" for ph in phases) >= 1

    await wait_for(forking, timeout=TIMEOUT, interval=0.05, what=f"{tag(shard)}'s Processes under way")
    victim = plane.reconcilers[shard]
    os.killpg(victim.proc.pid, signal.SIGKILL)
    assert victim.proc.wait(30) == -signal.SIGKILL
    logs = plane.logs / "restarted"
    logs.mkdir(exist_ok=True)
    restarted = _start(victim.name, "reconciler.main", victim.proc.args[3:], plane.kubeconfig, logs, victim.port)
    plane.reconcilers[shard] = restarted
    await wait_ready([restarted], 90.0)  # takes its own Lease over once the dead holder's expires

    everyone = [n for group in names.values() for n in group]
    await wait_attested(kc, ns, everyone)
    listed = msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]
    pids = [(p.get("status") or {}).get("pid") for p in listed]
    assert all(pids)
    assert len(set(pids)) == len(listed), sorted(pids)  # every Process of every test here: none shared

    async def taken_over() -> str | None:
        holder = msgspec.json.decode(await kc.get(LEASES, TABLE_LEASE, plane.leases))["spec"].get("holderIdentity")
        return holder if holder and holder != writer else None

    await wait_for(taken_over, timeout=TIMEOUT, interval=0.2, what="the table Lease taken over")

    async def counted() -> bool:
        status = msgspec.json.decode(await kc.get(PROCESS_TABLES, PROCESS_TABLE_NAME)).get("status") or {}
        return bool(status.get("processCount") == len(listed))

    await wait_for(counted, timeout=TIMEOUT, interval=0.2, what=f"processCount {len(listed)} from the new writer")
