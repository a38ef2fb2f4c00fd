"""Dynamic sharding end to end (docs/architecture.md#dynamic-sharding): three members of each binary as subprocesses
(``--sharding=dynamic``, short Leases) on a private plane, and the Flux stand-in.

Who wrote what is read from the API server's own audit log, not from the code under test: every member
authenticates as a user of its own, and the plane's audit policy records each write of those users to Processes,
pools and allocations (the ``status`` writes are what a reconcile leaves; the sharder's label writes and the
finalizers are not counted). The member each object belongs to is computed here from the documented rendezvous
formula (:func:`tests.unit.kube.test_sharding.documented_pick`). Checked:

- every Process, pool and allocation has its status written by exactly the member the hash picks, and each
  member's metrics count just its own Processes' transitions; PIDs are unique; bindings exclusive;
- a member SIGKILLed: its Processes are written by the member the hash picks among the survivors, no earlier than
  its Lease could expire and within a few Lease durations (the measured time is printed); when it comes back
  (same member name) they move back through the drain hand-over. Per Process, the writers in time order form
  exactly the blocks the three rings give, one after another: a member writing while another owns the Process
  would add a block;
- a pool member SIGKILLed: an allocation of a namespace it owned binds once the namespace moved.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.domain.annotations import SIGNAL
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.domain.sharding import RING_LABEL
from shared.kube.client import LEASES, KubeClient
from tests.e2e.test_sharded import process_doc
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc, read, wait_free
from tests.support.kube import wait_for
from tests.support.standin_thread import flux_standin_thread
from tests.unit.kube.test_sharding import documented_pick
from tools.controlplane import LocalControlPlane
from tools.controlplane.audit import AuditEvent, parse_events
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.processes import stop_process_groups
from tools.up import Daemon, _start, ensure_namespace, wait_ready

pytestmark = pytest.mark.anyio

TIMEOUT = 120.0
LEASE, RENEW, RETRY = 4.0, 3.0, 1.0
"""The members' Lease timing (seconds): short, so a dead member's objects move within the test's time."""
RECONCILERS = ["r0", "r1", "r2"]
POOLERS = ["p0", "p1", "p2"]
LEASES_NS = "dyn-leases"
WORK_NS = "dyn-work"
POOL_NAMESPACES = ["dyn-pa", "dyn-pb", "dyn-pc", "dyn-pd"]
INSTANCES = "tatara:instances"
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": [INSTANCES], "verbs": ["create", "update", "patch", "delete"],
         "resources": [{"group": "tatara.pleme.io", "resources": [
             "processes", "processes/status", "ephemeralpools", "ephemeralpools/status", "ephemeralallocations",
             "ephemeralallocations/status"]}]},
        {"level": "Metadata", "userGroups": [INSTANCES], "verbs": ["create", "update"],
         "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
        {"level": "None"},
    ],
}
"""The members' writes to tatara's kinds and to Leases (their renewals), who made each and when; nothing else."""


def user(member: str) -> str:
    return f"tatara-{member}"


@dataclass
class Ring:
    plane: LocalControlPlane
    logs: Path
    reconcilers: dict[str, Daemon]
    pools: dict[str, Daemon]

    def start(self, member: str) -> Daemon:
        """Start (or start again) ``member``, as a user of its own."""
        kubeconfig = self.plane.kubeconfig_for(user(member), ("system:masters", INSTANCES))
        port = free_port()
        timing = [f"--leader-election-lease-duration={LEASE:g}", f"--leader-election-renew-deadline={RENEW:g}",
                  f"--leader-election-retry-period={RETRY:g}"]
        common = ["--leader-elect=true", f"--health-addr=127.0.0.1:{port}", f"--controller-namespace={LEASES_NS}",
                  "--sharding=dynamic", f"--shard-name={member}", *timing]
        if member in RECONCILERS:
            daemon = _start(f"tatara-reconciler-{member}-{time.monotonic_ns()}", "reconciler.main",
                            [*common, "--table-status-interval=1", "--heartbeat-seconds=5"], kubeconfig, self.logs,
                            port)
            self.reconcilers[member] = daemon
        else:
            daemon = _start(f"tatara-pool-reconciler-{member}-{time.monotonic_ns()}", "pool_reconciler.main",
                            [*common, "--heartbeat-seconds=2"], kubeconfig, self.logs, port)
            self.pools[member] = daemon
        return daemon

    def kill(self, member: str) -> None:
        daemon = self.reconcilers.get(member) or self.pools[member]
        os.killpg(daemon.proc.pid, signal.SIGKILL)
        assert daemon.proc.wait(30) == -signal.SIGKILL

    def audit(self) -> list[AuditEvent]:
        with open(self.plane.audit_log) as log:
            return parse_events(log)


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ring]:
    """A private plane writing the members' audit log, the CRDs, the namespaces, the Flux stand-in, three members
    of each binary; every process stopped at the end."""
    plane = LocalControlPlane(controller_manager=False, audit=True, audit_policy=AUDIT_POLICY,
                              work_dir=tmp_path_factory.mktemp("dynamic-plane"))
    plane.start()

    async def setup() -> None:
        async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
            await install_crds(client, all_crds())
            for name in (LEASES_NS, WORK_NS, *POOL_NAMESPACES):
                await ensure_namespace(client, name)

    running = Ring(plane, tmp_path_factory.mktemp("dynamic-logs"), {}, {})
    try:
        anyio.run(setup)
        with flux_standin_thread(plane.kubeconfig, delay=0.3):
            try:
                for member in (*RECONCILERS, *POOLERS):
                    running.start(member)
                anyio.run(wait_ready, [*running.reconcilers.values(), *running.pools.values()], 90.0)
                yield running
            finally:
                stop_process_groups([d.proc for d in (*running.reconcilers.values(), *running.pools.values())],
                                    30.0)
    finally:
        plane.stop()


@pytest.fixture
async def kc(ring: Ring) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(ring.plane.kubeconfig) as client:
        yield client


# ── reading the ring ───────────────────────────────────────────────────────────


def samples(daemon: Daemon, name: str) -> list[tuple[dict[str, str], float]]:
    with urllib.request.urlopen(daemon.metrics, timeout=5) as resp:
        text = resp.read().decode()
    return [(dict(s.labels), s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name]


async def members_seen(daemons: dict[str, Daemon], ring_name: str, count: int) -> None:
    """Wait until the ring's sharder (whichever member holds its Lease) counts ``count`` alive members."""
    async def probe() -> bool:
        seen = [v for d in daemons.values() if d.proc.poll() is None
                for labels, v in samples(d, "controller_sharding_members") if labels.get("ring") == ring_name]
        return count in seen

    await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"ring {ring_name} with {count} alive members")


async def member_leases(kc: KubeClient) -> dict[str, str]:
    """Member Lease name → holder, of both rings."""
    listed = msgspec.json.decode(await kc.list(LEASES, LEASES_NS, label_selector=RING_LABEL))["items"]
    return {lease["metadata"]["name"]: (lease.get("spec") or {}).get("holderIdentity") or "" for lease in listed}


def status_writers(events: list[AuditEvent], resource: str, namespace: str) -> dict[str, list[tuple[datetime, str]]]:
    """Object name → (time received, member) of each successful status write to it, in time order."""
    out: dict[str, list[tuple[datetime, str]]] = {}
    for e in events:
        if e.resource == f"{resource}/status" and e.namespace == namespace and e.code < 300 and e.verb == "patch":
            member = e.user.removeprefix("tatara-")
            out.setdefault(e.name, []).append((datetime.fromisoformat(e.received.replace("Z", "+00:00")), member))
    for writes in out.values():
        writes.sort()
    return out


def last_renewal(events: list[AuditEvent], member: str) -> datetime:
    """When the API server received ``member``'s last successful write to its own Lease."""
    return max(datetime.fromisoformat(e.received.replace("Z", "+00:00")) for e in events
               if e.resource == "leases" and e.name == member and e.user == user(member) and e.code < 300)


def blocks(writes: list[tuple[datetime, str]]) -> list[str]:
    """The writers in time order with repeats folded: ``[r1, r0, r1]`` for r1…r1, r0…r0, r1…r1."""
    out: list[str] = []
    for _, member in writes:
        if not out or out[-1] != member:
            out.append(member)
    return out


async def attested(kc: KubeClient, names: list[str], after: dict[str, int] | None = None) -> dict[str, Any]:
    """Wait until every Process of ``names`` is Attested (with an attestation generation above ``after``'s)."""
    async def probe() -> dict[str, Any] | None:
        listed = msgspec.json.decode(await kc.list(PROCESSES, WORK_NS))["items"]
        found = {p["metadata"]["name"]: p for p in listed if p["metadata"]["name"] in names}
        for name in names:
            status = found.get(name, {}).get("status") or {}
            generation = (status.get("attestation") or {}).get("generation", -1)
            if status.get("phase") != "Attested" or (after is not None and generation <= after[name]):
                return None
        return found

    return await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"{len(names)} Processes Attested")


async def sighup(kc: KubeClient, names: list[str]) -> dict[str, int]:
    """Send SIGHUP to each of ``names``; their attestation generations before it."""
    found = await attested(kc, names)
    for name in names:
        await kc.merge_patch(PROCESSES, name, {"metadata": {"annotations": {SIGNAL: "SIGHUP"}}}, WORK_NS)
    return {n: found[n]["status"]["attestation"]["generation"] for n in names}


# ── the tests ──────────────────────────────────────────────────────────────────


async def test_processes_follow_the_ring_through_a_death_and_a_return_never_written_by_two_at_once(
        ring: Ring, kc: KubeClient) -> None:
    await members_seen(ring.reconcilers, "tatara-reconciler", 3)
    names = [f"p{i}" for i in range(12)]
    owner3 = {n: documented_pick(f"{WORK_NS}/{n}", RECONCILERS) for n in names}
    victim = max(RECONCILERS, key=lambda m: sum(o == m for o in owner3.values()))
    survivors = [m for m in RECONCILERS if m != victim]
    owner2 = {n: documented_pick(f"{WORK_NS}/{n}", survivors) for n in names}
    for name in names:
        await kc.create(PROCESSES, process_doc(name), WORK_NS)
    found = await attested(kc, names)
    pids = [found[n]["status"]["pid"] for n in names]
    assert len(set(pids)) == len(names), pids

    writers = status_writers(ring.audit(), "processes", WORK_NS)
    assert {n: blocks(writers[n]) for n in names} == {n: [owner3[n]] for n in names}
    for member, daemon in ring.reconcilers.items():  # each member's metrics count its own Processes only
        attests = sum(v for labels, v in samples(daemon, "tatara_process_phase_transitions_total")
                      if labels.get("to") == "Attested")
        assert attests == sum(o == member for o in owner3.values()), (member, attests)

    # the death: SIGKILL, then every Process is signalled, so each is written again wherever it now belongs
    killed = datetime.now().astimezone()
    ring.kill(victim)
    before = await sighup(kc, names)
    await attested(kc, names, after=before)
    events = ring.audit()
    writers = status_writers(events, "processes", WORK_NS)
    renewed = last_renewal(events, victim)
    moved = [n for n in names if owner3[n] == victim]
    first = {n: min(t for t, m in writers[n] if m == owner2[n] and t > killed) for n in moved}
    resumed = {n: (t - killed).total_seconds() for n, t in first.items()}
    print(f"{victim}'s {len(moved)} Processes resumed on {sorted({owner2[n] for n in moved})} "
          f"{min(resumed.values()):.2f}–{max(resumed.values()):.2f} s after the SIGKILL, "
          f"{(min(first.values()) - renewed).total_seconds():.2f} s after its last renewal "
          f"(Lease {LEASE:g} s, retry {RETRY:g} s)")
    for name, at in first.items():
        # safety: not before the Lease could expire (the sharder counts from when it saw the renewal, no earlier)
        assert (at - renewed).total_seconds() >= LEASE, f"{name} moved {at - renewed} after the last renewal"
        assert resumed[name] <= 3 * LEASE, f"{name} took {resumed[name]:.2f} s to resume"
    await members_seen(ring.reconcilers, "tatara-reconciler", 2)

    # the return: the same member name joins again (once its dead holder's Lease expires), its Processes drain
    # back to it, and another SIGHUP has them written there
    ring.start(victim)
    await wait_ready([ring.reconcilers[victim]], 90.0)
    await members_seen(ring.reconcilers, "tatara-reconciler", 3)

    async def moved_back() -> bool:
        listed = msgspec.json.decode(await kc.list(PROCESSES, WORK_NS))["items"]
        shard = {p["metadata"]["name"]: (p["metadata"].get("labels") or {}) for p in listed}
        return all(shard[n].get("shard.tatara.pleme.io/tatara-reconciler") == owner3[n]
                   and "drain.tatara.pleme.io/tatara-reconciler" not in shard[n] for n in names)

    await wait_for(moved_back, timeout=TIMEOUT, interval=0.2, what=f"{victim}'s Processes labelled for it again")
    before = await sighup(kc, names)
    await attested(kc, names, after=before)
    writers = status_writers(ring.audit(), "processes", WORK_NS)
    expected = {n: blocks([(killed, m) for m in (owner3[n], owner2[n], owner3[n])]) for n in names}
    assert {n: blocks(writers[n]) for n in names} == expected
    handovers = sum(v for d in ring.reconcilers.values() if d.proc.poll() is None
                    for _, v in samples(d, "controller_sharding_handovers_total"))
    assert handovers >= len(moved)  # the way back went through the survivors' hand-over, not a relabel


async def test_pools_and_allocations_move_by_namespace_and_bind_exclusively(ring: Ring, kc: KubeClient) -> None:
    await members_seen(ring.pools, "tatara-pool-reconciler", 3)
    owner = {ns: documented_pick(ns, POOLERS) for ns in POOL_NAMESPACES}
    for ns in POOL_NAMESPACES:
        await kc.create(EPHEMERAL_POOLS, pool_doc("warm", 2), ns)
    for ns in POOL_NAMESPACES:
        await wait_free(kc, ns, "warm", 2)
        for name in ("a1", "a2"):
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "warm", ns), ns)

    async def bound(ns: str, names: tuple[str, ...]) -> dict[str, str] | None:
        got = {n: (await read(kc, EPHEMERAL_ALLOCATIONS, n, ns)).get("status") or {} for n in names}
        if any(s.get("phase") != "Bound" for s in got.values()):
            return None
        return {n: s["assignedProcess"]["name"] for n, s in got.items()}

    for ns in POOL_NAMESPACES:
        members = await wait_for(lambda ns=ns: bound(ns, ("a1", "a2")), timeout=TIMEOUT, interval=0.2,  # type: ignore[misc]
                                 what=f"the allocations of {ns} Bound")
        assert len(set(members.values())) == 2, members  # exclusive

    events = ring.audit()
    for ns in POOL_NAMESPACES:
        pools = status_writers(events, "ephemeralpools", ns)
        allocations = status_writers(events, "ephemeralallocations", ns)
        assert {n: blocks(w) for n, w in {**pools, **allocations}.items()} == {
            "warm": [owner[ns]], "a1": [owner[ns]], "a2": [owner[ns]]}, ns

    # the death of the member owning the most namespaces: a new allocation there binds once they moved
    victim = max(POOLERS, key=lambda m: sum(o == m for o in owner.values()))
    (ns, *_) = [n for n in POOL_NAMESPACES if owner[n] == victim]
    survivors = [m for m in POOLERS if m != victim]
    await kc.create(EPHEMERAL_POOLS, pool_doc("spare", 1), ns)
    await wait_free(kc, ns, "spare", 1)
    killed = datetime.now().astimezone()
    ring.kill(victim)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("late", "spare", ns), ns)
    await wait_for(lambda: bound(ns, ("late",)), timeout=TIMEOUT, interval=0.2, what=f"late Bound in {ns}")
    late = status_writers(ring.audit(), "ephemeralallocations", ns)["late"]
    assert blocks(late) == [documented_pick(ns, survivors)]
    print(f"an allocation created after {victim} died was first written "
          f"{(late[0][0] - killed).total_seconds():.2f} s after the death (Lease {LEASE:g} s)")
    held = await member_leases(kc)
    assert held[victim], "its Lease is still held by the dead process: nothing released it"
