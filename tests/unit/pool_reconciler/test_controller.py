"""The allocation controller re-checks bind decisions against the live allocation (issue 6, scenario 7)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.controller import AllocationReconciler, could_be_bound, needs_live_read, waiting_set_changed
from pool_reconciler.decision import AllocationDecision, MemberPatch
from pool_reconciler.executor import Executor
from pool_reconciler.metrics import PoolMetrics
from shared.domain import annotations as ann
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.codec import to_wire
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.controller import Request
from shared.kube.events import EventRecorder
from shared.kube.informer import Informer
from shared.kube.informer import WatchEventType as InformerEvent
from tests.unit.pool_reconciler.test_allocation_decide import NOW, alloc, member, pool


def test_a_bind_or_an_adoption_is_checked_against_the_live_allocation() -> None:
    bound = {"status": {"phase": "Bound"}}
    claim = MemberPatch("m1", {}, "Bind", "7")
    assert needs_live_read(AllocationDecision("Bind", claim=claim, status=bound))
    assert needs_live_read(AllocationDecision("Bind", status=bound))  # adopting a member claimed for us


def test_other_decisions_need_no_extra_read() -> None:
    assert not needs_live_read(AllocationDecision("Queued", status={"status": {"phase": "Queued"}}))
    assert not needs_live_read(AllocationDecision("HeartbeatBound", requeue_after=30.0))
    assert not needs_live_read(AllocationDecision("Release", member_patch=MemberPatch("m1", {}, "Release")))


class FakeClient:
    """Answers GET of the allocation with ``live``; records every write."""

    def __init__(self, live: bytes) -> None:
        self.live = live
        self.writes: list[tuple[str, str]] = []

    async def get(self, resource: Resource, name: str, namespace: str | None = None, **_: Any) -> bytes:
        return self.live

    async def merge_patch(self, resource: Resource, name: str, body: Any, namespace: str | None = None,
                          **options: Any) -> bytes:
        self.writes.append(("patch", f"{resource.plural}/{name}/{options.get('subresource')}"))
        return b"{}"

    async def create(self, resource: Resource, body: Any, namespace: str | None = None, **_: Any) -> bytes:
        self.writes.append(("create", resource.plural))
        return b"{}"


def _reconciler(client: FakeClient, cached: EphemeralAllocation, members: list[Process]) -> AllocationReconciler:
    kc = cast(KubeClient, client)
    allocations: Informer[EphemeralAllocation] = Informer(kc, EPHEMERAL_ALLOCATIONS, EphemeralAllocation)
    pools: Informer[EphemeralPool] = Informer(kc, EPHEMERAL_POOLS, EphemeralPool)
    processes: Informer[Process] = Informer(kc, PROCESSES, Process)
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry, pools.objects, processes.objects, allocations.objects)
    executor = Executor(kc, EventRecorder(kc, "test", "test"), metrics)
    reconciler = AllocationReconciler(allocations, pools, processes, executor, clock=lambda: NOW)
    allocations._apply(InformerEvent.ADDED, "pools/alloc-1", cached)
    pools._apply(InformerEvent.ADDED, "pools/demo-pool", pool())
    for m in members:
        processes._apply(InformerEvent.ADDED, f"pools/{m.metadata.name}", m)
    return reconciler


@pytest.mark.anyio
async def test_a_stale_cache_after_our_own_bind_writes_nothing_again() -> None:
    claimed = member("m1", ephemeral=True, annotations={ann.ALLOCATION: "alloc-1", ann.REQUESTOR: "pools/alloc-1"})
    cached = alloc(status={"phase": "Queued", "message": "waiting"})
    live_doc = to_wire(alloc(status={"phase": "Bound", "message": "bound to m1",
                                     "assignedProcess": {"name": "m1", "namespace": "pools"},
                                     "boundPool": {"name": "demo-pool", "namespace": "pools"},
                                     "expiresAt": (NOW + timedelta(minutes=30)).isoformat()}))
    live_doc["metadata"]["resourceVersion"] = "2"
    client = FakeClient(msgspec.json.encode(live_doc))
    reconciler = _reconciler(client, cached, [claimed, member("m2")])
    assert needs_live_read(reconciler.decide(reconciler.observe(cached)))  # the cache alone would bind again

    await reconciler.reconcile(Request("pools", "alloc-1"))
    assert client.writes == []


@pytest.mark.anyio
async def test_an_up_to_date_cache_binds_as_decided() -> None:
    cached = alloc(status={"phase": "Queued", "message": "waiting"})
    live_doc = to_wire(cached)
    client = FakeClient(msgspec.json.encode(live_doc))
    reconciler = _reconciler(client, cached, [member("m1")])
    await reconciler.reconcile(Request("pools", "alloc-1"))
    assert client.writes[:2] == [("patch", "processes/m1/None"), ("patch", "ephemeralallocations/alloc-1/status")]


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
