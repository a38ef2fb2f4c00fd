"""What the fault tests share: the reconcilers as subprocesses, the workload, and the invariants.

The invariants are read from the API only, once the faults are over and the reconcilers were given a
deadline to converge (docs/behaviour.md#pids, #pool-membership, #exclusive-claim), from one consistent
view (:func:`converged`: a settled read counts only when a second read finds every object unchanged):

- every Process reached Attested, every allocation Bound, every pool Steady — nothing left stuck;
- PIDs are unique, and every sequence number a Process holds was handed out by the table (below its
  ``nextSequence``);
- each Process owns exactly one Flux child of its main kind (a Kustomization, or a member's HelmRelease),
  and every such child's owner exists;
- each Bound allocation names a member that exists, belongs to the pool its ``poolRef`` names and carries
  this allocation's annotation; no member is named by two allocations.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec

from shared.domain import annotations as ann
from shared.domain.resources import (
    EPHEMERAL_ALLOCATIONS,
    EPHEMERAL_POOLS,
    HELM_RELEASES,
    KUSTOMIZATIONS,
    PROCESS_TABLES,
    PROCESSES,
)
from shared.kube.api import KubeApi
from shared.kube.client import LEASES, KubeClient, Resource
from shared.kube.errors import ApiError, Conflict, NotFound
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tools.controlplane.cluster import free_port
from tools.processes import log_tail, stop_process_groups
from tools.standins.flux import FluxStandIn

ROOT = Path(__file__).resolve().parents[2]
MODULES = {"reconciler": "reconciler.main", "pool": "pool_reconciler.main"}
CONVERGE = 150.0
"""Seconds the reconcilers get to converge after the last fault."""

MAX_STARTS = 30
"""More starts than this in one test is a crash loop, not a fault being recovered from."""

LEASE_FLAGS = ["--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3",
               "--leader-election-retry-period", "0.5"]
"""Short leader-election timings, so a killed leader is replaced within seconds."""


@dataclass
class Binary:
    role: str
    proc: subprocess.Popen[bytes]
    log: Path
    leader_elect: bool = False
    extra: tuple[str, ...] = ()
    kubeconfig: Path | None = None
    """Credentials of its own (a user of its own), else the :class:`Binaries`' kubeconfig."""
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When it was started, on this host's clock (UTC)."""
    ended: datetime | None = None
    """When it was seen to have exited (SIGKILLed, or by itself), on this host's clock (UTC)."""

    def wait(self) -> int:
        """Wait for the process to exit; note when it did in :attr:`ended`; its exit code."""
        code = self.proc.wait()
        if self.ended is None:
            self.ended = datetime.now(UTC)
        return code


@dataclass
class Binaries:
    """The reconcilers of one test as subprocesses (each in its own session), watching ``namespace``."""

    kubeconfig: Path
    namespace: str
    logs: Path
    running: list[Binary] = field(default_factory=list)
    every: list[Binary] = field(default_factory=list)
    """Every binary this test started, the exited ones too, in start order."""
    started: Counter[str] = field(default_factory=Counter)
    _changed: anyio.Event | None = None
    """Set by :meth:`start` while :meth:`supervise` runs, so it watches the new binary too."""

    def start(self, role: str, *, leader_elect: bool = False, extra: Sequence[str] = (),
              kubeconfig: Path | None = None) -> Binary:
        """Start one ``role`` (``reconciler`` or ``pool``) replica; ``extra`` flags go last (a
        ``--table-status-interval`` among them replaces the tier's 0.5 s; any other repeated flag wins over the
        tier's, the last one counting); ``kubeconfig``: its own credentials instead of :attr:`kubeconfig`."""
        self.started[role] += 1
        args = ["--watch-namespace", self.namespace, "--controller-namespace", self.namespace,
                "--health-addr", f"127.0.0.1:{free_port()}", "--heartbeat-seconds", "5",
                f"--leader-elect={'true' if leader_elect else 'false'}"]
        if leader_elect:
            args += LEASE_FLAGS
        if role == "reconciler" and "--table-status-interval" not in extra:
            args += ["--table-status-interval", "0.5"]
        args += extra
        log = self.logs / f"{role}-{self.started[role]}.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        with open(log, "wb") as handle:
            proc = subprocess.Popen([sys.executable, "-m", MODULES[role], *args], cwd=ROOT, stdout=handle,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**env, "KUBECONFIG": str(kubeconfig or self.kubeconfig),
                                         "PYTHONUNBUFFERED": "1"})
        binary = Binary(role, proc, log, leader_elect, tuple(extra), kubeconfig)
        self.running.append(binary)
        self.every.append(binary)
        if self._changed is not None:
            self._changed.set()
        return binary

    async def supervise(self, restarts: list[str]) -> None:
        """Restart every binary that exits by itself, as the kubelet restarts a container (a binary that
        cannot reach the API server at start exits non-zero); each restart is noted in ``restarts``.
        Each binary is waited on (its exit wakes the supervisor; nothing is polled). Runs until cancelled."""
        watched: set[int] = set()
        async with anyio.create_task_group() as tg:
            while True:
                self._changed = anyio.Event()
                for binary in list(self.running):
                    if id(binary) not in watched:
                        watched.add(id(binary))
                        tg.start_soon(self._restart_on_exit, binary, restarts)
                await self._changed.wait()

    async def _restart_on_exit(self, binary: Binary, restarts: list[str]) -> None:
        code = await anyio.to_thread.run_sync(binary.wait, abandon_on_cancel=True)
        if binary not in self.running:
            return  # killed on purpose (:meth:`kill` takes it out of ``running`` as it reaps it)
        # a binary exits when the API server does not answer at its start: restart it once it answers again
        # (the kubelet's restart back-off does the same job), or it would only exit again at once
        await wait_for(self._api_ready, timeout=120, interval=0.2, what="the API server to answer /readyz")
        if binary not in self.running:
            return
        self.running.remove(binary)
        restarts.append(f"{binary.log.name} exited {code}, restarted")
        assert sum(self.started.values()) < MAX_STARTS, f"a crash loop:\n{self.report()}"
        self.again(binary)

    def again(self, binary: Binary) -> Binary:
        """A fresh process with ``binary``'s role, flags and credentials (a new identity), as a Deployment
        replaces a pod."""
        return self.start(binary.role, leader_elect=binary.leader_elect, extra=binary.extra,
                          kubeconfig=binary.kubeconfig)

    async def _api_ready(self) -> bool:
        try:
            async with await KubeClient.from_kubeconfig(self.kubeconfig) as client:
                await client.request("GET", "/readyz", request_timeout=2)
        except ApiError:
            return False
        return True

    def kill(self, binary: Binary) -> None:
        """SIGKILL ``binary`` (no shutdown, no lease release) and wait for it."""
        with contextlib.suppress(ProcessLookupError):  # it exited by itself a moment ago
            os.killpg(binary.proc.pid, signal.SIGKILL)
        binary.wait()
        if binary in self.running:  # else the supervisor took it out, to start it again
            self.running.remove(binary)

    def alive(self, role: str) -> list[Binary]:
        return [b for b in self.running if b.role == role and b.proc.poll() is None]

    def leading_as(self, identity: str, role: str) -> list[Binary]:
        """The running ``role`` binaries whose log says they lead a Lease as ``identity`` (one, or none)."""
        return [b for b in self.alive(role) if f"as {identity}" in b.log.read_text(errors="replace")]

    def leaders(self) -> dict[str, set[str]]:
        """Identity → every Lease (``namespace/name``) it became leader of, from the logs of every binary
        this test started, the killed ones' too (an identity is one process's: hostname and a random suffix)."""
        led: dict[str, set[str]] = {}
        for log in self.logs.glob("*.log"):
            for lease, identity in BECAME_LEADER.findall(log.read_text(errors="replace")):
                led.setdefault(identity, set()).add(lease)
        return led

    def stop_all(self) -> None:
        stop_process_groups([b.proc for b in self.running], 10)

    def report(self) -> str:
        """The tail of every log of this test, for a failure message."""
        state = {b.log.name: "running" if b.proc.poll() is None else f"exited {b.proc.returncode}"
                 for b in self.running}
        return "\n".join(f"--- {log.name} ({state.get(log.name, 'gone')}):\n{log_tail(log, 20)}"
                         for log in sorted(self.logs.glob("*.log")))


BECAME_LEADER = re.compile(r"became leader of lease (\S+/[^\s\"]+) as ([^\s\"]+)")
"""The line :class:`shared.kube.leader.LeaderElector` logs on taking a Lease: its ``namespace/name`` and the
identity it holds it as (also each binary's Events' ``reportingInstance``)."""


async def leader_of(kc: KubeClient, ns: str, lease: str, binaries: Binaries, role: str) -> str:
    """The identity holding ``lease`` once one of ``role``'s running replicas holds it."""
    async def holder() -> str | None:
        try:
            raw = await retried(lambda: kc.get(LEASES, lease, ns), what=f"the Lease {lease}")
            spec = msgspec.json.decode(raw).get("spec", {})
        except NotFound:  # no replica has campaigned yet
            return None
        identity: str | None = spec.get("holderIdentity")
        return identity if identity and binaries.leading_as(identity, role) else None

    return await wait_for(holder, timeout=60, interval=0.2, what=f"a leader of {lease}")


@asynccontextmanager
async def flux(kc: KubeClient, ns: str | None, binaries: Binaries, done: list[str]) -> AsyncIterator[None]:
    """The Flux stand-in (of ``ns``; None: every namespace), and the binaries' supervisor (restarts noted in
    ``done``), for the block."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(FluxStandIn(kc, namespace=ns).run)
        tg.start_soon(binaries.supervise, done)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


def transient(err: ApiError) -> bool:
    """An answer a restarting or paused API server gives (no answer, 429, 5xx): try the call again."""
    return err.status == 0 or err.status == 429 or err.status >= 500


async def retried(call: Callable[[], Awaitable[bytes]], *, what: str) -> bytes:
    """``call()``, tried again while the API server answers :func:`transient` errors (60 s at most)."""
    async def attempt() -> bytes | None:
        try:
            return await call()
        except ApiError as err:
            if transient(err):
                return None
            raise

    return await wait_for(attempt, timeout=60, interval=0.5, what=what)


async def items(kc: KubeApi, resource: Resource, ns: str | None) -> list[dict[str, Any]]:
    raw = await retried(lambda: kc.list(resource, ns), what=f"a LIST of {resource.plural}")
    listed: list[dict[str, Any]] = msgspec.json.decode(raw)["items"]
    return listed


def burst_documents(ns: str, processes: Sequence[str], allocations: Sequence[str],
                    *, pool_size: int) -> list[tuple[Resource, dict[str, Any]]]:
    """The pool, the Processes, the allocations, in creation order."""
    docs: list[tuple[Resource, dict[str, Any]]] = [(EPHEMERAL_POOLS, pool_doc("pool", pool_size))]
    docs += [(PROCESSES, flux_process(n)) for n in processes]
    docs += [(EPHEMERAL_ALLOCATIONS, allocation_doc(n, "pool", ns)) for n in allocations]
    return docs


async def create(kc: KubeApi, resource: Resource, body: dict[str, Any], ns: str) -> None:
    """Create ``body``, through a restarting API server (:func:`retried`); one that a lost answer did
    create already (409) is fine."""
    with contextlib.suppress(Conflict):
        await retried(lambda: kc.create(resource, body, ns), what=f"creating {resource.kind}")


Fault = Callable[[], Awaitable[str]]
"""Injects one fault; returns what it did, for the failure message."""


async def burst_with_faults(kc: KubeApi, ns: str, docs: Sequence[tuple[Resource, dict[str, Any]]], rng: random.Random,
                            faults: Mapping[int, Fault], done: list[str]) -> None:
    """Create ``docs`` in order with seeded gaps (0–0.3 s), each in ``ns`` unless it names a
    ``metadata.namespace`` of its own; before create number ``i`` run ``faults[i]`` and note what it did in
    ``done``."""
    for i, (resource, body) in enumerate(docs):
        if i in faults:
            done.append(f"before create {i}: {await faults[i]()}")
        await anyio.sleep(rng.uniform(0.0, 0.3))
        await create(kc, resource, body, body["metadata"].get("namespace") or ns)


def sequence(pid: str) -> int:
    """The table's sequence number in a PID (its last dot-separated segment)."""
    return int(pid.rsplit(".", 1)[1])


async def snapshot(kc: KubeApi, ns: str, pools: Sequence[str] = ("pool",)) -> dict[str, Any] | None:
    """The namespace's Processes, allocations and pools (by name), read one after the other (three
    requests, so not one instant); None while one of ``pools`` does not exist."""
    procs = {p["metadata"]["name"]: p for p in await items(kc, PROCESSES, ns)}
    allocs = {a["metadata"]["name"]: a for a in await items(kc, EPHEMERAL_ALLOCATIONS, ns)}
    found = {p["metadata"]["name"]: p for p in await items(kc, EPHEMERAL_POOLS, ns)}
    if not set(pools) <= set(found):
        return None
    return {"processes": procs, "allocations": allocs, "pools": found}


def settled(state: dict[str, Any], processes: Sequence[str], allocations: Sequence[str]) -> bool:
    """Every named Process Attested, every allocation Bound, every pool Steady, every member Attested."""
    procs: dict[str, dict[str, Any]] = state["processes"]
    allocs: dict[str, dict[str, Any]] = state["allocations"]
    return (all(procs.get(n, {}).get("status", {}).get("phase") == "Attested" for n in processes)
            and all(allocs.get(n, {}).get("status", {}).get("phase") == "Bound" for n in allocations)
            and all(p.get("status", {}).get("phase") == "Steady" for p in state["pools"].values())
            and all(p.get("status", {}).get("phase") == "Attested" for p in procs.values()))


def versions(state: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(kind, name) → resourceVersion`` of every object in ``state``."""
    out = {("Process", n): p["metadata"]["resourceVersion"] for n, p in state["processes"].items()}
    out |= {("EphemeralAllocation", n): a["metadata"]["resourceVersion"] for n, a in state["allocations"].items()}
    out |= {("EphemeralPool", n): p["metadata"]["resourceVersion"] for n, p in state["pools"].items()}
    return out


async def converged(kc: KubeApi, ns: str, processes: Sequence[str], allocations: Sequence[str],
                    pools: Sequence[str] = ("pool",)) -> dict[str, Any]:
    """Wait until every named Process is Attested, every allocation Bound and every pool (``pools`` among
    them) Steady, with every member Attested; return what was read, as one consistent view.

    One :func:`snapshot` is three reads at three instants, and the reconcilers may still be writing
    between them: a bind landing between the Process LIST and the allocation LIST (its claim on the
    member after the first, its ``Bound`` status before the second — the executor writes them in that
    order) reads as an allocation Bound to a member that does not carry its claim. So a settled
    snapshot is taken only when a second one, read right after it, finds the same objects at the same
    resourceVersions: each object then held its state from its first read to its second, and every
    first read came before every second one, so there is an instant at which all of them held it."""
    async def probe() -> dict[str, Any] | None:
        first = await snapshot(kc, ns, pools)
        if first is None or not settled(first, processes, allocations):
            return None
        again = await snapshot(kc, ns, pools)
        return first if again is not None and versions(again) == versions(first) else None

    return await wait_for(probe, timeout=CONVERGE, interval=0.5, what="every object in its expected phase")


async def check_invariants(kc: KubeApi, ns: str, processes: Sequence[str], allocations: Sequence[str],
                           *, note: str, pools: Sequence[str] = ("pool",)) -> dict[str, Any]:
    """The module docstring's invariants; ``note`` (the seed and the faults done) prefixes every failure.
    Returns the :func:`converged` view they were checked on."""
    state = await converged(kc, ns, processes, allocations, pools)
    procs: dict[str, dict[str, Any]] = state["processes"]

    everyone = await items(kc, PROCESSES, None)
    pids = [p["status"]["pid"] for p in everyone if p.get("status", {}).get("pid")]
    assert len(pids) == len(set(pids)), f"{note}: a PID is held twice: {sorted(pids)}"
    table: dict[str, Any] = msgspec.json.decode(await retried(lambda: kc.get(PROCESS_TABLES, "proc"),
                                                              what="the ProcessTable"))
    handed_out = table["spec"]["nextSequence"]
    beyond = sorted(p for p in pids if sequence(p) >= handed_out)
    assert beyond == [], f"{note}: PIDs the table never handed out (nextSequence {handed_out}): {beyond}"
    assert all(p["status"].get("pid") for p in procs.values()), f"{note}: a Process without a PID"
    # a number bumped by a reconciler killed before its status write is handed out but held by no one
    print(f"{note}: {len(pids)} PIDs held, {handed_out - 1} sequence numbers handed out")

    # a flux Process renders one Kustomization, a pool member (a chart) one HelmRelease
    children = [*await items(kc, KUSTOMIZATIONS, ns), *await items(kc, HELM_RELEASES, ns)]
    owners = Counter(ref["uid"] for c in children for ref in c["metadata"].get("ownerReferences", [])
                     if ref.get("controller"))
    uids = {p["metadata"]["uid"]: name for name, p in procs.items()}
    assert {uids[u]: n for u, n in owners.items() if u in uids and n != 1} == {}, f"{note}: not one child each"
    assert set(uids) - set(owners) == set(), f"{note}: Processes without their Flux child"
    assert set(owners) - set(uids) == set(), f"{note}: Flux children whose owner is gone"

    check_claims(state, note=note)
    return state


def check_claims(state: dict[str, Any], *, note: str) -> None:
    """Each Bound allocation of ``state`` (a :func:`converged` view) names a member that exists, belongs
    to the pool its ``poolRef`` names and carries this allocation's claim; no member is named twice; as
    many members are claimed as there are allocations."""
    procs: dict[str, dict[str, Any]] = state["processes"]
    allocs: dict[str, dict[str, Any]] = state["allocations"]
    assigned = Counter(a["status"]["assignedProcess"]["name"] for a in allocs.values())
    assert [m for m, n in assigned.items() if n > 1] == [], f"{note}: a member bound to two allocations"
    for name, alloc in allocs.items():
        member_name = alloc["status"]["assignedProcess"]["name"]
        member = procs.get(member_name)
        assert member is not None, f"{note}: {name} is bound to a Process that does not exist"
        annotations = member["metadata"].get("annotations", {})
        pool = alloc["spec"]["poolRef"]["name"]
        assert annotations.get(ann.POOL) == pool, f"{note}: {name}'s member is not its pool {pool}'s"
        claim = annotations.get(ann.ALLOCATION)
        assert claim == name, (f"{note}: {name}'s member {member_name} names another allocation "
                               f"({ann.ALLOCATION}: {claim!r})")
    holders = [p for p in procs.values() if p["metadata"].get("annotations", {}).get(ann.ALLOCATION)]
    assert len(holders) == len(allocs), f"{note}: members held {len(holders)} ≠ allocations {len(allocs)}"
