"""pool_reconciler.controller: finalizers through ``finalize`` (added first, removed once released), the
live re-read of a bind (one GET, decided again when the cache lags), and the wake-up mappings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.controller import (
    AllocationReconciler,
    PoolReconciler,
    could_be_bound,
    needs_live_read,
    waiting_set_changed,
)
from pool_reconciler.decision import AllocationDecision, MemberPatch, MemberWrite
from pool_reconciler.executor import Executor
from pool_reconciler.metrics import PoolMetrics
from pool_reconciler.patches import AllocationStatusPatch, annotate
from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.codec import convert, to_wire
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.manifests.batch import ObservedJob
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.controller import Request
from shared.kube.events import EventRecorder
from shared.kube.informer import Informer
from shared.kube.informer import WatchEventType as InformerEvent
from tests.unit.pool_reconciler.builders import NOW, alloc, demo_pool, member, pool, process
from tests.unit.pool_reconciler.fake_client import FakeClient

BOUND = AllocationStatusPatch(phase=AllocationPhase.BOUND)
T = TypeVar("T", EphemeralPool, EphemeralAllocation, Process)


def test_a_bind_or_an_adoption_is_checked_against_the_live_allocation() -> None:
    claim = MemberPatch("m1", annotate({}, resource_version="7"), MemberWrite.BIND)
    assert needs_live_read(AllocationDecision("Bind", claim=claim, status=BOUND))
    assert needs_live_read(AllocationDecision("Bind", status=BOUND))  # adopting a member claimed for us


def test_other_decisions_need_no_extra_read() -> None:
    assert not needs_live_read(AllocationDecision("Queued", status=AllocationStatusPatch(phase=AllocationPhase.QUEUED)))
    assert not needs_live_read(AllocationDecision("HeartbeatBound", requeue_after=30.0))
    release = MemberPatch("m1", annotate({ann.RETURN_TRIGGER: "true"}), MemberWrite.RELEASE)
    assert not needs_live_read(AllocationDecision("Release", member_patch=release))


def _executor(client: FakeClient) -> Executor:
    kc = client
    metrics = PoolMetrics(CollectorRegistry(), list, list, list)
    return Executor(kc, EventRecorder(kc, "test", "test"), metrics)


def _cache(informer: Informer[T], *objects: T) -> None:
    for obj in objects:
        informer.store.apply(InformerEvent.ADDED, obj)


def _allocations(client: FakeClient, cached: EphemeralAllocation, members: list[Process]) -> AllocationReconciler:
    kc = client
    allocations = Informer(kc, EPHEMERAL_ALLOCATIONS, EphemeralAllocation)
    pools = Informer(kc, EPHEMERAL_POOLS, EphemeralPool)
    processes = Informer(kc, PROCESSES, Process)
    reconciler = AllocationReconciler(allocations, pools, processes, _executor(client), clock=lambda: NOW)
    _cache(allocations, cached)
    _cache(pools, demo_pool())
    _cache(processes, *members)
    return reconciler


def _pools(client: FakeClient, cached: EphemeralPool, members: list[Process]) -> PoolReconciler:
    kc = client
    pools, processes = Informer(kc, EPHEMERAL_POOLS, EphemeralPool), Informer(kc, PROCESSES, Process)
    reconciler = PoolReconciler(pools, processes, Informer(kc, JOBS, ObservedJob), _executor(client), clock=lambda: NOW)
    _cache(pools, cached)
    _cache(processes, *members)
    return reconciler


def _stored(obj: EphemeralPool | EphemeralAllocation, rv: str = "1") -> dict[str, Any]:
    doc: dict[str, Any] = to_wire(obj)
    doc["metadata"]["resourceVersion"] = rv
    return doc


# ── the live read ────────────────────────────────────────────────────────────


@pytest.mark.anyio
async def test_a_stale_cache_after_our_own_bind_writes_nothing_again() -> None:
    claimed = member("m1", ephemeral=True, annotations={ann.ALLOCATION: "alloc-1", ann.REQUESTOR: "pools/alloc-1"})
    cached = alloc(status={"phase": "Queued", "message": "waiting"}, rv="1")
    live = alloc(status={"phase": "Bound", "message": "bound to m1",
                         "assignedProcess": {"name": "m1", "namespace": "pools"},
                         "boundPool": {"name": "demo-pool", "namespace": "pools"},
                         "expiresAt": (NOW + timedelta(minutes=30)).isoformat()})
    client = FakeClient({"ephemeralallocations/alloc-1": _stored(live, "2")})
    reconciler = _allocations(client, cached, [claimed, member("m2")])
    assert needs_live_read(reconciler.decide(reconciler.observe(cached)))  # the cache alone would bind again

    await reconciler.reconcile(Request("pools", "alloc-1"))
    assert client.writes == []
    assert [c.path for c in client.calls] == ["ephemeralallocations/alloc-1"]  # one GET


@pytest.mark.anyio
async def test_an_up_to_date_cache_binds_as_decided_guarding_the_status_with_its_version() -> None:
    cached = alloc(status={"phase": "Queued", "message": "waiting"}, rv="4")
    client = FakeClient({"ephemeralallocations/alloc-1": _stored(cached, "4")}, stored=(member("m1"),))
    reconciler = _allocations(client, cached, [member("m1")])
    await reconciler.reconcile(Request("pools", "alloc-1"))
    assert client.writes[:2] == [("merge_patch", "processes/m1"),
                                 ("merge_patch", "ephemeralallocations/alloc-1/status")]
    status = client.calls[2].body
    assert (status["status"]["phase"], status["metadata"]) == ("Bound", {"resourceVersion": "4"})
    assert [c.verb for c in client.calls].count("get") == 1


@pytest.mark.anyio
async def test_an_allocation_gone_since_it_was_cached_is_left_alone() -> None:
    client = FakeClient()
    reconciler = _allocations(client, alloc(rv="1"), [member("m1")])
    await reconciler.reconcile(Request("pools", "alloc-1"))
    assert client.writes == []


@pytest.mark.anyio
async def test_a_cache_behind_our_own_queued_write_writes_it_no_second_time() -> None:
    # issue 28: the finalizer's watch event woke a second pass on the cache of before the Queued write
    cached = alloc(finalizer=False, rv="1")
    client = FakeClient(stored=(cached,))
    reconciler = _allocations(client, cached, [])
    await reconciler.reconcile(Request("pools", "alloc-1"))
    status_writes = [c.body["status"]["phase"] for c in client.calls if c.path.endswith("/status")]
    assert status_writes == ["Queued"]
    again = await reconciler.reconcile(Request("pools", "alloc-1"))  # the cache still shows version 1
    assert [c.path for c in client.calls if c.path.endswith("/status")] == ["ephemeralallocations/alloc-1/status"]
    assert (again.requeue_after, again.urgent) == (0.05, True)
    live = client.object(EPHEMERAL_ALLOCATIONS, "alloc-1", "pools")
    assert live is not None
    assert (live["metadata"]["finalizers"], {k: live["status"].get(k) for k in ("phase", "message", "boundPool")}) == (
        [fin.ALLOCATION], {
        "phase": "Queued", "message": "waiting for a free member of pool demo-pool",
        "boundPool": {"name": "demo-pool", "namespace": "pools"}})
    _cache(reconciler.allocations, convert(live, EphemeralAllocation))
    settled = await reconciler.reconcile(Request("pools", "alloc-1"))
    assert [c.path for c in client.calls if c.path.endswith("/status")] == ["ephemeralallocations/alloc-1/status"]
    assert settled.requeue_after is not None
    assert settled.requeue_after > 0.05


@pytest.mark.anyio
async def test_a_pool_cache_behind_our_own_status_write_writes_it_and_its_warning_no_second_time() -> None:
    # issue 28: a pass woken by a member on the cache of before the MaxSizeReached write warned again
    cached = pool(1, max_size=1)
    cached = msgspec.structs.replace(cached, metadata=msgspec.structs.replace(cached.metadata, resource_version="1"))
    client = FakeClient({"ephemeralpools/test-pool": _stored(cached, "3")})
    held = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.REQUESTOR: "pools/x"})
    reconciler = _pools(client, cached, [held])
    await reconciler.reconcile(Request("pools", "test-pool"))
    again = await reconciler.reconcile(Request("pools", "test-pool"))  # the cache still shows version 1
    assert [c.path for c in client.calls if c.verb == "merge_patch"] == ["ephemeralpools/test-pool/status"]
    assert [c.body["reason"] for c in client.calls if c.verb == "create" and c.path.startswith("events/")] == [
        "MaxSizeReached"]
    assert (again.requeue_after, again.urgent) == (0.05, True)


# ── finalizers ───────────────────────────────────────────────────────────────


def _finalizer_writes(client: FakeClient, plural: str) -> list[list[str]]:
    """The ``metadata.finalizers`` lists written on ``plural`` objects, in order."""
    return [c.body["metadata"]["finalizers"] for c in client.calls
            if c.verb == "merge_patch" and c.path.startswith(plural) and "finalizers" in c.body.get("metadata", {})]


@pytest.mark.anyio
async def test_a_new_pool_gets_its_finalizer_before_anything_else() -> None:
    cached = pool(2, finalizer=False)
    client = FakeClient({"ephemeralpools/test-pool": _stored(cached)})
    await _pools(client, cached, []).reconcile(Request("pools", "test-pool"))
    assert _finalizer_writes(client, "ephemeralpools") == [[fin.POOL]]
    assert client.writes[0] == ("merge_patch", "ephemeralpools/test-pool")
    assert [verb for verb, _ in client.writes[1:3]] == ["create", "create"]


@pytest.mark.anyio
async def test_a_deleting_pool_keeps_its_finalizer_while_members_remain() -> None:
    cached = pool(deleting=True)
    client = FakeClient({"ephemeralpools/test-pool": _stored(cached)})
    await _pools(client, cached, [process("a")]).reconcile(Request("pools", "test-pool"))
    assert ("delete", "processes/a") in client.writes
    assert _finalizer_writes(client, "ephemeralpools") == []


@pytest.mark.anyio
async def test_a_deleting_pool_without_members_loses_its_finalizer() -> None:
    cached = pool(deleting=True)
    client = FakeClient({"ephemeralpools/test-pool": _stored(cached)})
    await _pools(client, cached, []).reconcile(Request("pools", "test-pool"))
    assert _finalizer_writes(client, "ephemeralpools") == [[]]


FINALIZER_ROWS = [
    ("a new waiting allocation gets the finalizer", alloc(finalizer=False), [[fin.ALLOCATION]]),
    ("a Released allocation does not get it", alloc(finalizer=False, status={"phase": "Released"}), []),
    ("a Failed allocation does not get it", alloc(finalizer=False, status={"phase": "Failed"}), []),
    ("a live Released allocation keeps it", alloc(status={"phase": "Released"}), []),
    ("a deleted Released allocation loses it", alloc(deleting=True, status={"phase": "Released"}), [[]]),
    ("a deleted allocation that never held a member loses it", alloc(deleting=True), [[]]),
    ("a deleted Bound allocation keeps it until its member is returned",
     alloc(deleting=True, status={"phase": "Bound", "message": "bound",
                                  "assignedProcess": {"name": "m1", "namespace": "pools"},
                                  "boundPool": {"name": "demo-pool", "namespace": "pools"}}), []),
    ("a deleted allocation loses it in the pass that writes Released",
     alloc(deleting=True, status={"phase": "Releasing", "message": "returning",
                                  "assignedProcess": {"name": "gone", "namespace": "pools"},
                                  "boundPool": {"name": "demo-pool", "namespace": "pools"}}), [[]]),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("cached", "written"), [r[1:] for r in FINALIZER_ROWS], ids=[r[0] for r in FINALIZER_ROWS])
async def test_the_allocation_finalizer(cached: EphemeralAllocation, written: list[list[str]]) -> None:
    client = FakeClient({"ephemeralallocations/alloc-1": _stored(cached)})
    mine = member("m1", ephemeral=True, annotations={ann.ALLOCATION: "alloc-1", ann.REQUESTOR: "pools/alloc-1"})
    await _allocations(client, cached, [mine]).reconcile(Request("pools", "alloc-1"))
    assert _finalizer_writes(client, "ephemeralallocations") == written


# ── wake-ups ─────────────────────────────────────────────────────────────────


def test_only_leaving_the_waiting_set_wakes_the_allocations_behind() -> None:
    pending, queued = alloc(), alloc(status={"phase": "Queued", "message": "waiting"})
    bound = alloc(status={"phase": "Bound", "message": "bound"})
    assert not waiting_set_changed(InformerEvent.ADDED, None, pending)  # the newest sits behind everyone
    assert not waiting_set_changed(InformerEvent.MODIFIED, pending, queued)
    assert not waiting_set_changed(InformerEvent.MODIFIED, queued, queued)
    assert waiting_set_changed(InformerEvent.MODIFIED, queued, bound)
    assert waiting_set_changed(InformerEvent.MODIFIED, queued, alloc(deleting=True))
    assert waiting_set_changed(InformerEvent.DELETED, queued, queued)


def test_only_a_free_looking_member_wakes_the_waiting_allocations() -> None:
    assert could_be_bound(member("m1"))
    assert not could_be_bound(member("m1", ephemeral=True, annotations={ann.ALLOCATION: "a"}))
    assert not could_be_bound(member("m1", phase="Running"))



def test_a_freed_member_wakes_only_as_many_waiting_allocations_as_there_are_free_members() -> None:
    """FIFO (docs/behaviour.md#fifo-bind): with two free members, the two oldest waiting allocations
    may bind; waking the others would only rewrite Queued (the O(n²) burst of issue 16)."""
    client = FakeClient()
    waiting = [alloc(f"w{i}", created=100 - i, status={"phase": "Queued", "message": "waiting"}) for i in range(5)]
    bound = alloc("b", created=200, status={"phase": "Bound", "assignedProcess": {"name": "m0", "namespace": "pools"}})
    reconciler = _allocations(client, bound, [member("m0", annotations={ann.ALLOCATION: "b"}), member("m1"),
                                              member("m2")])
    _cache(reconciler.allocations, *waiting)
    woken = [str(r) for r in reconciler._for_member(member("m1"))]
    assert woken == ["pools/w0", "pools/w1"]
    # an allocation leaving the queue out of turn wakes the same head, never itself
    gone = alloc("w0", created=100, status={"phase": "Failed"})
    _cache(reconciler.allocations, gone)
    assert [str(r) for r in reconciler._behind(gone)] == ["pools/w1", "pools/w2"]
