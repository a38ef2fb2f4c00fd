"""Assembles the tatara-reconciler: client → manager → informers (Processes, children, export Jobs) →
Process controller, table writer.

:func:`build` is shared by the binary (:mod:`reconciler.main`) and the integration tests, so
both run the same wiring. The child kinds are :data:`reconciler.render.RENDERED_KINDS`, resolved
by API discovery when the manager starts (:meth:`~shared.kube.manager.Manager.before_start`), before any
informer lists.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from reconciler.claims import held_keys
from reconciler.concurrency import ring_key
from reconciler.config import ReconcilerConfig
from reconciler.controller import ChildObject, ProcessReconciler, RoutingChildObject
from reconciler.decision import Decision, Observed
from reconciler.executor import Executor
from reconciler.exports import ExportJobConfig, export_job
from reconciler.metrics import ProcessMetrics
from reconciler.phases import Deps, decide
from reconciler.pid import SequenceAllocator
from reconciler.prefetch import Prefetcher
from reconciler.render import RENDERED_KINDS, Manifest, RoutingConfig, render_children
from reconciler.routing import ROUTING_KINDS
from reconciler.table_keeper import TableKeeper
from reconciler.table_writer import TableStatusWriter
from shared.domain import labels
from shared.domain.api.codec import wire_decoder
from shared.domain.api.export import ExportSpec
from shared.domain.api.process import Process
from shared.domain.api.table import ProcessTable
from shared.domain.group import key
from shared.domain.manifests.batch import Job, ObservedJob
from shared.domain.resources import JOBS, PROCESS_TABLES, PROCESSES
from shared.domain.sharding import parse_selector
from shared.kube.api import KubeApi
from shared.kube.client import LEASES, Resource
from shared.kube.controller import Controller
from shared.kube.discovery import RESTMapper, UnknownKind
from shared.kube.events import EventRecorder
from shared.kube.expectations import LAG_REQUEUE_SECONDS, ChildWriteExpectations
from shared.kube.informer import Informer
from shared.kube.leader import LeaderElector, Lease, default_identity
from shared.kube.manager import Manager
from shared.kube.metrics import registry as process_registry
from shared.kube.sharding import DrainGate, Membership, Sharder, forget_gone_members, sharding_metrics

__all__ = ["REPORTING_CONTROLLER", "after_own_applies", "build", "join_ring", "resolve_kind", "watch_rendered_kinds"]

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = key("tatara-reconciler")
"""``reportingComponent`` of our Events."""


async def resolve_kind(mapper: RESTMapper, pinned: Resource) -> Resource:
    """The resource discovery serves for ``pinned``'s apiVersion and kind; ``pinned`` itself when its
    kind is not served (a CRD not installed yet): logged, and watched anyway — the informer reads a
    missing resource as an empty cache and keeps retrying, so a CRD installed later is picked up.

    Raises:
        shared.kube.errors.ApiError: discovery itself failed.
    """
    try:
        return await mapper.resource_for(pinned.api_version, pinned.kind)
    except UnknownKind:
        log.warning("%s %s is not served (is its CRD installed?); watching %s until it is",
                    pinned.api_version, pinned.kind, pinned.plural)
        return pinned


async def watch_rendered_kinds(mapper: RESTMapper, manager: Manager, reconciler: ProcessReconciler,
                               namespace: str | None, caches: dict[Resource, Informer[Any]] | None = None) -> None:
    """Resolve each of :data:`~reconciler.render.RENDERED_KINDS` and watch it as the reconciler's children
    (the routing kinds with their ``spec``, to notice hand edits); each informer is also put in ``caches``
    by its resource."""
    for pinned in RENDERED_KINDS:
        resource = await resolve_kind(mapper, pinned)
        routed = (pinned.api_version, pinned.kind) in ROUTING_KINDS
        decode_type = RoutingChildObject if routed else ChildObject
        informer = manager.informer(resource, decode_type, namespace=namespace)
        if caches is not None:
            caches[resource] = informer
        reconciler.watch_children(informer)


def after_own_applies(decide_: Callable[[Observed], Decision], writes: ChildWriteExpectations[Resource],
                      seen: Callable[[Resource], str | None]) -> Callable[[Observed], Decision]:
    """``decide_``, held back while a child cache has not yet come as far as this replica's last apply of
    one of the Process's children (the executor tells ``writes``; ``seen(resource)`` is the resourceVersion
    that resource's informer has come to, None if none caches it): the decision is then "no writes, decide
    again in :data:`~shared.kube.expectations.LAG_REQUEUE_SECONDS`", so a pass woken before the cache shows
    our own apply (a requeue, another child's event) does not find the child still missing or still
    hand-edited and repair it, and say so, a second time (docs/runtime.md#own-writes)."""
    def decide_after_own_applies(observed: Observed) -> Decision:
        process = observed.process
        if writes.lagging(f"{process.metadata.namespace or 'default'}/{process.metadata.name or ''}", seen):
            return Decision(requeue_after=LAG_REQUEUE_SECONDS)
        return decide_(observed)

    return decide_after_own_applies


def build(client: KubeApi, config: ReconcilerConfig, *, identity: str | None = None,
          registry: CollectorRegistry = process_registry, handle_signals: bool = True,
          clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Manager:
    """The reconciler's manager, ready to ``await manager.run()``.

    Args:
        client: the shared API client.
        config: parsed flags/environment.
        identity: leader-election identity and Event ``reportingInstance`` (default: hostname + suffix).
        registry: prometheus registry for domain metrics (tests pass a fresh one).
        handle_signals: stop on SIGTERM/SIGINT (the binary) or not (tests).
        clock: now (UTC), injectable for tests.
    """
    namespace = config.watch_namespace or None
    identity = identity or default_identity()  # one per replica: the Lease holder and the Events' reportingInstance
    manager = Manager.configured(client, health=(config.health_host, config.health_port), lease=config.lease,
                                 identity=identity, handle_signals=handle_signals)
    sharding_metrics()  # exported (empty) in every mode, so the dashboards' sharding row always has its series
    # a shard reconciles the Processes its --watch-label-selector selects (docs/architecture.md#sharding); a
    # member of a dynamic ring, those of them the sharder assigned to it (docs/architecture.md#dynamic-sharding)
    processes = manager.informer(PROCESSES, Process, namespace=namespace,
                                 label_selector=config.owned_selector or None,
                                 decoder=wire_decoder(Process).decode)
    # the table's counts, rows and claims are of every Process: a sharded instance caches them all for it
    every_process = processes if not config.sharded else manager.informer(
        PROCESSES, Process, namespace=namespace, decoder=wire_decoder(Process).decode)

    metrics = ProcessMetrics(registry, lambda: (p.phase for p in processes.objects()))
    recorder = EventRecorder(client, REPORTING_CONTROLLER, identity)
    manager.add_runnable(recorder.run, idle=recorder.idle)  # Events are written in the background
    mapper = RESTMapper(client)
    routing = RoutingConfig(config.fleet_cluster, config.fleet_location, config.fleet_domain, config.dns_lb_target)

    def render(observed: Observed) -> list[Manifest]:
        process = observed.process
        return render_children(process, owner_uid=process.metadata.uid or "", routing=routing,
                               stable_keys=held_keys(observed.claims, process, routing.cluster))

    worker = ExportJobConfig(config.export_worker_image, config.export_worker_service_account)

    def render_export_job(observed: Observed, index: int, export: ExportSpec) -> Job:
        return export_job(observed.process, index, export, owner_uid=observed.process.metadata.uid or "",
                          config=worker)

    prefetch = Prefetcher(client, mapper, config.prometheus_url)
    manager.add_runnable(prefetch.run)
    keeper = TableKeeper(client, recorder=recorder)  # one per replica: remembers the sequence numbers it won
    # the one owner of the table's status: counts, rows and the stable-name claims; a holder leaving
    # Running/Attested gives its claims up through it, in the step that leaves (the executor's step 2a)
    table = TableStatusWriter(client, every_process.objects, interval=config.table_status_interval, keeper=keeper,
                              fleet_cluster=routing.cluster, namespace=namespace)
    child_writes: ChildWriteExpectations[Resource] = ChildWriteExpectations()
    child_caches: dict[Resource, Informer[Any]] = {}  # filled when the manager starts (watch_rendered_kinds)

    def child_cache_version(resource: Resource) -> str | None:
        cache = child_caches.get(resource)
        return cache.resource_version if cache is not None else None

    executor = Executor(client, mapper, recorder, metrics, release_claims=table.release, child_writes=child_writes)
    # Only our export Jobs are cached (docs/behaviour.md#releasing): a change of one requeues its Process.
    jobs = manager.informer(JOBS, ObservedJob, namespace=namespace,
                            label_selector=f"{labels.ROLE}={labels.ROLE_EXPORT}")
    # one allocator per replica (so per leader): our own bumps never race each other (docs/behaviour.md#pid-allocation)
    reconciler = ProcessReconciler(client, processes, executor, SequenceAllocator(
                                       client, keeper, block_size=config.pid_block, on_lost=metrics.pid_bump_races.inc),
                                   heartbeat_seconds=config.heartbeat_seconds, workers=config.workers,
                                   decide=after_own_applies(
                                       functools.partial(decide, deps=Deps(render=render, export_job=render_export_job,
                                                                           fleet_cluster=routing.cluster)),
                                       child_writes, child_cache_version),
                                   clock=clock, prefetch=prefetch, jobs=jobs,
                                   every_process=every_process if config.sharded else None)
    manager.add(reconciler.controller)
    manager.before_start(functools.partial(watch_rendered_kinds, mapper, manager, reconciler, namespace,
                                           child_caches))

    tables = manager.informer(PROCESS_TABLES, ProcessTable, decoder=wire_decoder(ProcessTable).decode)
    reconciler.watch_claims(tables, routing.cluster)
    # a Controller of the one table: every Process or table event queues its key, and its passes are
    # at least --table-status-interval apart (docs/architecture.md#the-processtable-writer)
    table_writer = table.watch(tables, every_process)
    if not config.sharded:
        manager.add(table_writer)
    else:
        # one writer among all shards, elected by a Lease of its own (docs/architecture.md#one-processtable-many-shards)
        elector = LeaderElector(client, config.table_lease_name, config.lease_namespace, identity=identity,
                                timing=config.lease_timing)
        manager.add_runnable(functools.partial(elector.run, table_writer.run))
    if config.dynamic:
        join_ring(client, manager, config, identity, reconciler.controller, processes, every_process)
    return manager


def join_ring(client: KubeApi, manager: Manager, config: ReconcilerConfig, identity: str,
              controller: Controller[Process], processes: Informer[Process], every_process: Informer[Process]) -> None:
    """Dynamic sharding (docs/architecture.md#dynamic-sharding): the Process controller hands over what the sharder
    drains, and the instance campaigns for the ring's sharder Lease, assigning every Process of the
    ``--watch-label-selector`` scope by :func:`~reconciler.concurrency.ring_key` while it holds it."""
    ring = config.ring
    controller.set_gate(DrainGate(client, PROCESSES, processes, ring, controller=controller.name))
    leases = manager.informer(LEASES, Lease, namespace=config.lease_namespace, label_selector=ring.lease_selector)
    scope = parse_selector(config.watch_label_selector)
    membership = Membership(leases)
    sharder = Sharder(client, PROCESSES, every_process, membership, ring, hash_key=ring_key,
                      in_scope=lambda process: scope.matches(process.metadata.labels))

    async def assign() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sharder.run)
            tg.start_soon(forget_gone_members, client, membership)

    elector = LeaderElector(client, config.sharder_lease_name, config.lease_namespace, identity=identity,
                            timing=config.lease_timing)
    manager.add_runnable(functools.partial(elector.run, assign))
