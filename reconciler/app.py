"""Assembles the tatara-reconciler: client → manager → informers → Process controller, table writer.

:func:`build` is shared by the binary (:mod:`reconciler.main`) and the integration tests, so
both run the same wiring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from reconciler.config import ReconcilerConfig
from reconciler.controller import ChildObject, ProcessReconciler, child_resources
from reconciler.decision import Observed
from reconciler.executor import Executor
from reconciler.metrics import ProcessMetrics
from reconciler.phases import Deps, decide
from reconciler.pid import allocate_pid
from reconciler.prefetch import Prefetcher
from reconciler.render import RoutingConfig, render_children
from reconciler.table import TableStatusWriter
from shared.domain.api.process import Process
from shared.domain.group import key
from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from shared.kube.discovery import RESTMapper
from shared.kube.events import EventRecorder
from shared.kube.health import HealthServer
from shared.kube.leader import LeaderElector
from shared.kube.manager import Manager
from shared.kube.metrics import registry as process_registry

REPORTING_CONTROLLER = key("tatara-reconciler")
"""``reportingComponent`` of our Events."""


def build(client: KubeClient, config: ReconcilerConfig, *, identity: str | None = None,
          registry: CollectorRegistry = process_registry, handle_signals: bool = True,
          clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Manager:
    """The reconciler's manager, ready to ``await manager.run()``.

    Args:
        client: the shared API client.
        config: parsed flags/environment.
        identity: leader-election identity and Event ``reportingInstance`` (default: hostname + suffix).
        registry: prometheus registry for domain metrics (tests pass a fresh one).
    """
    health = HealthServer(config.health_host, config.health_port)
    elector = None
    if config.leader_elect:
        elector = LeaderElector(client, config.leader_election_lease_name, config.lease_namespace,
                                identity=identity, timing=config.lease_timing)
    manager = Manager(client, health=health, elector=elector, handle_signals=handle_signals)
    processes = manager.informer(PROCESSES, Process, namespace=config.watch_namespace or None)
    children = [manager.informer(r, ChildObject, namespace=config.watch_namespace or None)
                for r in child_resources()]

    metrics = ProcessMetrics(registry, lambda: (p.phase for p in processes.objects()))
    recorder = EventRecorder(client, REPORTING_CONTROLLER, identity or "tatara-reconciler")
    mapper = RESTMapper(client)
    executor = Executor(client, mapper, recorder, metrics,
                        allocate_pid=functools.partial(allocate_pid, client))
    routing = RoutingConfig(config.fleet_cluster, config.fleet_location, config.fleet_domain, config.dns_lb_target)

    def render(observed: Observed) -> list[dict[str, object]]:
        return render_children(observed.process, owner_uid=observed.process.metadata.uid or "", routing=routing)

    deps = Deps(render=render)
    prefetch = Prefetcher(client, mapper, config.prometheus_url)
    manager.add_runnable(prefetch.run)
    reconciler = ProcessReconciler(processes, children, executor, heartbeat_seconds=config.heartbeat_seconds,
                                   decide=functools.partial(decide, deps=deps), clock=clock, prefetch=prefetch)
    manager.add(reconciler.controller)

    table = TableStatusWriter(client, processes.objects, interval=config.table_status_interval)
    processes.add_handler(table.notify)
    manager.add_runnable(table.run)
    return manager
