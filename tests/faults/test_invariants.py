"""The fault tier's invariant check itself (tests/faults/harness.py), against the real API server and no
reconciler: the binds are the pool reconciler's own decision (:func:`allocation_decide`) written by its
own executor (the claim on the member, then the allocation's ``Bound`` status), at chosen moments.

- a bind that lands while the check reads — its claim after the check's Process LIST, its status before
  its allocation LIST — is not judged from that torn read (the node tier once failed so:
  ``a1's member names another allocation``, with the state consistent a moment later);
- a state that really breaks the claim invariant is still caught.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.allocation_decide import allocation_decide
from pool_reconciler.decision import AllocationObserved
from pool_reconciler.executor import Executor
from pool_reconciler.members import member_process
from pool_reconciler.metrics import PoolMetrics
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.codec import decode
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.events import EventRecorder
from tests.faults.harness import check_claims, converged
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc
from tests.support.wrapped_api import WrappedApi

pytestmark = pytest.mark.anyio

ALLOCS = ["a0", "a1"]

T = TypeVar("T", Process, EphemeralAllocation)


class BindBetweenReads(WrappedApi):
    """A client for the check that runs ``bind`` once, right after the first Process LIST in ``ns``
    has been answered (and before its answer is handed back): the next reads see the bind, that one
    does not."""

    def __init__(self, kc: KubeClient, ns: str, bind: Callable[[], Awaitable[None]]) -> None:
        super().__init__(kc)
        self.ns, self.bind = ns, bind
        self.done = False

    async def list(self, resource: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None, continue_: str | None = None,
                   resource_version: str | None = None, request_timeout: float | None = None) -> bytes:
        raw = await super().list(resource, namespace, label_selector=label_selector, field_selector=field_selector,
                                 limit=limit, continue_=continue_, resource_version=resource_version,
                                 request_timeout=request_timeout)
        if resource == PROCESSES and namespace == self.ns and not self.done:
            self.done = True
            await self.bind()
        return raw


async def a_settled_pool(kc: KubeClient, ns: str) -> tuple[EphemeralPool, list[Process]]:
    """The pool "pool" (Steady) and its two members (Attested, Free), and the allocations of ALLOCS
    (no status yet) — as the burst leaves them just before the binds."""
    pool = decode(await kc.create(EPHEMERAL_POOLS, pool_doc("pool", 2), ns), EphemeralPool)
    await kc.merge_patch(EPHEMERAL_POOLS, "pool", {"status": {"phase": "Steady"}}, ns, subresource="status")
    for slot in range(2):
        member = member_process(pool, slot)
        await kc.create(PROCESSES, member.to_json(), ns)
        await kc.merge_patch(PROCESSES, member.metadata.name or "", {"status": {"phase": "Attested"}}, ns,
                             subresource="status")
    for name in ALLOCS:
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "pool", ns), ns)
    return pool, await listed(kc, PROCESSES, ns, Process)


async def listed(kc: KubeClient, resource: Resource, ns: str, model: type[T]) -> list[T]:
    """Every ``resource`` of ``ns``, decoded as the reconcilers' informers decode them, by name."""
    found = [decode(msgspec.json.encode(item), model)
             for item in msgspec.json.decode(await kc.list(resource, ns))["items"]]
    return sorted(found, key=lambda o: o.metadata.name or "")


async def bind(kc: KubeClient, ns: str, name: str) -> str:
    """Decide ``name``'s pass on the live objects and execute it as the pool reconciler does; the member
    it was bound to."""
    pools = (decode(await kc.get(EPHEMERAL_POOLS, "pool", ns), EphemeralPool),)
    allocations = tuple(await listed(kc, EPHEMERAL_ALLOCATIONS, ns, EphemeralAllocation))
    (me,) = (a for a in allocations if a.metadata.name == name)
    now = datetime.now(UTC)
    decision = allocation_decide(AllocationObserved(allocation=me, pools=pools, members=tuple(
        await listed(kc, PROCESSES, ns, Process)), allocations=allocations, now=now))
    assert decision.action == "Bind", decision
    assert decision.claim is not None, decision
    executor = Executor(kc, EventRecorder(kc, "tatara.pleme.io/test", "test"),
                        PoolMetrics(CollectorRegistry(), list, list, list))
    await executor.execute_allocation(me, decision, now)
    return decision.claim.name


async def test_a_bind_landing_while_the_check_reads_is_not_judged_torn(admin: KubeClient, ns: str) -> None:
    await a_settled_pool(admin, ns)
    first = await bind(admin, ns, "a0")
    bound: list[str] = []

    async def bind_a1() -> None:
        bound.append(await bind(admin, ns, "a1"))

    racing = BindBetweenReads(admin, ns, bind_a1)
    state = await converged(racing, ns, [], ALLOCS)

    assert racing.done
    assert bound
    assert bound[0] != first
    allocs = state["allocations"]
    assert {n: a["status"]["phase"] for n, a in allocs.items()} == {"a0": "Bound", "a1": "Bound"}
    check_claims(state, note="a1 bound between the check's reads")


async def test_a_bound_allocation_whose_member_carries_no_claim_is_still_caught(admin: KubeClient, ns: str) -> None:
    _, members = await a_settled_pool(admin, ns)
    await bind(admin, ns, "a0")
    # a1 Bound to the other member without its claim: what a lost claim written as won would leave
    other = members[1].metadata.name or ""
    await admin.merge_patch(EPHEMERAL_ALLOCATIONS, "a1", {"status": {
        "phase": AllocationPhase.BOUND.value, "assignedProcess": {"name": other, "namespace": ns},
        "boundPool": {"name": "pool", "namespace": ns}}}, ns, subresource="status")

    state = await converged(admin, ns, [], ALLOCS)
    with pytest.raises(AssertionError, match=f"a1's member {other} names another allocation"):
        check_claims(state, note="a1 bound without a claim")
