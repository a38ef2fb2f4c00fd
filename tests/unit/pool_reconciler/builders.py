"""Builders of the cached objects the pool reconciler's unit tests decide on: pools, member Processes,
allocations, all in namespace ``pools`` at the fixed instant :data:`NOW`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pool_reconciler.decision import AllocationObserved, PoolObserved
from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.allocation import AllocationRef, EphemeralAllocation
from shared.domain.api.codec import convert
from shared.domain.api.pool import EphemeralPool, MemberState
from shared.domain.api.process import Process

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
POOL_UID = "0b4c3f1e-9a7d-4c55-8d2e-3f1a2b3c4d5e"
DEMO = AllocationRef(name="demo-pool", namespace="pools")
F, A, S, R, X = (
    MemberState.FREE,
    MemberState.ALLOCATED,
    MemberState.SPAWNING,
    MemberState.RETURNING,
    MemberState.FAILED,
)
"""The member states, by initial."""


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def pool(
    desired_size: int = 1,
    *,
    name: str = "test-pool",
    ns: str = "pools",
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 0,
    deleting: bool = False,
    finalizer: bool = True,
    return_policy: str = "Replace",
    policy: str = "ReplaceImmediate",
    selector: dict[str, Any] | None = None,
    max_ttl: str = "4h",
    status: dict[str, Any] | None = None,
    template: dict[str, Any] | None = None,
) -> EphemeralPool:
    """An EphemeralPool with uid :data:`POOL_UID`, template ttl 1h, ``freeTtl`` 24h."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": POOL_UID,
        "finalizers": [finalizers.POOL] if finalizer else [],
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    doc: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "desiredSize": desired_size,
            "minSize": min_size,
            "maxSize": max_size,
            "desired": desired,
            "returnPolicy": return_policy,
            "replacementPolicy": policy,
            "selector": selector or {},
            "freeTtl": "24h",
            "maxAllocationTtl": max_ttl,
            "template": template or {"aplicacao": {"chartRef": "oci://example/chart", "version": "0.5.5"}, "ttl": "1h"},
        },
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, EphemeralPool)


def process(
    name: str = "m",
    phase: str | None = "Attested",
    *,
    pool: str = "test-pool",
    ephemeral: bool = False,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    created: float = 600,
    rv: str = "7",
) -> Process:
    """A member Process of ``pool`` (uid ``uid-<name>``) created ``created`` seconds ago, in ``phase`` since
    60 s (no status when ``phase`` is None); lifetime permanent, or ephemeral (1h, Always)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "pools",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": ago(created).isoformat(),
        "annotations": {ann.POOL: pool, **(annotations or {})},
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    lifetime = {"ephemeral": {"ttl": "1h", "teardownPolicy": "Always"}} if ephemeral else {"permanent": {}}
    doc: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "x", "path": "."}},
            "lifetime": lifetime,
        },
    }
    if phase is not None:
        doc["status"] = {"phase": phase, "phaseSince": ago(60).isoformat()}
    return convert(doc, Process)


def member(name: str, pool_name: str = "demo-pool", **kw: Any) -> Process:
    """A member of ``demo-pool`` created 3 h ago at resourceVersion 5 (the allocation tests' member)."""
    return process(name, pool=pool_name, **{"created": 3 * 3600, "rv": "5", **kw})


def alloc(
    name: str = "alloc-1",
    *,
    repo: str = "pleme-io/demo-app",
    status: dict[str, Any] | None = None,
    pool_ref: dict[str, str] | None = None,
    deleting: bool = False,
    created: float = 10,
    ttl: str | None = None,
    finalizer: bool = True,
    rv: str | None = None,
) -> EphemeralAllocation:
    """An EphemeralAllocation (requestor manual / ``repo`` / main) created ``created`` seconds ago."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "pools",
        "uid": f"uid-{name}",
        "creationTimestamp": ago(created).isoformat(),
        "finalizers": [finalizers.ALLOCATION] if finalizer else [],
    }
    if rv is not None:
        meta["resourceVersion"] = rv
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    spec: dict[str, Any] = {"requestor": {"kind": "manual", "repo": repo, "branch": "main"}}
    if pool_ref:
        spec["poolRef"] = pool_ref
    if ttl:
        spec["ttl"] = ttl
    doc: dict[str, Any] = {"metadata": meta, "spec": spec}
    if status is not None:
        doc["status"] = status
    return convert(doc, EphemeralAllocation)


def demo_pool(name: str = "demo-pool", selector: dict[str, Any] | None = None, **kw: Any) -> EphemeralPool:
    """The allocation tests' pool: ``desiredSize`` 1, template ttl 1h, no finalizer."""
    return pool(name=name, selector=selector, **{"finalizer": False, **kw})


def observe_pool(p: EphemeralPool, *members: Process, **kw: Any) -> PoolObserved:
    return PoolObserved(pool=p, members=members, now=NOW, **kw)


def observe_allocation(
    a: EphemeralAllocation,
    pools: list[EphemeralPool],
    members: list[Process],
    others: list[EphemeralAllocation] | None = None,
) -> AllocationObserved:
    return AllocationObserved(
        allocation=a, pools=tuple(pools), members=tuple(members), now=NOW, allocations=(a, *(others or []))
    )
