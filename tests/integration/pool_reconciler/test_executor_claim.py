"""The exclusive claim against the real API server (docs/behaviour.md#exclusive-claim): a bind patch
guarded by a stale resourceVersion loses with 409, and the executor then writes nothing else — no
allocation status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.allocation_decide import bind_patch
from pool_reconciler.decision import AllocationDecision
from pool_reconciler.executor import RETRY_AFTER_CONFLICT, Executor
from pool_reconciler.members import member_process
from pool_reconciler.metrics import PoolMetrics
from pool_reconciler.patches import AllocationStatusPatch
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import KubeClient, decode
from shared.kube.events import EventRecorder
from tests.integration.pool_reconciler.test_pool_allocation import allocation_doc, pool_doc

pytestmark = pytest.mark.anyio


async def test_a_stale_claim_loses_and_writes_no_status(kc: KubeClient, namespace: str) -> None:
    pool = decode(await kc.create(EPHEMERAL_POOLS, pool_doc("p", 1), namespace), EphemeralPool)
    stale = decode(await kc.create(PROCESSES, member_process(pool, 0).to_json(), namespace), Process)
    alloc = decode(await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a", "p", namespace), namespace),
                   EphemeralAllocation)
    # Another writer (the winning allocation) changes the member after we observed it.
    await kc.merge_patch(PROCESSES, stale.metadata.name or "", {"metadata": {"annotations": {ann.ALLOCATION: "other"}}},
                         namespace)

    registry = CollectorRegistry()
    metrics = PoolMetrics(registry, list, list, list)
    executor = Executor(kc, EventRecorder(kc, "tatara.pleme.io/test", "test"), metrics)
    now = datetime.now(UTC)
    claim = bind_patch(alloc, stale, now + timedelta(minutes=30), now)
    assert claim.resource_version == stale.metadata.resource_version
    decision = AllocationDecision("Bind", claim=claim,
                                  status=AllocationStatusPatch(phase=AllocationPhase.BOUND, message="bound"))

    result = await executor.execute_allocation(alloc, decision, now)

    assert result.requeue_after == RETRY_AFTER_CONFLICT
    after = msgspec.json.decode(await kc.get(EPHEMERAL_ALLOCATIONS, "a", namespace))
    assert "status" not in after or not after["status"].get("phase")
    member = msgspec.json.decode(await kc.get(PROCESSES, stale.metadata.name or "", namespace))
    assert member["metadata"]["annotations"][ann.ALLOCATION] == "other"
    assert ann.REQUESTOR not in member["metadata"]["annotations"]
    assert registry.get_sample_value("tatara_pool_binds_total", {"outcome": "conflict"}) == 1
