"""Dynamic sharding: the instances of a controller form a *ring*; a *sharder* assigns every object to one
member by consistent hashing and moves objects with a drain handshake, so no object is ever reconciled by two
members at once (docs/architecture.md#dynamic-sharding; the design follows the kubernetes-controller-sharding
project's, with keys of the caller's choosing).

- **Membership.** Each member holds a ``coordination.k8s.io/v1`` Lease named after itself and labelled with the
  ring (a :class:`~shared.kube.leader.LeaderElector` with ``labels``), renews it as a leader does, and stops
  working once it cannot renew within its renew deadline. :class:`Membership` counts a member alive while its
  Lease names a holder and that record was last seen changing less than ``leaseDurationSeconds`` ago on the
  sharder's own monotonic clock (client-go's rule for leader election: no two clocks are compared). A released
  Lease (no holder) is a member gone at once.
- **Assignment.** The sharder labels each object ``<shard label>=<member>`` with :func:`pick`'s choice among the
  alive members for the object's hash key: rendezvous (highest random weight) hashing, a consistent hashing in
  which a joining member takes about 1/N of the objects from the others and a leaving one's objects spread over
  the rest, nothing else moving. Each member's informers select ``<shard label>=<itself>``.
- **Moves.** An object whose member is alive but no longer the pick is labelled ``<drain label>=true`` first.
  Its member hands it over (:class:`DrainGate`) in the worker that holds its key, so never while a reconcile of
  it runs there, by removing both labels in one write guarded by the resourceVersion. Only then does the
  sharder label it for the new member. An object of a dead member is relabelled at once: that member stopped
  working before its Lease could expire on the sharder's clock.

:func:`pick` and :func:`decide_move` (:mod:`shared.kube.ring`, re-exported here) are pure and table-tested;
:class:`Sharder` and :class:`DrainGate` only execute their answers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge

from shared.kube.api import KubeApi
from shared.kube.client import LEASES, Resource
from shared.kube.controller import Controller, Request, Result
from shared.kube.errors import ApiError, Conflict, NotFound
from shared.kube.informer import Informer, WatchEventType
from shared.kube.leader import Lease, LeaseSighting
from shared.kube.meta import KubeObject
from shared.kube.metrics import registry as process_registry
from shared.kube.ring import DRAINING, NOTHING, Move, MoveKind, Ring, decide_move, pick, score
from shared.kube.store import object_key

__all__ = [
    "DRAINING",
    "GONE_MEMBER_TTL",
    "DrainGate",
    "Membership",
    "Move",
    "MoveKind",
    "Ring",
    "Sharder",
    "ShardingMetrics",
    "decide_move",
    "forget_gone_members",
    "pick",
    "score",
    "sharding_metrics",
]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)


# ── metrics ─────────────────────────────────────────────────────────────────────────────────────────────────


class ShardingMetrics:
    """``controller_sharding_members{ring}`` (alive members as the sharder sees them),
    ``controller_sharding_assignments_total{ring,resource,reason}`` (sharder writes, :class:`Move` reasons) and
    ``controller_sharding_handovers_total{controller}`` (objects a member handed over when asked to drain)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.members = Gauge("controller_sharding_members",
                             "Alive members of the ring, as the sharder sees them.", ("ring",), registry=registry)
        self.assignments = Counter("controller_sharding_assignments_total",
                                   "Label writes of the sharder, by reason (new, orphaned, rebalance, cancelled).",
                                   ("ring", "resource", "reason"), registry=registry)
        self.handovers = Counter("controller_sharding_handovers_total",
                                 "Objects this member handed over to the sharder after a drain request.",
                                 ("controller",), registry=registry)


_metrics: ShardingMetrics | None = None


def sharding_metrics() -> ShardingMetrics:
    """The sharding metrics on the process registry (created on first call)."""
    global _metrics
    if _metrics is None:
        _metrics = ShardingMetrics(process_registry)
    return _metrics


# ── membership ──────────────────────────────────────────────────────────────────────────────────────────────


class Membership:
    """The alive members of a ring, from an informer of its member Leases (selector :attr:`Ring.lease_selector`).

    Args:
        leases: the Lease informer; build this before it runs, so every record is timed from its first sighting.
        clock: monotonic seconds (default :func:`time.monotonic`).
    """

    def __init__(self, leases: Informer[Lease], *, clock: Callable[[], float] = time.monotonic) -> None:
        self.leases = leases
        self._clock = clock
        self._seen: dict[str, LeaseSighting] = {}
        self.last: dict[str, Lease] = {}
        """Each member's Lease as last seen (its resourceVersion guards a delete)."""
        self._wakes: set[anyio.Event] = set()
        """One per running :meth:`watch` (several sharders may share a membership)."""
        leases.add_handler(self._on_lease)

    def _on_lease(self, event: WatchEventType, old: Lease | None, new: Lease) -> None:
        name = new.metadata.name or ""
        if event is WatchEventType.DELETED:
            self._seen.pop(name, None)
            self.last.pop(name, None)
        else:
            self.last[name] = new
            seen = self._seen.get(name)
            if seen is None or seen.spec != new.spec:
                self._seen[name] = LeaseSighting(new.spec, self._clock())
        for wake in self._wakes:
            wake.set()

    def alive(self, now: float | None = None) -> frozenset[str]:
        """The members whose Lease names a holder and was seen changing less than its ``leaseDurationSeconds``
        before ``now`` (default: the clock's now)."""
        at = self._clock() if now is None else now
        return frozenset(name for name, seen in self._seen.items()
                         if seen.spec.holder_identity and at < seen.at + (seen.spec.lease_duration_seconds or 0))

    def gone_since(self, now: float | None = None) -> dict[str, float]:
        """Members not alive, with the seconds since they stopped being alive (a released Lease: since it was
        seen released)."""
        at = self._clock() if now is None else now
        out: dict[str, float] = {}
        for name, seen in self._seen.items():
            end = seen.at + (seen.spec.lease_duration_seconds or 0) if seen.spec.holder_identity else seen.at
            if at >= end:
                out[name] = at - end
        return out

    def next_expiry(self, now: float | None = None) -> float | None:
        """Seconds until the next alive member's Lease expires on our clock; None when none is alive."""
        at = self._clock() if now is None else now
        ends = [seen.at + (seen.spec.lease_duration_seconds or 0) - at for seen in self._seen.values()
                if seen.spec.holder_identity]
        ahead = [end for end in ends if end > 0]
        return min(ahead) if ahead else None

    async def watch(self, on_change: Callable[[frozenset[str]], None]) -> None:
        """Call ``on_change(alive)`` now and each time the alive set changes (a Lease event, or a Lease expiring
        on our clock), until cancelled."""
        last: frozenset[str] | None = None
        while True:
            wake = anyio.Event()
            self._wakes.add(wake)
            try:
                current = self.alive()
                if current != last:
                    on_change(current)
                    last = current
                expiry = self.next_expiry()
                with anyio.move_on_after(math.inf if expiry is None else expiry + 0.001):
                    await wake.wait()
            finally:
                self._wakes.discard(wake)


GONE_MEMBER_TTL: Final = 60.0
"""Seconds a member's Lease stays after the member is gone before :func:`forget_gone_members` deletes it (a pod
restarted in place takes its Lease back well within it; a deleted pod's name never comes back)."""


async def forget_gone_members(client: KubeApi, membership: Membership, *, after: float = GONE_MEMBER_TTL,
                              every: float = 10.0) -> None:
    """Every ``every`` seconds, delete the member Leases gone (released, or expired on our clock) for more than
    ``after`` seconds, each guarded by the resourceVersion it was seen at, so a member that came back is kept. Run
    by the ring's sharder; until cancelled."""
    while True:
        for name, gone in membership.gone_since().items():
            lease = membership.last.get(name)
            if gone <= after or lease is None:
                continue
            try:
                await client.delete(LEASES, name, lease.metadata.namespace,
                                    resource_version=lease.metadata.resource_version)
                log.info("deleted the Lease of member %s, gone for %.0f s", name, gone)
            except (Conflict, NotFound):
                pass  # it came back, or is gone already
            except ApiError as err:
                log.warning("could not delete the Lease of gone member %s: %s", name, err)
        await anyio.sleep(every)


# ── the sharder ─────────────────────────────────────────────────────────────────────────────────────────────


class Sharder(Generic[T]):
    """Assigns the objects of one resource to the ring's members (module docstring). Run it under a Lease of its
    own (one sharder per ring): ``LeaderElector(...).run(sharder.run)``; several resources may share a ring, each
    with its own Sharder and one shared :class:`Membership`.

    Args:
        client: the API client (``patch`` on the resource).
        resource: the resource of the objects.
        objects: an informer of every object of the ring's scope (not only one member's).
        membership: the ring's members.
        ring: the ring's keys.
        hash_key: the key an object is hashed by (objects with equal keys share a member).
        in_scope: whether an object of ``objects`` belongs to the ring at all (default: every one).
        workers: concurrent label writes.
        metrics: where the counts go (default :func:`sharding_metrics`).
    """

    def __init__(self, client: KubeApi, resource: Resource, objects: Informer[T], membership: Membership,
                 ring: Ring, *, hash_key: Callable[[T], str], in_scope: Callable[[T], bool] = lambda _: True,
                 workers: int = 4, metrics: ShardingMetrics | None = None) -> None:
        self.client = client
        self.resource = resource
        self.objects = objects
        self.membership = membership
        self.ring = ring
        self.hash_key = hash_key
        self.in_scope = in_scope
        self.metrics = metrics or sharding_metrics()
        self.alive: frozenset[str] | None = None
        """The members assignments are made to; None until the Lease informer has synced."""
        self.controller: Controller[T] = Controller(f"sharder-{resource.plural}", objects, self.reconcile,
                                                    workers=workers)

    def _members_changed(self, alive: frozenset[str]) -> None:
        if alive != self.alive:
            log.info("ring %s: %d alive members: %s", self.ring.name, len(alive), ", ".join(sorted(alive)) or "none")
        self.alive = alive
        self.metrics.members.labels(self.ring.name).set(len(alive))
        keys = self.objects.keys()
        for key in keys:
            namespace, _, name = key.rpartition("/")
            self.controller.queue.add(Request(namespace or None, name))

    async def run(self) -> None:
        """Wait for the member Leases to sync, then assign until cancelled."""
        await self.membership.leases.wait_synced()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.membership.watch, self._members_changed)
            tg.start_soon(self.controller.run)

    def decide(self, obj: T) -> Move:
        """The move for ``obj`` among :attr:`alive` (nothing before the members are known, or out of scope)."""
        if self.alive is None or not self.in_scope(obj):
            return NOTHING
        labels: Mapping[str, str] = getattr(obj.metadata, "labels", None) or {}
        return decide_move(labels, shard_label=self.ring.shard_label, drain_label=self.ring.drain_label,
                           desired=pick(self.hash_key(obj), self.alive), alive=self.alive)

    async def reconcile(self, request: Request) -> Result:
        obj = self.objects.get(str(request))
        if obj is None:
            return Result.done()
        move = self.decide(obj)
        if move.kind is MoveKind.NONE:
            return Result.done()
        await _patch_labels(self.client, self.resource, obj, move.labels)  # a 409 retries with the cache's news
        self.metrics.assignments.labels(self.ring.name, self.resource.plural, move.reason).inc()
        log.debug("ring %s: %s %s (%s): %s", self.ring.name, self.resource.plural, request, move.reason,
                  dict(move.labels))
        return Result.done()


async def _patch_labels(client: KubeApi, resource: Resource, obj: Any, labels: Mapping[str, str | None]) -> None:
    """Merge-patch ``labels`` onto ``obj``, guarded by the resourceVersion it was read at (409 when it changed
    since); an object deleted meanwhile is left alone.

    Raises:
        shared.kube.errors.Conflict: the object changed since it was read.
        shared.kube.errors.ApiError: another refusal.
    """
    meta = obj.metadata
    patch = {"metadata": {"resourceVersion": meta.resource_version, "labels": dict(labels)}}
    with contextlib.suppress(NotFound):
        await client.merge_patch(resource, meta.name or "", patch, meta.namespace or None)


# ── the member's side ───────────────────────────────────────────────────────────────────────────────────────


class DrainGate:
    """A member's hand-over (:meth:`Controller.set_gate <shared.kube.controller.Controller.set_gate>`): a cached
    object carrying the ring's drain label is not reconciled but handed over, by removing the shard and drain
    labels in one resourceVersion-guarded write. It runs in the worker that holds the key, so after any reconcile
    of it here has ended; once the write is made the object leaves this member's informers, and a stale cache
    entry still carries the drain label, so it is never reconciled here again.

    Args:
        client: the API client.
        resource: the controller's primary resource.
        cache: the controller's primary informer.
        ring: the ring's keys.
        controller: the controller's name (metric label).
        metrics: where hand-overs are counted (default :func:`sharding_metrics`).
    """

    def __init__(self, client: KubeApi, resource: Resource, cache: Informer[Any], ring: Ring, *, controller: str,
                 metrics: ShardingMetrics | None = None) -> None:
        self.client = client
        self.resource = resource
        self.cache = cache
        self.ring = ring
        self._handovers = (metrics or sharding_metrics()).handovers.labels(controller)
        self._handed: dict[str, str | None] = {}
        """Key → the resourceVersion it was handed over at, while the cache may still show that version."""
        cache.add_handler(self._forget)

    def _forget(self, event: WatchEventType, old: Any, new: Any) -> None:
        if event is WatchEventType.DELETED and self._handed:
            self._handed.pop(object_key(new), None)

    async def __call__(self, request: Request) -> bool:
        """Hand ``request``'s object over when it is being drained; True when it was (no reconcile then).

        Raises:
            shared.kube.errors.Conflict: the object changed since the cache showed it (retried by the controller).
        """
        key = str(request)
        obj = self.cache.get(key)
        handed = self._handed.pop(key, "")
        if obj is None or self.ring.drain_label not in obj.metadata.labels:
            return False
        if handed == obj.metadata.resource_version:
            self._handed[key] = handed
            return True  # the cache has not shown our hand-over yet: the object is no longer ours
        await _patch_labels(self.client, self.resource, obj, {self.ring.shard_label: None,
                                                              self.ring.drain_label: None})
        self._handed[key] = obj.metadata.resource_version
        self._handovers.inc()
        log.info("handed %s %s over to the sharder of ring %s", self.resource.plural, request, self.ring.name)
        return True
