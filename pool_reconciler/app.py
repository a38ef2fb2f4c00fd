"""Assembles the tatara-pool-reconciler: client → manager → informers → pool and allocation controllers.

:func:`build` is shared by the binary (:mod:`pool_reconciler.main`) and the integration tests, so
both run the same wiring: two controllers in one process, leader election, ``/healthz``, ``/readyz``
and ``/metrics`` on one port (docs/architecture.md#the-reconcilers, docs/runtime.md#manager).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from pool_reconciler.config import PoolReconcilerConfig
from pool_reconciler.controller import AllocationReconciler, PoolReconciler
from pool_reconciler.executor import Executor
from pool_reconciler.metrics import PoolMetrics
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.codec import wire_decoder
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.group import key
from shared.domain.manifests.batch import ObservedJob
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.client import LEASES, Resource
from shared.kube.controller import Controller
from shared.kube.events import EventRecorder
from shared.kube.informer import Informer
from shared.kube.leader import LeaderElector, Lease, default_identity
from shared.kube.manager import Manager
from shared.kube.meta import namespace_of
from shared.kube.metrics import registry as process_registry
from shared.kube.sharding import DrainGate, Membership, Sharder, forget_gone_members, sharding_metrics

__all__ = ["REPORTING_CONTROLLER", "build", "join_ring"]

REPORTING_CONTROLLER = key("tatara-pool-reconciler")
"""``reportingComponent`` of our Events."""


def build(client: KubeApi, config: PoolReconcilerConfig, *, identity: str | None = None,
          registry: CollectorRegistry = process_registry, handle_signals: bool = True,
          clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Manager:
    """The pool reconciler's manager, ready to ``await manager.run()``.

    Args:
        client: the shared API client.
        config: parsed flags/environment.
        identity: leader-election identity and Event ``reportingInstance``.
        registry: prometheus registry for domain metrics (tests pass a fresh one).
        handle_signals: stop on SIGTERM/SIGINT (the binary) or not (tests).
        clock: now (UTC), injectable for tests.
    """
    identity = identity or default_identity()  # one per replica: the Lease holder and the Events' reportingInstance
    manager = Manager.configured(client, health=(config.health_host, config.health_port), lease=config.lease,
                                 identity=identity, handle_signals=handle_signals)
    sharding_metrics()  # exported (empty) in every mode, so the dashboards' sharding row always has its series
    ns = config.watch_namespace or None
    # a shard owns the pools and allocations its --watch-label-selector selects (docs/architecture.md#sharding); a
    # member of a dynamic ring, those of them the sharder assigned to it (docs/architecture.md#dynamic-sharding)
    selector = config.owned_selector or None
    pools = manager.informer(EPHEMERAL_POOLS, EphemeralPool, namespace=ns, label_selector=selector,
                             decoder=wire_decoder(EphemeralPool).decode)
    allocations = manager.informer(EPHEMERAL_ALLOCATIONS, EphemeralAllocation, namespace=ns, label_selector=selector)
    processes = manager.informer(PROCESSES, Process, namespace=ns, decoder=wire_decoder(Process).decode)
    jobs = manager.informer(JOBS, ObservedJob, namespace=ns)

    metrics = PoolMetrics(registry, pools.objects, processes.objects, allocations.objects)
    recorder = EventRecorder(client, REPORTING_CONTROLLER, identity)
    manager.add_runnable(recorder.run, idle=recorder.idle)  # Events are written in the background
    executor = Executor(client, recorder, metrics)
    pool_reconciler = PoolReconciler(pools, processes, jobs, executor, heartbeat_seconds=config.heartbeat_seconds,
                                     reset_image=config.reset_image, workers=config.workers, clock=clock)
    # every pool, for an allocation whose poolRef names another shard's (a few objects per namespace); with dynamic
    # sharding every pool of the ring's scope, whose sharder it also feeds
    scope = (config.watch_label_selector or None) if config.dynamic else None
    every_pool = pools if selector is None else manager.informer(EPHEMERAL_POOLS, EphemeralPool, namespace=ns,
                                                                  label_selector=scope,
                                                                  decoder=wire_decoder(EphemeralPool).decode)
    allocation_reconciler = AllocationReconciler(allocations, pools, processes, executor,
                                                 heartbeat_seconds=config.heartbeat_seconds,
                                                 spawn_timeout=config.spawn_timeout, workers=config.workers,
                                                 clock=clock, every_pool=every_pool, dynamic=config.dynamic)
    manager.add(pool_reconciler.controller)
    manager.add(allocation_reconciler.controller)
    if config.dynamic:
        every_allocation = manager.informer(EPHEMERAL_ALLOCATIONS, EphemeralAllocation, namespace=ns,
                                            label_selector=scope)
        join_ring(client, manager, config, identity, [
            (EPHEMERAL_POOLS, pool_reconciler.controller, pools, every_pool),
            (EPHEMERAL_ALLOCATIONS, allocation_reconciler.controller, allocations, every_allocation)])
    return manager


def join_ring(client: KubeApi, manager: Manager, config: PoolReconcilerConfig, identity: str,
              kinds: list[tuple[Resource, Controller[Any], Informer[Any], Informer[Any]]]) -> None:
    """Dynamic sharding (docs/architecture.md#dynamic-sharding): each ``(resource, controller, its cache, the cache
    of every object of the scope)`` hands over what the sharder drains, and the instance campaigns for the ring's
    sharder Lease, assigning pools and allocations by namespace (a namespace's pools and the allocations routed
    to them stay on one member) while it holds it."""
    ring = config.ring
    membership = Membership(manager.informer(LEASES, Lease, namespace=config.lease_namespace,
                                             label_selector=ring.lease_selector))
    sharders = []
    for resource, controller, owned, every in kinds:
        controller.set_gate(DrainGate(client, resource, owned, ring, controller=controller.name))
        sharders.append(Sharder(client, resource, every, membership, ring, hash_key=namespace_of))

    async def assign() -> None:
        async with anyio.create_task_group() as tg:
            for sharder in sharders:
                tg.start_soon(sharder.run)
            tg.start_soon(forget_gone_members, client, membership)

    elector = LeaderElector(client, config.sharder_lease_name, config.lease_namespace, identity=identity,
                            timing=config.lease_timing)
    manager.add_runnable(functools.partial(elector.run, assign))
