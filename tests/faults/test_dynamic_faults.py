"""Dynamic sharding under faults (docs/architecture.md#dynamic-sharding), then the fault tier's invariants and two
more: every object sits with the member the documented hash picks, and no object's status was written by two members
at overlapping times.

Runs three members of each binary as subprocesses (``--sharding=dynamic --shard-name=<member>``, every namespace
watched, Leases of 4 s with a 3 s renew deadline and a 1 s retry period), each member authenticating as a user of its
own (``tatara-<member>``, in ``system:masters`` and :data:`INSTANCES`), and the Flux stand-in in-process, on a plane of
this module's own whose audit log records those users' writes (:data:`AUDIT_POLICY`). The burst puts in each of three
namespaces a pool of 2, three Processes and two allocations of that pool: pools and allocations are hashed by their
namespace, Processes by ``<namespace>/<name>`` (a bound pool member, ephemeral from then on, by its chart's group).
From the burst's start until the last fault is over, a seeded Process is sent SIGHUP every 0.3–0.9 s (its member
writes its status through Reconverging back to Attested), so objects are being written while they move.

Faulted, in a seeded order, three at seeded points of the burst and the fourth a seeded 0.5–3 s after it:

- SIGKILL of the reconciler ring's sharder (the member holding the Lease ``tatara-reconciler-sharder``), replaced at
  once by a member of a fresh name, as a Deployment replaces a pod;
- the same for the pool ring's sharder (``tatara-pool-reconciler-sharder``);
- SIGKILL of a seeded member of a seeded ring (one that has objects, when one has), started again under the same
  ``--shard-name`` once none of the ring's objects is labelled for it any more, so its objects drain back to it;
- a kube-apiserver restart (members that lose their Lease meanwhile exit and are started again, same name).

Checked from the API once the members converged: the tier's invariants in each namespace (tests/faults/harness.py:
nothing lost, PIDs unique and below ``nextSequence``, bindings exclusive, one Flux child per Process); every Process,
pool and allocation labelled ``shard.tatara.pleme.io/<ring>=<member>`` for the member the documented rendezvous hash
(:func:`tests.unit.kube.test_sharding.documented_pick`) picks for its hash key among the members running at the end,
and no ``drain.tatara.pleme.io/<ring>`` label left; and, from the audit log, that no object's status had two writers
at once.

**The overlap check.** A member owns an object from when the sharder labels it for the member until the member gives
it up, and only the owner may write the object's status. There are two ways to give an object up, and the audit log
and the harness see both:

- a hand-over: the member's own ``patch`` of the object removing its shard label (the audit policy records member
  patches of the objects themselves with their bodies, ``Request`` level);
- its death: every process of that member name that could have made the write has exited (SIGKILLed by the test, or
  ended by itself; :attr:`tests.faults.harness.Binary.ended`). A SIGKILLed member stops at once; one that loses its
  Lease stops working at its renew deadline and exits at once, a second before its Lease can expire on the sharder's
  clock (a process lingering longer than that would be reported here, though it writes nothing more).

So for each object, take its status writes (``processes/status``, ``ephemeralpools/status``,
``ephemeralallocations/status``, successful, by ``requestReceivedTimestamp``) in time order. Wherever the writer
changes, X at ``t_x`` then Y at ``t_y``, X must have given the object up in between: a hand-over by X received in
``(t_x, t_y)``, or every process of X started before ``t_x`` ended before ``t_y``. Otherwise Y wrote while X still
owned the object. Correct runs pass: the sharder labels Y only after X's hand-over, which X makes in the worker holding
the key once its reconciles of it ended (so after ``t_x``), or once X is dead. The check is stricter than "X never
writes again after Y's first write unless Y gave the object up in between": X writing after Y (``X…Y…X``) contains a
change Y→X, so it fails unless Y gave up in between; and a change X→Y where X had not given up fails even if X writes
no more. Only writes that landed count: a write the API server refused (a guarded one, 409) changed nothing and is
not seen. ``test_the_overlap_check_...`` runs the check on made-up histories; with the hand-over skipped in a
throwaway copy of the product (the sharder relabelling a live member's object at once) this test failed on it with
seeds 1, 2 and 3.

Only the faults' timing and the SIGHUPs' are seeded sleeps; every wait for an outcome is a condition with a deadline.
The seed is printed, and ``TATARA_FAULT_SEED=<seed>`` repeats the run's choices.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from shared.domain.annotations import SIGNAL
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import NAMESPACES, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.faults import harness
from tests.faults.conftest import SEED, private_plane
from tests.faults.harness import Binaries, Binary, Fault
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tests.unit.kube.test_sharding import documented_pick
from tools.controlplane import LocalControlPlane
from tools.controlplane.audit import parse_events

pytestmark = pytest.mark.anyio

RINGS = {"reconciler": "tatara-reconciler", "pool": "tatara-pool-reconciler"}
"""Each binary's ring by harness role: ``--shard-ring`` defaults to the binary's Lease name."""
KINDS = {"reconciler": (PROCESSES,), "pool": (EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS)}
"""The objects each ring assigns."""
PREFIX = {"reconciler": "r", "pool": "p"}
"""Member names: ``r0``, ``r1``, … and ``p0``, ``p1``, …; a replacement takes the next number."""
MEMBERS = 3
TIMING = ("--leader-election-lease-duration=4", "--leader-election-renew-deadline=3",
          "--leader-election-retry-period=1")
INSTANCES = "tatara:instances"
"""The group every member's user is in, which the audit policy records."""
OBJECTS = [resource.plural for resource in (PROCESSES, EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS)]
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": [INSTANCES], "verbs": ["update", "patch"],
         "resources": [{"group": "tatara.pleme.io", "resources": [f"{plural}/status" for plural in OBJECTS]}]},
        {"level": "Request", "userGroups": [INSTANCES], "verbs": ["patch"],
         "resources": [{"group": "tatara.pleme.io", "resources": OBJECTS}]},
        {"level": "None"},
    ],
}
"""The members' status writes (who, when), and their patches of the objects themselves with the patch (a hand-over
removes the shard label); nothing else."""
POOL_SIZE = 2
PROCESSES_PER_NAMESPACE = 3
ALLOCATIONS_PER_NAMESPACE = 2
PLACED = 60.0
"""Seconds the sharders get to label every object for its member among the final ones, once the objects settled."""
BACK = 90.0
"""Seconds a killed member's objects get to move to the others before it comes back (an API server restart meanwhile
takes half a minute on a busy machine)."""


def shard_label(role: str) -> str:
    return f"shard.tatara.pleme.io/{RINGS[role]}"


def drain_label(role: str) -> str:
    return f"drain.tatara.pleme.io/{RINGS[role]}"


def user(member: str) -> str:
    return f"tatara-{member}"


def member_of(binary: Binary) -> str:
    """The ``--shard-name`` a member runs under."""
    (name,) = [flag.removeprefix("--shard-name=") for flag in binary.extra if flag.startswith("--shard-name=")]
    return name


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """This module's plane writes the audit log of :data:`AUDIT_POLICY` (it replaces the tier's ``plane``, so the
    tier's ``admin``, ``ns`` and ``binaries`` run on it)."""
    with private_plane(tmp_path_factory, audit=True, audit_policy=AUDIT_POLICY) as audited:
        yield audited


@dataclass
class Members:
    """The members of both rings, each under a user of its own."""

    plane: LocalControlPlane
    binaries: Binaries
    named: dict[str, int]

    def start(self, role: str) -> Binary:
        """Start a member of ``role``'s ring under a fresh name (a fresh process under an old name: ``again()``)."""
        member = f"{PREFIX[role]}{self.named[role]}"
        self.named[role] += 1
        kubeconfig = self.plane.kubeconfig_for(user(member), ("system:masters", INSTANCES))
        return self.binaries.start(role, leader_elect=True, kubeconfig=kubeconfig,
                                   extra=("--sharding=dynamic", f"--shard-name={member}", "--watch-namespace=",
                                          *TIMING))

    def alive(self, role: str) -> list[str]:
        return sorted(member_of(b) for b in self.binaries.alive(role))


# ── where the documented hash puts each object ───────────────────────────────────────────────────────────────


def hash_key(role: str, obj: dict[str, Any]) -> str:
    """An object's hash key (docs/architecture.md#dynamic-sharding): a pool's or allocation's namespace; a Process's
    ``maxConcurrent`` group when it has one, else ``<namespace>/<name>``. A Process is in a group when its lifetime
    has exactly the ephemeral slot set (docs/behaviour.md#lifetime): by its trimmed ``nameOverride``, else its chart
    (#maxconcurrent), spelled ``name:<override>`` / ``chart:<chartRef>`` (reconciler/concurrency.py)."""
    meta = obj["metadata"]
    if role == "pool":
        return str(meta["namespace"])
    spec = obj.get("spec") or {}
    lifetime = spec.get("lifetime") or {}
    if lifetime.get("ephemeral") is not None and lifetime.get("permanent") is None:
        override = ((spec.get("identity") or {}).get("nameOverride") or "").strip()
        if override:
            return f"name:{override}"
        chart = ((spec.get("intent") or {}).get("aplicacao") or {}).get("chartRef")
        if chart:
            return f"chart:{chart}"
    return f"{meta['namespace']}/{meta['name']}"


async def ring_objects(kc: KubeClient, role: str, namespaces: Sequence[str]) -> list[tuple[Resource, dict[str, Any]]]:
    return [(resource, obj) for ns in namespaces for resource in KINDS[role]
            for obj in await harness.items(kc, resource, ns)]


async def labelled_for(kc: KubeClient, role: str, namespaces: Sequence[str], member: str) -> list[str]:
    """The objects of ``role``'s ring labelled for ``member``."""
    return [f"{resource.kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
            for resource, obj in await ring_objects(kc, role, namespaces)
            if (obj["metadata"].get("labels") or {}).get(shard_label(role)) == member]


async def check_placement(kc: KubeClient, members: Members, namespaces: Sequence[str], *, note: str) -> str:
    """Wait until every object is labelled for the member the documented hash picks among the members running now,
    with no drain label; what was found."""
    off: list[str] = []

    async def placed() -> str | None:
        off.clear()
        alive = {role: members.alive(role) for role in RINGS}
        keys: list[str] = []
        for role in RINGS:
            for resource, obj in await ring_objects(kc, role, namespaces):
                labels = obj["metadata"].get("labels") or {}
                keys.append(hash_key(role, obj))
                want = documented_pick(keys[-1], alive[role])
                if labels.get(shard_label(role)) != want or drain_label(role) in labels:
                    ours = {k: v for k, v in labels.items() if k in (shard_label(role), drain_label(role))}
                    off.append(f"{resource.kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}: {ours} "
                               f"(the hash picks {want} among {alive[role]})")
        groups = sum(key.startswith(("name:", "chart:")) for key in keys)
        return None if off else f"{len(keys)} objects with their members {alive} ({groups} hashed by a group)"

    try:
        return await wait_for(placed, timeout=PLACED, interval=0.5, what="every object with its member")
    except TimeoutError:
        raise AssertionError(f"{note}: objects not where the documented hash puts them:\n" + "\n".join(off)) from None


# ── who wrote what, from the audit log ───────────────────────────────────────────────────────────────────────

Object = tuple[str, str, str]
"""``(resource plural, namespace, name)``."""
Write = tuple[datetime, str]
"""When the API server received a request, and the member whose user made it."""


@dataclass(frozen=True)
class Life:
    """One process of a member: when it was started and when it ended (None: running)."""

    member: str
    started: datetime
    ended: datetime | None


def received(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def status_writes(lines: Sequence[str], members: set[str]) -> dict[Object, list[Write]]:
    """Each object's successful status writes by a member, in time order."""
    out: dict[Object, list[Write]] = {}
    for e in parse_events(lines):
        plural, _, sub = e.resource.partition("/")
        member = e.user.removeprefix("tatara-")
        if sub == "status" and member in members and e.verb in ("patch", "update") and 200 <= e.code < 300:
            out.setdefault((plural, e.namespace, e.name), []).append((received(e.received), member))
    return {key: sorted(writes) for key, writes in out.items()}


def handovers(lines: Sequence[str], members: set[str]) -> dict[Object, list[Write]]:
    """Each object's hand-overs: a member's successful patch of the object removing its ring's shard label."""
    shard_labels = {shard_label(role) for role in RINGS}
    out: dict[Object, list[Write]] = {}
    for line in lines:
        doc = json.loads(line) if line.strip() else {}
        ref = doc.get("objectRef") or {}
        member = str((doc.get("user") or {}).get("username", "")).removeprefix("tatara-")
        labels = ((doc.get("requestObject") or {}).get("metadata") or {}).get("labels") or {}
        removed = any(key in labels and labels[key] is None for key in shard_labels)
        if (doc.get("verb") == "patch" and not ref.get("subresource") and member in members and removed
                and 200 <= int((doc.get("responseStatus") or {}).get("code", 0)) < 300):
            out.setdefault((ref.get("resource", ""), ref.get("namespace", ""), ref.get("name", "")), []).append(
                (received(doc["requestReceivedTimestamp"]), member))
    return out


def unexplained_changes(writes: Sequence[Write], handed: Sequence[Write], lives: Sequence[Life]) -> list[str]:
    """The changes of writer X→Y in ``writes`` (one object's, any order) that X's giving the object up does not
    explain: no hand-over by X received between the two writes, and not every process of X started before X's write
    ended before Y's (the module docstring)."""
    out = []
    for (at_x, x), (at_y, y) in itertools.pairwise(sorted(writes)):
        if x == y:
            continue
        handed_over = any(member == x and at_x < at < at_y for at, member in handed)
        could = [life for life in lives if life.member == x and life.started < at_x]
        died = bool(could) and all(life.ended is not None and life.ended < at_y for life in could)
        if not (handed_over or died):
            out.append(f"{x} wrote at {at_x:%H:%M:%S.%f}, {y} at {at_y:%H:%M:%S.%f}, and {x} had neither handed "
                       "it over nor died in between")
    return out


def check_no_overlap(lines: Sequence[str], binaries: Binaries, *, note: str) -> dict[Object, list[Write]]:
    """The module docstring's overlap check over the whole audit log; each object's status writes."""
    lives = [Life(member_of(b), b.started, b.ended) for b in binaries.every]
    members = {life.member for life in lives}
    writes = status_writes(lines, members)
    handed = handovers(lines, members)
    overlaps = {key: found for key, history in writes.items()
                if (found := unexplained_changes(history, handed.get(key, []), lives))}
    assert overlaps == {}, f"{note}: status written by two members at once:\n" + "\n".join(
        f"{plural} {ns}/{name}: {'; '.join(found)}\n  writers: "
        + ", ".join(f"{m} {at:%H:%M:%S.%f}" for at, m in writes[(plural, ns, name)])
        for (plural, ns, name), found in overlaps.items())
    changes = sum(a[1] != b[1] for history in writes.values() for a, b in itertools.pairwise(history))
    print(f"{note}: {sum(map(len, writes.values()))} status writes to {len(writes)} objects, {changes} changes of "
          f"writer, each after the previous writer gave the object up ({sum(map(len, handed.values()))} hand-overs)")
    return writes


def resumed(writes: dict[Object, list[Write]], member: str, killed: datetime) -> list[float]:
    """Seconds from ``member``'s SIGKILL to the next status write of each object it wrote last before it, where
    that next write is another member's."""
    out = []
    for history in writes.values():
        before = [m for at, m in history if at < killed]
        after = [(at, m) for at, m in history if at > killed]
        if before and before[-1] == member and after and after[0][1] != member:
            out.append((after[0][0] - killed).total_seconds())
    return sorted(out)


# ── the test ─────────────────────────────────────────────────────────────────────────────────────────────────


def burst_documents(namespaces: Sequence[str]) -> list[tuple[Resource, dict[str, Any]]]:
    """The pools, then the Processes, then the allocations, the namespaces taking turns."""
    def placed(doc: dict[str, Any], ns: str) -> dict[str, Any]:
        doc["metadata"]["namespace"] = ns
        return doc

    docs: list[tuple[Resource, dict[str, Any]]] = [
        (EPHEMERAL_POOLS, placed(pool_doc("pool", POOL_SIZE), ns)) for ns in namespaces]
    docs += [(PROCESSES, placed(flux_process(f"p{i}"), ns))
             for i in range(PROCESSES_PER_NAMESPACE) for ns in namespaces]
    docs += [(EPHEMERAL_ALLOCATIONS, placed(allocation_doc(f"a{i}", "pool", ns), ns))
             for i in range(ALLOCATIONS_PER_NAMESPACE) for ns in namespaces]
    return docs


def note(done: list[str]) -> str:
    return f"seed {SEED}, faults: {'; '.join(done)}"


async def test_dynamic_rings_under_kills_a_return_and_an_apiserver_restart(admin: KubeClient, ns: str,
                                                                          binaries: Binaries, plane: LocalControlPlane,
                                                                          rng: random.Random) -> None:
    namespaces = [ns, f"{ns}-b", f"{ns}-c"]
    procs = [f"p{i}" for i in range(PROCESSES_PER_NAMESPACE)]
    allocs = [f"a{i}" for i in range(ALLOCATIONS_PER_NAMESPACE)]
    for extra in namespaces[1:]:
        await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra}})
    members = Members(plane, binaries, dict.fromkeys(RINGS, 0))
    for role in RINGS:
        for _ in range(MEMBERS):
            members.start(role)

    done: list[str] = []
    killed: list[tuple[str, datetime]] = []
    returned = anyio.Event()
    stuck: list[str] = []  # the objects a SIGKILLed member still had when it was to come back

    def kill(victim: Binary) -> str:
        binaries.kill(victim)
        assert victim.ended is not None
        killed.append((member_of(victim), victim.ended))
        return member_of(victim)

    def kill_sharder(role: str) -> Fault:
        async def fault() -> str:
            lease = f"{RINGS[role]}-sharder"

            async def holder() -> tuple[str, Binary] | None:
                identity = await harness.leader_of(admin, ns, lease, binaries, role)
                found = binaries.leading_as(identity, role)
                return (identity, found[0]) if found else None

            identity, victim = await wait_for(holder, timeout=60, interval=0.2, what=f"the holder of {lease}")
            member = kill(victim)
            fresh = member_of(members.start(role))
            return f"SIGKILL {member}, holding {lease} as {identity}; {fresh} started in its place"
        return fault

    return_role = rng.choice(list(RINGS))
    return_draw = rng.random()

    async def come_back(victim: Binary, member: str) -> None:
        async def moved_away() -> bool:
            return not await labelled_for(admin, return_role, namespaces, member)

        try:
            await wait_for(moved_away, timeout=BACK, interval=0.2, what=f"no object labelled for {member}")
        except TimeoutError:
            stuck.extend(await labelled_for(admin, return_role, namespaces, member))
        else:
            binaries.again(victim)
            assert victim.ended is not None
            done.append(f"{member} back under its name {(datetime.now(UTC) - victim.ended).total_seconds():.1f} s "
                        "after its SIGKILL")
        returned.set()

    async def kill_and_return() -> str:
        async def running() -> dict[str, Binary] | None:  # the supervisor may be between two processes of each
            return {member_of(b): b for b in binaries.alive(return_role)} or None

        alive = await wait_for(running, timeout=60, interval=0.2, what=f"a running member of {RINGS[return_role]}")
        owning = [m for m in sorted(alive) if await labelled_for(admin, return_role, namespaces, m)]
        candidates = owning or sorted(alive)
        member = candidates[int(return_draw * len(candidates))]
        kill(alive[member])
        tg.start_soon(come_back, alive[member], member)
        return f"SIGKILL {member} ({'owning objects' if owning else 'no member owned any yet'}), to come back"

    async def restart_apiserver() -> str:
        began = anyio.current_time()
        await anyio.to_thread.run_sync(plane.restart_apiserver)
        return f"kube-apiserver restarted (ready again after {anyio.current_time() - began:.1f} s)"

    signals = random.Random(rng.random())  # its own source: its draws interleave with the burst's in time
    stop, stopped = anyio.Event(), anyio.Event()
    sighups: list[str] = []

    async def signaller() -> None:
        """SIGHUP a seeded Process every 0.3–0.9 s until ``stop``, so objects are being written while they move."""
        while not stop.is_set():
            await anyio.sleep(signals.uniform(0.3, 0.9))  # the workload's timing, seeded
            namespace, name = signals.choice(namespaces), signals.choice(procs)
            patch = {"metadata": {"annotations": {SIGNAL: "SIGHUP"}}}
            with contextlib.suppress(NotFound):  # not created yet
                await harness.retried(functools.partial(admin.merge_patch, PROCESSES, name, patch, namespace),
                                      what="a SIGHUP")
                sighups.append(f"{namespace}/{name}")
        stopped.set()

    faults: list[Fault] = [kill_sharder("reconciler"), kill_sharder("pool"), kill_and_return, restart_apiserver]
    rng.shuffle(faults)
    docs = burst_documents(namespaces)
    points = sorted(rng.sample(range(len(namespaces) + 1, len(docs)), 3))  # once the pools and a Process exist
    pause = rng.uniform(0.5, 3.0)
    async with anyio.create_task_group() as tg, harness.flux(admin, None, binaries, done):
        try:
            tg.start_soon(signaller)
            await harness.burst_with_faults(admin, ns, docs, rng, dict(zip(points, faults[:3], strict=True)), done)
            await anyio.sleep(pause)  # the last fault strikes while the burst converges
            done.append(f"+{pause:.2f} s after the burst: {await faults[3]()}")
            with anyio.fail_after(BACK + 10):  # the member killed to come back is back
                await returned.wait()
            assert stuck == [], f"{note(done)}: a dead member's objects still on it after {BACK:g} s: {stuck}"
            stop.set()
            with anyio.fail_after(70):  # a SIGHUP in flight lands first (retried() gives up after 60 s)
                await stopped.wait()
            done.append(f"{len(sighups)} SIGHUPs sent meanwhile")
            for namespace in namespaces:
                await harness.check_invariants(admin, namespace, procs, allocs, note=f"{note(done)} ({namespace})")
            print(f"{note(done)}: {await check_placement(admin, members, namespaces, note=note(done))}")
            lines = plane.audit_log.read_text().splitlines()
            writes = check_no_overlap(lines, binaries, note=note(done))
            for member, at in killed:
                delays = resumed(writes, member, at)
                if delays:
                    print(f"{member}'s objects written by another member {delays[0]:.2f}–{delays[-1]:.2f} s after "
                          f"its SIGKILL ({len(delays)} objects)")
        except (AssertionError, TimeoutError) as err:
            raise AssertionError(f"{note(done)}\n{err}\n{binaries.report()}") from None
        tg.cancel_scope.cancel()


# ── the check, on made-up histories ──────────────────────────────────────────────────────────────────────────


def test_the_overlap_check_flags_a_writer_that_had_not_given_the_object_up() -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)

    def at(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    lives = [Life("a", at(0), None), Life("b", at(0), None), Life("c", at(0), at(20)), Life("c", at(21), None)]
    # a hands over at 2, b writes from 3; b hands back at 6, a writes again at 7: two explained changes
    assert unexplained_changes([(at(1), "a"), (at(3), "b"), (at(5), "b"), (at(7), "a")],
                               [(at(2), "a"), (at(6), "b")], lives) == []
    # c dies at 20 and b takes over at 24; c comes back under its name (started at 21) after b's hand-over at 26
    assert unexplained_changes([(at(19), "c"), (at(24), "b"), (at(27), "c")], [(at(26), "b")], lives) == []
    # the hand-over skipped: b writes while a still owns it (a writes no more), and a…b…a
    (skipped,) = unexplained_changes([(at(1), "a"), (at(3), "b")], [], lives)
    assert skipped.startswith("a wrote at 00:00:01.000000, b at 00:00:03.000000")
    assert len(unexplained_changes([(at(1), "a"), (at(3), "b"), (at(4), "a")], [(at(2), "a")], lives)) == 1
    # a hand-over by the wrong member, or before the write, or a death of a process started after it, explains nothing
    assert len(unexplained_changes([(at(1), "a"), (at(3), "b")], [(at(2), "b"), (at(0.5), "a")], lives)) == 1
    assert len(unexplained_changes([(at(22), "c"), (at(23), "b")], [], lives)) == 1
