"""``tatara_*`` domain metrics of the pool reconciler (docs/behaviour.md#domain-metrics).

The reference serves no metrics (docs/divergences.md#pool-reconciler-metrics); all of these are new surface:

- ``tatara_pool_members{pool,state}``: members per pool (``<ns>/<name>``) and member state
  (docs/behaviour.md#member-states), computed from the informer caches at scrape time;
- ``tatara_allocations{phase}``: EphemeralAllocations per phase, from the cache at scrape;
- ``tatara_pool_binds_total{outcome}``: bind attempts (``bound``, ``conflict`` — another
  allocation won the guarded claim —, ``error``);
- ``tatara_pool_releases_total{outcome}``: member returns (``keep``, ``replace``, ``reset``) and
  allocations reaching Released (``released``);
- ``tatara_allocation_bind_seconds``: allocation creation → Bound (histogram, seconds).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pool_reconciler.members import belongs_to_pool, member_state
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.pool import EphemeralPool, MemberState
from shared.domain.api.process import Process

__all__ = ["BIND_SECONDS_BUCKETS", "PoolMetrics"]

BIND_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
"""Histogram bounds for allocation wait, seconds: a warm bind is sub-second; queued ones wait minutes."""


class _CacheGauges(Collector):
    """Members per pool/state and allocations per phase, tallied from the caches on every scrape."""

    def __init__(self, pools: Callable[[], Iterable[EphemeralPool]], members: Callable[[], Iterable[Process]],
                 allocations: Callable[[], Iterable[EphemeralAllocation]]) -> None:
        self._pools = pools
        self._members = members
        self._allocations = allocations

    def describe(self) -> Iterable[Metric]:
        return [
            GaugeMetricFamily("tatara_pool_members", "Pool members per state.", labels=["pool", "state"]),
            GaugeMetricFamily("tatara_allocations", "EphemeralAllocations per phase.", labels=["phase"]),
        ]

    def collect(self) -> Iterable[Metric]:
        members = GaugeMetricFamily("tatara_pool_members", "Pool members per state.", labels=["pool", "state"])
        by_pool: dict[tuple[str, str], Tally[MemberState]] = {}
        for pool in self._pools():
            by_pool[(pool.metadata.namespace or "", pool.metadata.name or "")] = Tally()
        for process in self._members():
            key = (process.metadata.namespace or "", process.metadata.annotations.get(ann.POOL, ""))
            tally = by_pool.get(key)
            if tally is not None and belongs_to_pool(process, key[1]):
                tally[member_state(process)] += 1
        for (ns, name), tally in sorted(by_pool.items()):
            for state in MemberState.all():
                members.add_metric([f"{ns}/{name}", state.value], tally.get(state, 0))
        phases = GaugeMetricFamily("tatara_allocations", "EphemeralAllocations per phase.", labels=["phase"])
        counted = Tally(a.phase for a in self._allocations())
        for phase in AllocationPhase:
            phases.add_metric([phase.value], counted.get(phase, 0))
        return [members, phases]


class PoolMetrics:
    """The pool reconciler's domain metrics on ``registry``.

    Args:
        registry: where to register (the process registry in the binary, a fresh one in tests).
        pools / members / allocations: callables listing the cached objects (scrape-time gauges).
    """

    def __init__(self, registry: CollectorRegistry, pools: Callable[[], Iterable[EphemeralPool]],
                 members: Callable[[], Iterable[Process]],
                 allocations: Callable[[], Iterable[EphemeralAllocation]]) -> None:
        self.binds = Counter("tatara_pool_binds_total", "Bind attempts by outcome.", ["outcome"], registry=registry)
        self.releases = Counter("tatara_pool_releases_total", "Member returns and allocation releases by outcome.",
                                ["outcome"], registry=registry)
        self.bind_seconds = Histogram("tatara_allocation_bind_seconds",
                                      "Seconds from allocation creation to Bound.",
                                      buckets=BIND_SECONDS_BUCKETS, registry=registry)
        registry.register(_CacheGauges(pools, members, allocations))
