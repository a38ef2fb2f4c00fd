"""Static shards under faults (docs/architecture.md#sharding), then the fault tier's invariants and one more:
each object was reconciled by its own shard alone.

Runs both binaries as subprocesses in three instances each — shard ``shard1``, shard ``shard2`` and the unsharded
instance (``!sharding.fluxcd.io/key``) — with leader election on, each instance under its own Lease
(``<binary>-<shard>``, the unsharded one ``<binary>``), the reconcilers electing the one ProcessTable writer by the
Lease ``tatara-reconciler-processtable`` (#one-processtable-many-shards), and the Flux stand-in in-process. The
burst puts on each shard a pool of 2, three Processes and two allocations of that pool, all labelled
``sharding.fluxcd.io/key=<shard>`` (none on the unsharded ones): a pool, its members and its allocations on one
shard (#pools-on-one-shard).

Faulted, in a seeded order, three at seeded points of the burst and the fourth a seeded 0.5–3 s after it:

- SIGKILL of the instance writing the table (its Lease's holder, found from the Lease and the line each
  instance logs when it takes a Lease);
- SIGKILL of two seeded instances (binary and shard drawn from the six);
- a kube-apiserver restart.

A killed instance is replaced at once by a fresh process of the same shard (a new identity), as a Deployment
would; one that exits by itself (a Lease lost while the API server was away) is restarted by the harness's
supervisor once the API server answers.

Checked from the API once the reconcilers converged (tests/faults/harness.py): nothing lost (every Process
Attested, allocation Bound, pool Steady), PIDs unique across the shards and below the table's ``nextSequence``,
bindings exclusive, each Process's one Flux child. And the sharding (#sharding, #pools-on-one-shard):

- every Event about a Process, pool or allocation was written (``reportingInstance``) by an instance that led
  the Lease of the object's shard for the Event's binary (``reportingComponent``). An instance's identity is its
  Leases' holder identity; the identities of killed instances are no longer in any Lease, so each identity is
  tied to the Lease it led by the line it logged on taking it, and every Lease's current holder is checked to
  be among those;
- every pool member carries its pool's shard label, and every rendered Flux child its Process's;
- the table's Lease is held again, by a running instance.

The seeded waits *are* the faults' timing; every wait for an outcome is a condition with a deadline. The seed is
printed; ``TATARA_FAULT_SEED`` repeats a run.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain import annotations as ann
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, HELM_RELEASES, KUSTOMIZATIONS, PROCESSES
from shared.domain.sharding import SHARD_KEY, shard_of, shard_selector
from shared.kube.client import EVENTS, LEASES, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.faults.conftest import SEED
from tests.faults.harness import (
    Binaries,
    Binary,
    Fault,
    burst_with_faults,
    check_invariants,
    flux,
    items,
    leader_of,
    retried,
)
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

SHARDS: tuple[str | None, ...] = ("shard1", "shard2", None)
"""The instances of each binary: two shards and the unsharded one (None)."""
LEASE_NAMES = {"reconciler": "tatara-reconciler", "pool": "tatara-pool-reconciler"}
"""Each binary's Lease name by harness role (also the name in its Events' ``reportingComponent``)."""
TABLE_LEASE = "tatara-reconciler-processtable"
POOL_SIZE = 2
PROCESSES_PER_SHARD = 3
ALLOCATIONS_PER_SHARD = 2
EVENTS_DEADLINE = 30.0
"""Seconds the Events about every object get to land once the objects settled (they are written in the
background, a moment after the write they report)."""


def tag(shard: str | None) -> str:
    return shard or "unsharded"


def lease_name(role: str, shard: str | None) -> str:
    """As the charts name them: ``<leaseName>-<shard>``, the unsharded instance ``<leaseName>``."""
    return LEASE_NAMES[role] if shard is None else f"{LEASE_NAMES[role]}-{shard}"


def shard_flags(role: str, shard: str | None) -> tuple[str, ...]:
    return (f"--watch-label-selector={shard_selector(shard)}",
            f"--leader-election-lease-name={lease_name(role, shard)}")


INSTANCES = {shard_flags(role, shard): (role, shard) for role in LEASE_NAMES for shard in SHARDS}
"""Each instance's flags → its binary and shard, to tell which shard a running binary serves."""


def labelled(doc: dict[str, Any], shard: str | None) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    if shard is not None:
        out["metadata"].setdefault("labels", {})[SHARD_KEY] = shard
    return out


def pool_name(shard: str | None) -> str:
    return f"pool-{tag(shard)}"


PROC_SHARDS = {f"p-{tag(s)}-{i}": s for i in range(PROCESSES_PER_SHARD) for s in SHARDS}
"""The burst's Processes → their shard, the shards taking turns."""
ALLOC_SHARDS = {f"a-{tag(s)}-{i}": s for i in range(ALLOCATIONS_PER_SHARD) for s in SHARDS}
"""The burst's allocations → their shard (each names its shard's pool)."""
POOL_SHARDS = {pool_name(s): s for s in SHARDS}
PROCS, ALLOCS, POOLS = list(PROC_SHARDS), list(ALLOC_SHARDS), list(POOL_SHARDS)


def burst_documents(ns: str) -> list[tuple[Resource, dict[str, Any]]]:
    """The pools, then the Processes, then the allocations."""
    docs: list[tuple[Resource, dict[str, Any]]] = [
        (EPHEMERAL_POOLS, labelled(pool_doc(n, POOL_SIZE), s)) for n, s in POOL_SHARDS.items()]
    docs += [(PROCESSES, labelled(flux_process(n), s)) for n, s in PROC_SHARDS.items()]
    docs += [(EPHEMERAL_ALLOCATIONS, labelled(allocation_doc(n, pool_name(s), ns), s)) for n, s in ALLOC_SHARDS.items()]
    return docs


def note(done: list[str]) -> str:
    return f"seed {SEED}, faults: {'; '.join(done)}"


# ── the instances ────────────────────────────────────────────────────────────────────────────────────────────


def start_instances(binaries: Binaries) -> None:
    for role in LEASE_NAMES:
        for shard in SHARDS:
            binaries.start(role, leader_elect=True, extra=shard_flags(role, shard))


def describe(binary: Binary) -> str:
    role, shard = INSTANCES[binary.extra]
    return f"{role} {tag(shard)} ({binary.log.name})"


async def running_instance(binaries: Binaries, role: str, shard: str | None) -> Binary:
    """The running instance of ``role`` on ``shard`` (the supervisor may be between two of its processes)."""
    async def probe() -> Binary | None:
        found = [b for b in binaries.alive(role) if b.extra == shard_flags(role, shard)]
        return found[0] if found else None

    return await wait_for(probe, timeout=60, interval=0.2, what=f"a running {role} of {tag(shard)}")


async def table_writer(kc: KubeClient, ns: str, binaries: Binaries) -> tuple[str, Binary]:
    """The identity holding the table's Lease and its running process."""
    async def probe() -> tuple[str, Binary] | None:
        identity = await leader_of(kc, ns, TABLE_LEASE, binaries, "reconciler")
        found = binaries.leading_as(identity, "reconciler")
        return (identity, found[0]) if found else None

    return await wait_for(probe, timeout=90, interval=0.2, what="the table writer's process")


def replace(binaries: Binaries, victim: Binary) -> None:
    """SIGKILL ``victim`` and start a fresh process of its binary and shard in its place."""
    binaries.kill(victim)
    binaries.again(victim)


# ── the sharding check ───────────────────────────────────────────────────────────────────────────────────────


async def lease_holder(kc: KubeClient, ns: str, lease: str) -> str | None:
    try:
        raw = await retried(lambda: kc.get(LEASES, lease, ns), what=f"the Lease {lease}")
    except NotFound:
        return None
    holder: str | None = (msgspec.json.decode(raw).get("spec") or {}).get("holderIdentity")
    return holder


async def instances_by_identity(kc: KubeClient, ns: str, binaries: Binaries, *, note: str
                                ) -> dict[str, tuple[str, str | None]]:
    """Identity → the binary and shard whose Lease it led, for every instance this test ran (killed ones too),
    once it agrees with the API: every shard Lease's holder is one of them, the instance of that Lease (read
    together, as a holder that just took its Lease may not have logged it yet)."""
    leases = {f"{ns}/{lease_name(role, shard)}": (role, shard) for role in LEASE_NAMES for shard in SHARDS}

    def logged() -> dict[str, tuple[str, str | None]]:
        out: dict[str, tuple[str, str | None]] = {}
        for identity, led in binaries.leaders().items():
            mine = sorted(led & leases.keys())
            assert len(mine) <= 1, f"{note}: {identity} led the Leases of two instances: {mine}"
            if mine:
                out[identity] = leases[mine[0]]
        return out

    strangers: dict[str, str | None] = {}

    async def agreed() -> dict[str, tuple[str, str | None]] | None:
        holders = {lease: await lease_holder(kc, ns, lease.split("/", 1)[1]) for lease in leases}
        out = logged()
        strangers.clear()
        strangers.update({lease: h for lease, h in holders.items() if h is None or out.get(h) != leases[lease]})
        return out if not strangers else None

    try:
        return await wait_for(agreed, timeout=60, interval=0.2, what="every shard's Lease held")
    except TimeoutError:
        raise AssertionError(f"{note}: Leases unheld or held by an identity no instance logged taking them as: "
                             f"{strangers}") from None


async def check_shards(kc: KubeClient, ns: str, binaries: Binaries, state: dict[str, Any], *, note: str) -> None:
    """The module docstring's sharding checks, on ``state`` (the converged view the invariants were read on)."""
    procs: dict[str, dict[str, Any]] = state["processes"]
    objects: dict[tuple[str, str], dict[str, Any]] = {("Process", n): p for n, p in procs.items()}
    objects |= {("EphemeralAllocation", n): a for n, a in state["allocations"].items()}
    objects |= {("EphemeralPool", n): p for n, p in state["pools"].items()}
    shard = {key: shard_of(obj["metadata"].get("labels")) for key, obj in objects.items()}

    # the shards the burst put things on, and a member on its pool's
    wanted = {("Process", n): s for n, s in PROC_SHARDS.items()}
    wanted |= {("EphemeralAllocation", n): s for n, s in ALLOC_SHARDS.items()}
    wanted |= {("EphemeralPool", n): s for n, s in POOL_SHARDS.items()}
    members = {("Process", n): p["metadata"]["annotations"][ann.POOL] for n, p in procs.items()
               if (p["metadata"].get("annotations") or {}).get(ann.POOL)}
    wanted |= {key: shard[("EphemeralPool", pool)] for key, pool in members.items()}
    assert {k: shard.get(k) for k in wanted} == wanted, f"{note}: objects off their shard"
    assert len(members) >= POOL_SIZE * len(SHARDS), f"{note}: members {sorted(members)}"

    children = [*await items(kc, KUSTOMIZATIONS, ns), *await items(kc, HELM_RELEASES, ns)]
    by_uid = {p["metadata"]["uid"]: n for n, p in procs.items()}
    mislabelled = [(c["kind"], c["metadata"]["name"], shard_of(c["metadata"].get("labels")), owner)
                   for c in children for ref in c["metadata"].get("ownerReferences", [])
                   if ref.get("controller") and (owner := by_uid.get(ref["uid"])) is not None
                   and shard_of(c["metadata"].get("labels")) != shard[("Process", owner)]]
    assert mislabelled == [], f"{note}: Flux children without their Process's shard label: {mislabelled}"

    instance = await instances_by_identity(kc, ns, binaries, note=note)

    async def reported() -> list[dict[str, Any]] | None:
        events = [e for e in await items(kc, EVENTS, ns) if (e.get("involvedObject") or {}).get("kind")
                  in {"Process", "EphemeralAllocation", "EphemeralPool"}]
        about = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events}
        return events if objects.keys() <= about else None

    try:
        events = await wait_for(reported, timeout=EVENTS_DEADLINE, interval=0.5, what="Events about every object")
    except TimeoutError:
        about = {((e.get("involvedObject") or {}).get("kind"), (e.get("involvedObject") or {}).get("name"))
                 for e in await items(kc, EVENTS, ns)}
        raise AssertionError(f"{note}: no Event about {sorted(k for k in objects if k not in about)}") from None

    written: dict[str, set[str]] = defaultdict(set)  # identity → the objects it wrote about
    strays: list[str] = []
    for event in events:
        involved = event["involvedObject"]
        key = (involved["kind"], involved["name"])
        identity = event.get("reportingInstance", "")
        role = next((r for r, lease in LEASE_NAMES.items()
                     if event.get("reportingComponent", "").endswith(f"/{lease}")), None)
        if key not in shard:  # about an object gone by the end (a surplus member deleted): its shard is unknown
            continue
        written[identity].add(f"{key[0]}/{key[1]}")
        if role is None or instance.get(identity) != (role, shard[key]):
            strays.append(f"{event.get('reason')} about {key[0]}/{key[1]} (shard {tag(shard[key])}) by "
                          f"{event.get('reportingComponent')} {identity} (led {instance.get(identity)})")
    assert strays == [], f"{note}: Events from an instance not of the object's shard:\n" + "\n".join(strays)
    print(f"{note}: {len(events)} Events from {len(written)} instances, each about its own shard's objects")


# ── the test ─────────────────────────────────────────────────────────────────────────────────────────────────


async def test_sharded_instances_under_kills_and_an_apiserver_restart(admin: KubeClient, ns: str, binaries: Binaries,
                                                                      plane: LocalControlPlane,
                                                                      rng: random.Random) -> None:
    start_instances(binaries)

    async def kill_table_writer() -> str:
        identity, victim = await table_writer(admin, ns, binaries)
        replace(binaries, victim)
        return f"SIGKILL the table writer {identity}, {describe(victim)}"

    def kill(role: str, shard: str | None) -> Fault:
        async def fault() -> str:
            victim = await running_instance(binaries, role, shard)
            replace(binaries, victim)
            return f"SIGKILL {describe(victim)}"
        return fault

    async def restart_apiserver() -> str:
        await anyio.to_thread.run_sync(plane.restart_apiserver)
        return "kube-apiserver restarted"

    victims = rng.sample([(role, shard) for role in LEASE_NAMES for shard in SHARDS], 2)
    faults: list[Fault] = [kill_table_writer, restart_apiserver, *(kill(role, shard) for role, shard in victims)]
    rng.shuffle(faults)
    docs = burst_documents(ns)
    points = sorted(rng.sample(range(len(SHARDS) + 1, len(docs)), 3))  # once the pools and a Process exist
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        try:
            await burst_with_faults(admin, ns, docs, rng, dict(zip(points, faults[:3], strict=True)), done)
            pause = rng.uniform(0.5, 3.0)
            await anyio.sleep(pause)  # the last fault strikes while the burst converges
            done.append(f"+{pause:.2f} s after the burst: {await faults[3]()}")
            state = await check_invariants(admin, ns, PROCS, ALLOCS, pools=POOLS, note=note(done))
            await check_shards(admin, ns, binaries, state, note=note(done))
            identity, writer = await table_writer(admin, ns, binaries)
            print(f"{note(done)}: the table written by {identity}, {describe(writer)}")
        except (AssertionError, TimeoutError) as err:
            raise AssertionError(f"{note(done)}\n{err}\n{binaries.report()}") from None
