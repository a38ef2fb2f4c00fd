"""reconciler.controller: which object a decision is made on, what reaches the executor, and what comes back.

The informer and the executor are fakes, the API server is tests/support/fake_api.py; the decision is the real
phase machine. The executor writes the status and answers its resourceVersion, as the real one does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import pytest

from reconciler.controller import (
    ChildObject,
    ProcessReconciler,
    RoutingChildObject,
    claim_apps,
    claims_moved,
    route_gone,
    stable_hosts,
)
from reconciler.decision import Decision
from reconciler.executor import Executor
from reconciler.pid import PidRefused
from shared.domain.api.codec import convert, to_wire
from shared.domain.api.process import Process
from shared.domain.api.table import ProcessTable
from shared.domain.resources import PROCESSES
from shared.kube.controller import Request, Result
from shared.kube.expectations import LAG_REQUEUE_SECONDS
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import as_json
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.anyio

FIN = "tatara.pleme.io/process-finalizer"


def process(phase: str, rv: str, **status: Any) -> Process:
    return convert({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": rv, "finalizers": [FIN],
                     "generation": 1},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"flux": {"gitRepository": "repo", "path": "./app"}}},
        "status": {"phase": phase, "phaseSince": "2025-06-01T11:59:00Z", "observedGeneration": 1, **status},
    }, Process)


class FakeInformer:
    """A cache holding fixed Processes (what the reconciler reads of an informer)."""

    def __init__(self, *objects: Process) -> None:
        self.objects = {f"{o.metadata.namespace}/{o.metadata.name}": o for o in objects}

    def add_indexer(self, name: str, index: Callable[[Process], Iterable[str]]) -> None:
        pass

    def add_handler(self, handler: Callable[..., None]) -> None:
        pass

    def get(self, key: str) -> Process | None:
        return self.objects.get(key)

    def by_index(self, name: str, value: str) -> list[Process]:
        return []

    def keys(self) -> list[str]:
        return list(self.objects)

    def __len__(self) -> int:
        return len(self.objects)


@dataclass
class FakeExecutor:
    """Records what it is asked to execute and, as the real executor does, writes the decision's status
    on ``api`` (a merge patch of ``/status``, guarded by ``guard``) and answers the resourceVersion that write
    left (None: no status write); raises ``error`` instead when set."""

    api: FakeApi = field(default_factory=FakeApi)
    done: list[tuple[Process, Decision, str | None]] = field(default_factory=list)
    error: Exception | None = None
    patches_before: list[int] = field(default_factory=list)
    """How many merge patches ``api`` had answered when each decision was executed."""

    async def execute(self, process: Process, decision: Decision, *, guard: str | None = None) -> str | None:
        self.done.append((process, decision, guard))
        self.patches_before.append(len(finalizer_patches(self.api)))
        if self.error is not None:
            raise self.error
        if decision.status is None:
            return None
        patch: dict[str, Any] = {"status": as_json(decision.status)}
        if guard is not None:
            patch["metadata"] = {"resourceVersion": guard}
        written = await self.api.merge_patch(PROCESSES, process.metadata.name or "", patch,
                                             process.metadata.namespace, subresource="status")
        version: str = msgspec.json.decode(written)["metadata"]["resourceVersion"]
        return version


def finalizer_patches(api: FakeApi) -> list[Any]:
    """The bodies of the merge patches of the Process itself (the finalizer writes), in order."""
    return [c.body for c in api.calls_of("merge_patch") if c.subresource is None]


def stored(api: FakeApi, cached: Process) -> Process:
    """``cached`` as ``api`` now stores it (at ``cached``'s own resourceVersion)."""
    return convert(api.seed(PROCESSES, to_wire(cached)), Process)


def reconciler(cached: Process, executor: FakeExecutor,
               allocate: Callable[[Process], str] | None = None) -> tuple[ProcessReconciler, FakeInformer]:
    """The reconciler over a cache holding ``cached``, which ``executor.api`` stores too."""
    async def allocate_pid(p: Process) -> str:
        assert allocate is not None, "no PID expected"
        return allocate(p)

    informer = FakeInformer(stored(executor.api, cached))
    return ProcessReconciler(executor.api, cast(Informer[Process], informer), cast(Executor, executor),
                             allocate_pid), informer


REQUEST = Request("ns", "p")


async def test_a_decision_that_allocates_a_pid_is_made_on_the_cache_and_guarded_by_it() -> None:
    executor = FakeExecutor()
    r, informer = reconciler(process("Forking", "5"), executor, allocate=lambda p: "me.7")
    result = await r.reconcile(REQUEST)
    assert executor.api.calls_of("get") == []
    ((basis, decision, guard),) = executor.done
    assert (basis, guard) == (informer.get("ns/p"), "5")
    status = as_json(decision.status)
    assert status["pid"] == "me.7"
    # Execing needs no wait here: folded into the same pass, one status write (docs/behaviour.md#folded-phases)
    assert status["phase"] == "Running"
    assert [(t.source.value, t.target.value) for t in decision.transitions] == [("Forking", "Execing"),
                                                                                ("Execing", "Running")]
    assert [e.reason for e in decision.events] == ["PhaseExecing", "PhaseRunning"]
    assert [m.kind for m in decision.apply] == ["Kustomization"]
    assert result == Result.after(5.0)  # Running's SHORT


def without_finalizer(rv: str) -> Process:
    return convert({"metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": rv},
                    "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                             "intent": {"flux": {"gitRepository": "repo", "path": "./app"}}}}, Process)


async def test_the_finalizer_patch_answer_is_the_basis_of_the_guarded_write() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(without_finalizer("3"), executor, allocate=lambda p: "seph.1")
    await r.reconcile(REQUEST)
    assert executor.api.calls_of("get") == []
    ((basis, decision, guard),) = executor.done
    assert basis.metadata.finalizers == [FIN]  # the patch's answer, not the cached "3"
    assert basis.metadata.resource_version == guard != "3"
    assert as_json(decision.status)["phase"] == "Running"
    assert [e.reason for e in decision.events] == ["PhaseForking", "PhaseExecing", "PhaseRunning"]
    live = executor.api.object(PROCESSES, "p", "ns")
    assert live is not None
    assert live["status"]["phase"] == "Running"  # the write guarded by the answer's version was accepted


async def test_a_refused_pid_executes_the_refusal_instead() -> None:
    executor = FakeExecutor()

    def refuse(p: Process) -> str:
        raise PidRefused("PID depth 2 exceeds ProcessTable maxDepth 1 (parent seph.1)")

    r, _ = reconciler(process("Forking", "5"), executor, allocate=refuse)
    result = await r.reconcile(REQUEST)
    ((_, decision, guard),) = executor.done
    assert as_json(decision.status)["message"] == "PID depth 2 exceeds ProcessTable maxDepth 1 (parent seph.1)"
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "PidRefused")]
    assert guard == "5"
    assert result == Result.after(1.0)


async def test_a_conflicting_guarded_write_decides_again_after_a_tick() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(process("Forking", "5"), executor, allocate=lambda p: "me.7")
    executor.api.seed(PROCESSES, {**to_wire(process("Forking", "6")), "metadata": {
        **to_wire(process("Forking", "6"))["metadata"], "labels": {"moved": "on"}}})  # another writer, after the cache
    result = await r.reconcile(REQUEST)
    assert result == Result.after(1.0)
    assert len(executor.done) == 1
    assert [c.verb for c in executor.api.calls] == ["merge_patch"]  # the guarded status write, refused with 409


async def test_a_cached_decision_needs_no_live_read_and_no_guard() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(process("Zombie", "5"), executor)
    await r.reconcile(REQUEST)
    ((_, decision, guard),) = executor.done
    assert executor.api.calls_of("get") == []
    assert guard is None
    assert as_json(decision.status)["phase"] == "Reaped"


async def test_the_cache_behind_our_own_status_write_is_not_decided_on() -> None:
    # docs/runtime.md#own-writes: a pass on a cache older than the last status write would redo it
    executor = FakeExecutor()
    r, informer = reconciler(process("Zombie", "5"), executor)
    await r.reconcile(REQUEST)
    assert len(executor.done) == 1
    live = executor.api.object(PROCESSES, "p", "ns")
    assert live is not None
    assert live["status"]["phase"] == "Reaped"
    written = live["metadata"]["resourceVersion"]
    assert int(written) > 5

    # the watch has not delivered the write yet: the cache still shows version 5
    assert await r.reconcile(REQUEST) == Result(requeue_after=LAG_REQUEUE_SECONDS, urgent=True)
    assert len(executor.done) == 1

    # once it shows our write, the next pass decides on it (Reaped: releases the finalizer)
    informer.objects["ns/p"] = convert(live, Process)
    assert await r.reconcile(REQUEST) == Result.done()
    (basis, decision, _) = executor.done[-1]
    assert (len(executor.done), basis.phase.value, decision.released) == (2, "Reaped", True)
    assert finalizer_patches(executor.api) == [{"metadata": {"finalizers": [], "resourceVersion": written}}]


async def test_reaped_releases_the_finalizer_after_the_decision_is_executed() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(process("Reaped", "5"), executor)
    result = await r.reconcile(REQUEST)
    ((_, decision, _),) = executor.done
    assert decision.released
    assert finalizer_patches(executor.api) == [{"metadata": {"finalizers": [], "resourceVersion": "5"}}]
    assert result == Result.done()


async def test_a_process_gone_from_the_cache_is_done() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(process("Running", "5"), executor)
    assert await r.reconcile(Request("ns", "other")) == Result.done()
    assert executor.done == []


async def test_the_finalizer_goes_on_before_the_first_decision_is_executed() -> None:
    executor = FakeExecutor()
    r, _ = reconciler(without_finalizer("3"), executor, allocate=lambda p: "seph.1")
    await r.reconcile(REQUEST)
    assert finalizer_patches(executor.api) == [{"metadata": {"finalizers": [FIN], "resourceVersion": "3"}}]
    assert executor.patches_before == [1]  # the guarded finalizer patch came first
    ((_, decision, _),) = executor.done
    assert as_json(decision.status)["phase"] == "Running"


def table(claims: dict[str, Any] | None, *, rv: str = "1") -> ProcessTable:
    status = {"claims": claims} if claims is not None else {"processCount": 3}
    return convert({"metadata": {"name": "proc", "resourceVersion": rv}, "status": status}, ProcessTable)


HOLDS_A = {"pleme-dev/api": {"holder": "ns/a", "pid": "a.1", "grantedAt": "2026-01-01T00:00:00Z", "priority": 0}}
HOLDS_B = {"pleme-dev/api": {"holder": "ns/b", "pid": "b.1", "grantedAt": "2026-01-01T00:01:00Z", "priority": 0}}


@pytest.mark.parametrize(
    ("event", "old", "new", "kept"),
    [
        (WatchEventType.ADDED, None, table(HOLDS_A), True),
        (WatchEventType.MODIFIED, table(HOLDS_A), table(HOLDS_B, rv="2"), True),
        (WatchEventType.MODIFIED, table(HOLDS_A), table(HOLDS_A, rv="2"), False),
        (WatchEventType.MODIFIED, table(None), table(None, rv="2"), False),
        (WatchEventType.MODIFIED, table(HOLDS_A), table(None, rv="2"), True),
        (WatchEventType.DELETED, table(HOLDS_A), table(HOLDS_A), True),
    ],
    ids=[
        "a new table wakes the bidders",
        "a transfer wakes the bidders",
        "a counts write that keeps the claims is dropped",
        "a table without claims changing only its counts is dropped",
        "claims vacated wake the bidders",
        "a deleted table wakes the bidders",
    ],
)
def test_claims_moved(event: WatchEventType, old: ProcessTable | None, new: ProcessTable, kept: bool) -> None:
    assert claims_moved(event, old, new) is kept


# ── make after break: the routing caches by host (docs/behaviour.md#handing-a-stable-name-over) ──

def routing_child(form: str, spec: dict[str, Any]) -> RoutingChildObject:
    return msgspec.convert({"metadata": {"name": "c", "labels": {"tatara.pleme.io/routing-form": form}},
                            "spec": spec}, RoutingChildObject)


@pytest.mark.parametrize(
    ("child", "hosts"),
    [
        (routing_child("stable", {"rules": [{"host": "api.c.l.d"}]}), ["api.c.l.d"]),
        (routing_child("stable", {"endpoints": [{"dnsName": "api.c.l.d"}]}), ["api.c.l.d"]),
        (routing_child("instance", {"rules": [{"host": "api.x.c.l.d"}]}), []),
        (msgspec.convert({"metadata": {"labels": {"tatara.pleme.io/routing-form": "stable"}}}, ChildObject), []),
    ],
    ids=["a stable Ingress by its rules' hosts", "a stable DNSEndpoint by its names",
         "an instance child is not indexed", "a child cached without its spec is not indexed"],
)
def test_stable_hosts(child: ChildObject, hosts: list[str]) -> None:
    assert stable_hosts(child) == hosts


def test_claim_apps_are_the_apps_of_a_stable_name_bidder() -> None:
    def bidder(claim: bool) -> Process:
        return convert({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "r", "path": "./a"}},
            "routing": {"hostnames": [{"app": "web"}, {"app": "api"}, {"app": "web", "instance": "x"}],
                        "backend": {"service": "s", "port": 80}, "stableNameClaim": claim}}}, Process)

    assert claim_apps(bidder(True)) == ["api", "web"]
    assert claim_apps(bidder(False)) == []


SERVING = routing_child("stable", {"rules": [{"host": "api.c.l.d"}]})
ELSEWHERE = routing_child("stable", {"rules": [{"host": "web.c.l.d"}]})


@pytest.mark.parametrize(
    ("event", "old", "new", "kept"),
    [(WatchEventType.DELETED, SERVING, SERVING, True), (WatchEventType.ADDED, None, SERVING, False),
     (WatchEventType.MODIFIED, SERVING, SERVING, False), (WatchEventType.MODIFIED, SERVING, ELSEWHERE, True)],
    ids=["deleted", "added", "changed, same hosts", "changed to serve another host: the old host is free"],
)
def test_only_a_routing_child_freeing_a_host_wakes_the_other_bidders(
    event: WatchEventType, old: ChildObject | None, new: ChildObject, kept: bool
) -> None:
    assert route_gone(event, old, new) is kept
