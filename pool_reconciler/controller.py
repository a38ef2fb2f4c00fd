"""The pool and allocation controllers: caches → Observed snapshot → pure decision → executor.

One reconcile reads top to bottom here. Each runs under :func:`shared.kube.finalizer.finalize`: the
``tatara.pleme.io/pool-finalizer`` goes on every live pool and comes off a deleting one once the
decision says ``released`` (no member left); the ``tatara.pleme.io/allocation-finalizer`` goes on every
allocation that is not Released or Failed and comes off a deleting one once it holds no member
(docs/behaviour.md#pool-finalizer, docs/behaviour.md#allocation-finalizer). A bind is decided on the
live allocation (:func:`shared.kube.live.decide_on_live`, one GET per bind), never on a cache that may
lag our own last write (docs/runtime.md#deciding-on-the-live-object); and no pool or allocation is decided
on a cache that does not show its last status write yet (:class:`shared.kube.expectations.WriteExpectations`,
docs/runtime.md#own-writes): the finalizer's own watch event woke a second allocation pass that, on the
cache of before the write, wrote Queued again, and a pool pass woke by a member sent its Warning twice.

Unlike the reference, which watches only its primary kinds and so learns of member changes only on
the heartbeat (docs/divergences.md#pool-reconciler-watches), both controllers watch secondary kinds:

- **pool controller** (:class:`PoolReconciler`): primary EphemeralPools; member Processes are
  mapped to their pool by the ``tatara.pleme.io/pool`` annotation and by their controller
  ownerReference; reset Jobs by their ``pool`` annotation.
- **allocation controller** (:class:`AllocationReconciler`): primary EphemeralAllocations; a
  member Process change requeues the allocation named in its ``allocation`` annotation and, when the
  member looks free, the head of its pool's queue (as many waiting allocations as the pool has free
  members); a pool change requeues the namespace's waiting allocations (a new pool may match a
  ``NoMatchingPool`` one); an allocation leaving a queue out of turn requeues the head of that queue.
  The queues are an index (:class:`pool_reconciler.fifo.WaitingQueues`) filed by an allocation event
  handler registered before the controller's own (docs/behaviour.md#fifo-bind).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from pool_reconciler.allocation_decide import allocation_decide
from pool_reconciler.decision import (
    DEFAULT_SPAWN_TIMEOUT,
    AllocationDecision,
    AllocationObserved,
    PoolDecision,
    PoolObserved,
)
from pool_reconciler.executor import Executor
from pool_reconciler.fifo import WaitingQueues, is_waiting
from pool_reconciler.members import member_state
from pool_reconciler.pool_decide import pool_decide
from pool_reconciler.routing import free_members, route
from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.codec import decode_allocation
from shared.domain.api.pool import EphemeralPool, MemberState
from shared.domain.api.process import Process
from shared.domain.group import GROUP
from shared.domain.manifests.batch import ObservedJob
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS
from shared.kube import tracing
from shared.kube.controller import Controller, Request, Result, generation_or_metadata_changed
from shared.kube.expectations import LAG_REQUEUE_SECONDS
from shared.kube.finalizer import Apply, Cleanup, Outcome, finalize
from shared.kube.informer import Informer, WatchEventType, object_key
from shared.kube.live import decide_on_live
from shared.kube.logcontext import log_context
from shared.kube.meta import KubeObject

__all__ = [
    "BY_NAMESPACE",
    "MEMBER_OF",
    "MOVING_REQUEUE",
    "AllocationReconciler",
    "PoolReconciler",
    "could_be_bound",
    "needs_live_read",
    "waiting_set_changed",
]

log = logging.getLogger(__name__)

MOVING_REQUEUE = 1.0
"""Seconds before an allocation looks again while its namespace moves between dynamic-sharding members."""

MEMBER_OF = "member-of"
"""Index of Processes (and reset Jobs) by ``<ns>/<pool>`` from their ``tatara.pleme.io/pool`` annotation."""

BY_NAMESPACE = "namespace"
"""Index of any object by its namespace."""

BY_ASSIGNED = "assigned"
"""Index of live (not Released, not Failed) allocations by ``<ns>/<member>`` of their ``status.assignedProcess``."""


def _claim_holders(namespace: str, members: Iterable[Process]) -> list[str]:
    """``<ns>/<allocation>`` of every allocation a member's ``allocation`` annotation names (its claim landed)."""
    return [f"{namespace}/{name}" for m in members if (name := m.metadata.annotations.get(ann.ALLOCATION))]


def assigned_member(allocation: EphemeralAllocation) -> list[str]:
    """``<ns>/<member>`` the allocation's status names, while it is not Released or Failed."""
    status = allocation.status
    if status is None or status.assigned_process is None or allocation.phase.is_terminal:
        return []
    return [f"{allocation.metadata.namespace or 'default'}/{status.assigned_process.name}"]


def pool_key(obj: Process | ObservedJob) -> list[str]:
    """``<ns>/<pool>`` from the ``tatara.pleme.io/pool`` annotation, if any."""
    pool = obj.metadata.annotations.get(ann.POOL)
    return [f"{obj.metadata.namespace or 'default'}/{pool}"] if pool else []


def namespace_of(obj: KubeObject) -> list[str]:
    return [obj.metadata.namespace or "default"]


def _pool_request(obj: Process | ObservedJob) -> list[Request]:
    pool = obj.metadata.annotations.get(ann.POOL)
    return [Request(obj.metadata.namespace or None, pool)] if pool else []


class PoolReconciler:
    """Builds the pool controller on ``pools`` with member Processes and reset Jobs as secondary watches.

    Args:
        pools / processes / jobs: informers (run by the manager).
        executor: performs decisions.
        heartbeat_seconds: requeue interval.
        reset_image: the Reset policy's Job image.
        workers: concurrent reconciles.
        decide: the pure decision (default :func:`pool_decide`).
        clock: now (UTC), injectable for tests.
    """

    def __init__(self, pools: Informer[EphemeralPool], processes: Informer[Process], jobs: Informer[ObservedJob],
                 executor: Executor, *, heartbeat_seconds: float = 30.0, reset_image: str | None = None,
                 workers: int = 4, decide: Callable[[PoolObserved], PoolDecision] = pool_decide,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.pools, self.processes, self.jobs = pools, processes, jobs
        self.executor, self.decide, self.clock = executor, decide, clock
        self.heartbeat_seconds = heartbeat_seconds
        self.reset_image = reset_image
        processes.add_indexer(MEMBER_OF, pool_key)
        jobs.add_indexer(MEMBER_OF, pool_key)
        self.controller: Controller[EphemeralPool] = Controller("pool", pools, self.reconcile, workers=workers)
        self.controller.owns(processes, kind="EphemeralPool", group=GROUP, cached_only=True)
        self.controller.watches(processes, _pool_request, cached_only=True)
        self.controller.watches(jobs, _pool_request, cached_only=True)

    def observe(self, pool: EphemeralPool) -> PoolObserved:
        """The snapshot of ``pool``'s world from the caches (no API calls)."""
        key = f"{pool.metadata.namespace or 'default'}/{pool.metadata.name}"
        members = tuple(self.processes.by_index(MEMBER_OF, key))
        reset_jobs = {job.metadata.name or "": job.status.outcome() for job in self.jobs.by_index(MEMBER_OF, key)}
        return PoolObserved(pool=pool, members=members, now=self.clock(), reset_jobs=reset_jobs,
                            reset_image=self.reset_image, heartbeat_seconds=self.heartbeat_seconds)

    async def reconcile(self, request: Request) -> Result:
        key = str(request)
        pool = self.pools.get(key)
        if pool is None:
            self.executor.pool_writes.forget(key)
            return Result.done()  # gone: the POOL finalizer kept it until its members were reaped
        if self.executor.pool_writes.lagging(key, pool.metadata.resource_version):
            # the cache does not show our last status write yet: deciding now would write it (and its Events) again
            return Result(requeue_after=LAG_REQUEUE_SECONDS, urgent=True)
        with log_context(phase=pool.status.phase.value if pool.status else ""):
            return await finalize(self.executor.client, EPHEMERAL_POOLS, fin.POOL, pool, self._pass)

    async def _pass(self, step: Apply[EphemeralPool] | Cleanup[EphemeralPool]) -> Outcome:
        """Decide on the cached pool and execute; released once a deleting pool has no member left."""
        decision = self.decide(self.observe(step.obj))
        if tracing.enabled:
            tracing.annotate(tatara_phase_before=step.obj.status.phase.value if step.obj.status else "",
                             tatara_decision_create=len(decision.create), tatara_decision_patch=len(decision.patch),
                             tatara_decision_delete=len(decision.delete), tatara_decision_apply=len(decision.apply),
                             tatara_decision_requeue_after=(decision.requeue_after
                                                            if decision.requeue_after is not None else -1))
        if decision.create or decision.delete or decision.patch:
            log.info("pool pass: %d create, %d patch, %d delete", len(decision.create), len(decision.patch),
                     len(decision.delete))
        return Outcome(await self.executor.execute_pool(step.obj, decision), released=decision.released)


def needs_live_read(decision: AllocationDecision) -> bool:
    """Whether ``decision`` would bind (claim a member, or adopt one already claimed for us).

    A bind decided from a cached allocation that lags our own last write (its Bound status not yet
    seen by the watch, while the member's claim already is) would write Bound a second time, or
    even claim a second member: such decisions are re-checked against the live allocation first.
    """
    return decision.action == "Bind" and decision.status is not None


def could_be_bound(process: Process) -> bool:
    """Whether ``process`` looks Free (what a waiting allocation could claim)."""
    annotations = process.metadata.annotations
    return (member_state(process) is MemberState.FREE and ann.ALLOCATION not in annotations
            and ann.REQUESTOR not in annotations)


def _waiting(allocation: EphemeralAllocation) -> bool:
    return allocation.phase.needs_pool_routing and allocation.metadata.deletion_timestamp is None


def waiting_set_changed(event: WatchEventType, old: EphemeralAllocation | None, new: EphemeralAllocation) -> bool:
    """Whether an allocation event can move the FIFO position of the allocations waiting behind it:
    only an allocation leaving the waiting set (bound, failed, deleted) or joining it other than as
    the newest (a waiting allocation created now sits behind every other). Pending → Queued, status
    rewrites and a new allocation wake nobody: with a burst of N allocations the fan-out of every
    phase change to every waiting allocation was N² reconciles."""
    if event is WatchEventType.DELETED:
        return True
    if event is WatchEventType.ADDED or old is None:
        return not _waiting(new)
    return _waiting(old) != _waiting(new)


class AllocationReconciler:
    """Builds the allocation controller on ``allocations`` with pools and member Processes as secondary watches.

    Args:
        allocations / pools / processes: informers (run by the manager).
        executor: performs decisions.
        heartbeat_seconds: requeue interval.
        spawn_timeout: how long an allocation may wait for a member.
        workers: concurrent reconciles.
        decide: the pure decision (default :func:`allocation_decide`).
        clock: now (UTC), injectable for tests.
        every_pool: a sharded instance's cache of every pool (``pools`` holds its shard's only): a ``poolRef``
            naming a pool of another shard is told so (docs/architecture.md#sharding).
        dynamic: a member of a dynamic-sharding ring: ``every_pool`` holds the ring's pools, and an allocation
            whose namespace has a pool on another member waits, since the namespace is moving
            (docs/architecture.md#dynamic-sharding).
    """

    def __init__(self, allocations: Informer[EphemeralAllocation], pools: Informer[EphemeralPool],
                 processes: Informer[Process], executor: Executor, *, heartbeat_seconds: float = 30.0,
                 spawn_timeout: timedelta = DEFAULT_SPAWN_TIMEOUT, workers: int = 4,
                 decide: Callable[[AllocationObserved], AllocationDecision] = allocation_decide,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 every_pool: Informer[EphemeralPool] | None = None, dynamic: bool = False) -> None:
        self.allocations, self.pools, self.processes = allocations, pools, processes
        self.dynamic = dynamic
        self.every_pool = every_pool if every_pool is not pools else None
        if self.every_pool is not None:
            self.every_pool.add_indexer(BY_NAMESPACE, namespace_of)
        self.executor, self.decide, self.clock = executor, decide, clock
        self.heartbeat_seconds = heartbeat_seconds
        self.spawn_timeout = spawn_timeout
        for informer in (allocations, pools, processes):
            informer.add_indexer(BY_NAMESPACE, namespace_of)
        allocations.add_indexer(BY_ASSIGNED, assigned_member)
        self.queues = WaitingQueues(self._route_key)
        # Registered before the controller's own handlers, so a mapping below reads the index updated.
        allocations.add_handler(self._file_allocation)
        pools.add_handler(self._reroute)
        self.controller: Controller[EphemeralAllocation] = Controller("allocation", allocations, self.reconcile,
                                                                      workers=workers)
        self.controller.watches(processes, self._for_member, cached_only=True)
        # Routing reads a pool's spec and deletion only: its status writes (one per bind) wake nobody.
        self.controller.watches(pools, self._for_pool, predicates=(generation_or_metadata_changed,))
        self.controller.watches(allocations, self._behind, predicates=(waiting_set_changed,))

    def _waiting_in(self, namespace: str) -> list[EphemeralAllocation]:
        return [a for a in self.allocations.by_index(BY_NAMESPACE, namespace) if _waiting(a)]

    # -- the FIFO index (pool_reconciler/fifo.py) ------------------------------------------------

    def _route_key(self, allocation: EphemeralAllocation) -> str | None:
        pool = route(allocation, self.pools.by_index(BY_NAMESPACE, allocation.metadata.namespace or "default"))
        return f"{pool.metadata.namespace or 'default'}/{pool.metadata.name}" if pool is not None else None

    def _file_allocation(self, event: WatchEventType, old: EphemeralAllocation | None,
                         new: EphemeralAllocation) -> None:
        key = object_key(new)
        if event is WatchEventType.DELETED:
            self.queues.discard(key)
        else:
            self.queues.upsert(key, new)

    def _reroute(self, event: WatchEventType, old: EphemeralPool | None, new: EphemeralPool) -> None:
        """A pool came, went or changed its spec or metadata: routing may differ, file everything again."""
        if generation_or_metadata_changed(event, old, new):
            self.queues.rebuild((object_key(a), a) for a in self.allocations.objects())

    def _claimed(self, allocation: EphemeralAllocation) -> frozenset[str]:
        """Members named in the ``status.assignedProcess`` of a live allocation other than ``allocation``."""
        ns = allocation.metadata.namespace or "default"
        claimed = {member for member in self.allocations.index_values(BY_ASSIGNED) if member.startswith(f"{ns}/")}
        mine = assigned_member(allocation)
        if mine:
            holders = [object_key(a) for a in self.allocations.by_index(BY_ASSIGNED, mine[0])]
            if holders == [object_key(allocation)]:
                claimed.discard(mine[0])
        return frozenset(member.split("/", 1)[1] for member in claimed)

    def _head_of(self, pool: EphemeralPool) -> list[Request]:
        """The allocations at the head of ``pool``'s queue that a free member could go to: as many as
        the pool has free members, FIFO (those further back cannot bind until these leave the queue)."""
        ns = pool.metadata.namespace or "default"
        members = [p for p in self.processes.by_index(BY_NAMESPACE, ns) if ann.POOL in p.metadata.annotations]
        claimed = frozenset(m.split("/", 1)[1] for m in self.allocations.index_values(BY_ASSIGNED)
                            if m.startswith(f"{ns}/"))
        free = len(free_members(pool, members, claimed))
        queue = f"{ns}/{pool.metadata.name}"
        # allocations whose claim landed still sit in the queue until their status is seen: count past them
        count = free + self.queues.holding(queue, _claim_holders(ns, members))
        return [Request(*key.split("/", 1)) for key in self.queues.head(queue, count)]

    def _for_member(self, process: Process) -> Iterable[Request]:
        """The allocation bound to ``process`` and the allocations waiting on its pool."""
        pool_name = process.metadata.annotations.get(ann.POOL)
        if not pool_name:
            return []
        ns = process.metadata.namespace or "default"
        out: list[Request] = []
        bound = process.metadata.annotations.get(ann.ALLOCATION)
        if bound:
            out.append(Request(ns, bound))
        if not could_be_bound(process):
            return out  # a member that is not free gives the waiting allocations nothing to bind
        pool = self.pools.get(f"{ns}/{pool_name}")
        if pool is not None:
            out.extend(self._head_of(pool))
        return out

    def _for_pool(self, pool: EphemeralPool) -> Iterable[Request]:
        return [Request.of(a) for a in self._waiting_in(pool.metadata.namespace or "default")]

    def _behind(self, allocation: EphemeralAllocation) -> Iterable[Request]:
        """An allocation left (or joined) a queue out of turn: the head of that queue may now bind."""
        ns = allocation.metadata.namespace or "default"
        pool = route(allocation, self.pools.by_index(BY_NAMESPACE, ns))
        if pool is None:
            return []
        return [r for r in self._head_of(pool) if r.name != allocation.metadata.name]

    def observe(self, allocation: EphemeralAllocation) -> AllocationObserved:
        """The snapshot of ``allocation``'s world from the caches (no API calls)."""
        ns = allocation.metadata.namespace or "default"
        members = tuple(p for p in self.processes.by_index(BY_NAMESPACE, ns) if ann.POOL in p.metadata.annotations)
        key = object_key(allocation)
        return AllocationObserved(
            allocation=allocation,
            pools=tuple(self.pools.by_index(BY_NAMESPACE, ns)),
            members=members,
            now=self.clock(),
            queue_position=(self.queues.position_past_claims(key, _claim_holders(ns, members))
                            if is_waiting(allocation) else None),
            claimed=self._claimed(allocation),
            spawn_timeout=self.spawn_timeout,
            heartbeat_seconds=self.heartbeat_seconds,
            other_shard_pools=self._other_shard_pools(ns),
        )

    def _other_shard_pools(self, namespace: str) -> tuple[EphemeralPool, ...]:
        """The pools of ``namespace`` another shard owns: in :attr:`every_pool`, not in :attr:`pools`."""
        if self.every_pool is None:
            return ()
        return tuple(p for p in self.every_pool.by_index(BY_NAMESPACE, namespace)
                     if self.pools.get(object_key(p)) is None)

    async def reconcile(self, request: Request) -> Result:
        key = str(request)
        allocation = self.allocations.get(key)
        if allocation is None:
            self.executor.allocation_writes.forget(key)
            return Result.done()  # gone: the ALLOCATION finalizer kept it until its member was returned
        if self.executor.allocation_writes.lagging(key, allocation.metadata.resource_version):
            # the cache does not show our last status write yet: deciding now would write it again
            return Result(requeue_after=LAG_REQUEUE_SECONDS, urgent=True)
        if self.dynamic and self._other_shard_pools(allocation.metadata.namespace or "default"):
            # a pool of this namespace is on its way to or from this member (docs/architecture.md#dynamic-sharding):
            # deciding now could route past it; the sharder moves the namespace as one, so wait for it
            log.debug("allocation %s: its namespace is moving between members; deciding again in %.0f s", key,
                      MOVING_REQUEUE)
            return Result.after(MOVING_REQUEUE)
        with log_context(phase=allocation.phase.value):
            return await finalize(self.executor.client, EPHEMERAL_ALLOCATIONS, fin.ALLOCATION, allocation,
                                  self._pass, needed=lambda a: not a.phase.is_terminal)

    async def _pass(self, step: Apply[EphemeralAllocation] | Cleanup[EphemeralAllocation]) -> Outcome:
        """Decide — a bind on the live allocation — and execute; released once a deleting allocation is
        (or with this pass becomes) Released or Failed, or never held a member."""
        observed = self.observe(step.obj)

        def decide(allocation: EphemeralAllocation) -> AllocationDecision:
            return self.decide(dataclasses.replace(observed, allocation=allocation))

        basis = await decide_on_live(self.executor.client, EPHEMERAL_ALLOCATIONS, step.obj, decide,
                                     needs_live=needs_live_read, decode=decode_allocation)
        if basis is None:
            return Outcome(Result.done())  # deleted since it was cached
        decision = basis.decision
        if tracing.enabled:
            tracing.annotate(tatara_phase_before=basis.obj.phase.value, tatara_decision=decision.action,
                             tatara_decision_requeue_after=(decision.requeue_after
                                                            if decision.requeue_after is not None else -1))
        if decision.claim is not None or decision.status is not None:
            log.info("allocation pass: %s", decision.action)
        guard = basis.obj.metadata.resource_version if basis.live else None
        result = await self.executor.execute_allocation(basis.obj, decision, observed.now, resource_version=guard)
        return Outcome(result, released=decision.released)
