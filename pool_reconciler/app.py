"""Assembles the tatara-pool-reconciler: client → manager → informers → pool and allocation controllers.

:func:`build` is shared by the binary (:mod:`pool_reconciler.main`) and the integration tests, so
both run the same wiring: two controllers in one process, leader election, ``/healthz``, ``/readyz``
and ``/metrics`` on one port (docs/architecture.md#the-reconcilers, docs/runtime.md#manager).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

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
from shared.kube.events import EventRecorder
from shared.kube.leader import default_identity
from shared.kube.manager import Manager
from shared.kube.metrics import registry as process_registry

__all__ = ["REPORTING_CONTROLLER", "build"]

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
    ns = config.watch_namespace or None
    # a shard owns the pools and allocations its --watch-label-selector selects (docs/architecture.md#sharding)
    selector = config.watch_label_selector or None
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
    # every pool, for an allocation whose poolRef names another shard's (a few objects per namespace)
    every_pool = pools if selector is None else manager.informer(EPHEMERAL_POOLS, EphemeralPool, namespace=ns,
                                                                  decoder=wire_decoder(EphemeralPool).decode)
    allocation_reconciler = AllocationReconciler(allocations, pools, processes, executor,
                                                 heartbeat_seconds=config.heartbeat_seconds,
                                                 spawn_timeout=config.spawn_timeout, workers=config.workers,
                                                 clock=clock, every_pool=every_pool)
    manager.add(pool_reconciler.controller)
    manager.add(allocation_reconciler.controller)
    return manager
