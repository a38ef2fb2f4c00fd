"""A pool, its members and its allocations live on one shard (docs/architecture.md#sharding): a member is
created with its pool's ``sharding.fluxcd.io/key`` label (so the Process reconciler of that shard takes
it), and an allocation whose ``poolRef`` names a pool another shard owns is told which shard and how to
move, rather than waiting silently."""

from __future__ import annotations

from typing import TypeVar

import msgspec
import pytest

from pool_reconciler.allocation_decide import allocation_decide
from pool_reconciler.decision import AllocationObserved
from pool_reconciler.members import member_process
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.sharding import SHARD_KEY
from shared.kube.events import Event
from tests.unit.pool_reconciler.builders import NOW, alloc, demo_pool, pool

T = msgspec.structs.replace
Obj = TypeVar("Obj", EphemeralPool, EphemeralAllocation)


def on_shard(obj: Obj, shard: str | None, **labels: str) -> Obj:
    found = dict(labels) | ({SHARD_KEY: shard} if shard is not None else {})
    return T(obj, metadata=T(obj.metadata, labels=found))


@pytest.mark.parametrize(("shard", "expected"), [("shard1", {SHARD_KEY: "shard1"}), (None, {})])
def test_a_member_carries_its_pool_shard_only(shard: str | None, expected: dict[str, str]) -> None:
    source = on_shard(pool(), shard, team="a")
    assert member_process(source, 0).metadata.labels == expected


REF = {"name": "demo-pool", "namespace": "pools"}


@pytest.mark.parametrize(
    ("alloc_shard", "pool_shard", "message"),
    [
        (None, "shard1", "poolRef names pool demo-pool on shard 'shard1', this allocation is on no shard (unsharded): "
                         "a pool, its members and its allocations live on one shard; "
                         "label the allocation sharding.fluxcd.io/key=shard1"),
        ("shard2", None, "poolRef names pool demo-pool on no shard (unsharded), this allocation is on shard 'shard2': "
                         "a pool, its members and its allocations live on one shard; "
                         "remove the allocation's sharding.fluxcd.io/key label"),
    ],
)
def test_a_pool_ref_to_another_shard_says_so(alloc_shard: str | None, pool_shard: str | None, message: str) -> None:
    allocation = on_shard(alloc(pool_ref=REF), alloc_shard)
    elsewhere = on_shard(demo_pool(), pool_shard)
    decision = allocation_decide(AllocationObserved(allocation=allocation, pools=(), members=(), now=NOW,
                                                    allocations=(allocation,), other_shard_pools=(elsewhere,)))
    assert decision.status is not None
    assert decision.status.phase is AllocationPhase.NO_MATCHING_POOL
    assert decision.events == (Event.warning("PoolOnOtherShard", message),)
    assert {c.type_: c.reason for c in decision.status.conditions or []}.get("Ready") == "PoolOnOtherShard"


def test_a_pool_ref_to_a_pool_of_no_shard_at_all_is_the_plain_message() -> None:
    allocation = alloc(pool_ref={"name": "gone", "namespace": "pools"})
    decision = allocation_decide(AllocationObserved(allocation=allocation, pools=(), members=(), now=NOW,
                                                    allocations=(allocation,), other_shard_pools=(demo_pool(),)))
    assert decision.events == (Event.warning("NoMatchingPool", "poolRef names no pool here"),)


def test_selector_routing_stays_on_the_shard() -> None:
    """Without a poolRef an allocation is routed among its own shard's pools: another shard's matching pool is
    not a candidate (it is in ``other_shard_pools`` only)."""
    allocation = alloc()
    decision = allocation_decide(AllocationObserved(allocation=allocation, pools=(), members=(), now=NOW,
                                                    allocations=(allocation,), other_shard_pools=(demo_pool(),)))
    assert decision.events == (Event.warning("NoMatchingPool", "no pool matches this requestor"),)
