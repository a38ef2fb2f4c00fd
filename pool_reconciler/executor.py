"""The thin shell: turns a :class:`~pool_reconciler.decision.PoolDecision` or
:class:`~pool_reconciler.decision.AllocationDecision` into API calls.

Order (see :mod:`pool_reconciler.decision`): finalizer add → member creates → member patches
(each guarded by its ``resourceVersion`` when set) → member deletes → extra applies (reset Jobs)
→ status patch → Events → finalizer removal → requeue.

Every write is a plain JSON merge patch (no ``force``, no field manager: the reference's
``force=true`` merge patches were never sent, spec/pool-reconciler.md §3.4, D1), except the reset
Job, which is server-side applied. The exclusive claim (DESIGN §2.10) is the member patch that
carries ``metadata.resourceVersion``: a 409 means another allocation (or the pool) changed the
member since it was observed, so nothing else of the decision is written — the allocation's status
in particular — and the object is requeued at once to decide again from the updated caches.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from datetime import datetime
from typing import Any, Final

import msgspec

from pool_reconciler.decision import AllocationDecision, Event, MemberPatch, PoolDecision
from pool_reconciler.metrics import PoolMetrics
from shared.domain import finalizers as fin
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.controller import Result
from shared.kube.errors import Conflict, NotFound
from shared.kube.events import EventRecorder, EventType
from shared.kube.finalizer import add_finalizer, remove_finalizer
from shared.kube.patch import apply, patch_status

__all__ = ["FIELD_MANAGER", "JOBS", "RETRY_AFTER_CONFLICT", "Executor"]

log = logging.getLogger(__name__)

FIELD_MANAGER: Final = "tatara-pool-reconciler"
"""Field manager of the reset Job apply (spec §3.4)."""

JOBS: Final = Resource("batch", "v1", "jobs", "Job")

RETRY_AFTER_CONFLICT: Final = 0.05
"""Seconds before re-deciding after a lost guarded member patch: long enough for the watch to
deliver the winner's write into the cache, short enough that the loser queues or binds at once."""

_VERSION_MEMORY: Final = 4096
"""Member patches remembered (by namespace, name, reason) to tell a stored change from a no-op."""


class _VersionedMeta(msgspec.Struct):
    resourceVersion: str = ""
    uid: str = ""


class _Versioned(msgspec.Struct):
    metadata: _VersionedMeta = msgspec.field(default_factory=_VersionedMeta)


_RETURN_OUTCOMES: Final = {"ReturnKeep": "keep", "ReturnReset": "reset", "ReturnReplace": "replace"}


class Executor:
    """Performs pool and allocation decisions.

    Args:
        client: the shared API client.
        recorder: Event recorder.
        metrics: domain metrics.
    """

    def __init__(self, client: KubeClient, recorder: EventRecorder, metrics: PoolMetrics) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self._changed = False
        self._last_versions: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._replaced: OrderedDict[str, None] = OrderedDict()  # member UIDs whose Replace was counted

    async def _member_patch(self, ns: str, patch: MemberPatch) -> bool:
        """Write one member patch; False when it lost its resourceVersion guard (409) or the member is gone.

        Sets :attr:`_changed` to whether the API server stored a change: a merge patch that changes
        nothing leaves the resourceVersion as it was (a pass repeated on a lagging cache).
        """
        self._changed = False
        try:
            raw = await self.client.merge_patch(PROCESSES, patch.name, patch.patch, ns)
            meta = msgspec.json.decode(raw, type=_Versioned).metadata
            version = meta.resourceVersion
            key = (ns, patch.name, patch.reason)
            self._changed = self._last_versions.get(key) != version
            if patch.reason == "ReturnReplace":
                # a member is replaced once in its life: a SIGTERM re-sent while the Process reconciler
                # is between stripping the signal and writing Exiting is the same return
                self._changed = meta.uid not in self._replaced
                self._replaced[meta.uid] = None
                while len(self._replaced) > _VERSION_MEMORY:
                    self._replaced.popitem(last=False)
            self._last_versions[key] = version
            self._last_versions.move_to_end(key)
            while len(self._last_versions) > _VERSION_MEMORY:
                self._last_versions.popitem(last=False)
        except Conflict:
            log.info("member %s/%s changed since observed (%s); deciding again", ns, patch.name, patch.reason)
            return False
        except NotFound:
            log.info("member %s/%s is gone (%s); deciding again", ns, patch.name, patch.reason)
            return False
        return True

    async def _events(self, resource: Resource, obj: Any, events: tuple[Event, ...]) -> None:
        for event in events:
            await self.recorder.record(resource, obj, EventType(event.type), event.reason, event.message)

    async def execute_pool(self, pool: EphemeralPool, decision: PoolDecision) -> Result:
        """Carry out ``decision`` for ``pool`` (the cached object it was decided on).

        Raises:
            shared.kube.errors.ApiError: a write failed; the controller backs off and retries the
                whole reconcile, which recomputes the decision from fresh state.
        """
        ns, name = pool.metadata.namespace or "default", pool.metadata.name or ""
        if decision.add_finalizer:
            await add_finalizer(self.client, EPHEMERAL_POOLS, ns, name, fin.POOL, current=pool)
        for create in decision.create:
            with contextlib.suppress(Conflict):  # AlreadyExists: a previous pass created it
                await self.client.create(PROCESSES, create.document, ns)
        lost = False
        for patch in decision.patch:
            if await self._member_patch(ns, patch):
                outcome = _RETURN_OUTCOMES.get(patch.reason)
                if outcome is not None and self._changed:  # count each return once, not per repeated pass
                    self.metrics.releases.labels(outcome).inc()
            else:
                lost = True
        for delete in decision.delete:
            with contextlib.suppress(NotFound):
                await self.client.delete(PROCESSES, delete.name, ns)
        for doc in decision.apply:
            await apply(self.client, JOBS, doc, field_manager=FIELD_MANAGER)
        if decision.status is not None:
            await patch_status(self.client, EPHEMERAL_POOLS, ns, name, decision.status["status"], current=pool)
        await self._events(EPHEMERAL_POOLS, pool, decision.events)
        if decision.remove_finalizer:
            await remove_finalizer(self.client, EPHEMERAL_POOLS, ns, name, fin.POOL, current=pool)
            return Result.done()
        if lost:
            return Result.after(RETRY_AFTER_CONFLICT)
        return Result(requeue_after=decision.requeue_after)

    async def execute_allocation(self, allocation: EphemeralAllocation, decision: AllocationDecision,
                                 now: datetime) -> Result:
        """Carry out ``decision`` for ``allocation`` (the cached object it was decided on).

        The claim goes first; if it loses (409) or its member vanished, nothing else is written and
        the allocation is requeued to decide again (DESIGN §2.10).

        Raises:
            shared.kube.errors.ApiError: a write failed (see :meth:`execute_pool`).
        """
        ns, name = allocation.metadata.namespace or "default", allocation.metadata.name or ""
        if decision.add_finalizer:
            await add_finalizer(self.client, EPHEMERAL_ALLOCATIONS, ns, name, fin.ALLOCATION, current=allocation)
        if decision.claim is not None:
            try:
                won = await self._member_patch(ns, decision.claim)
            except Exception:
                self.metrics.binds.labels("error").inc()
                raise
            if not won:
                self.metrics.binds.labels("conflict").inc()
                return Result.after(RETRY_AFTER_CONFLICT)
            self.metrics.binds.labels("bound").inc()
            created = allocation.metadata.creation_timestamp
            if created is not None:
                self.metrics.bind_seconds.observe(max((now - created).total_seconds(), 0.0))
        if decision.member_patch is not None:
            await self._member_patch(ns, decision.member_patch)
        if decision.status is not None:
            await patch_status(self.client, EPHEMERAL_ALLOCATIONS, ns, name, decision.status["status"],
                               current=allocation)
            if decision.status["status"].get("phase") == "Released":
                self.metrics.releases.labels("released").inc()
        await self._events(EPHEMERAL_ALLOCATIONS, allocation, decision.events)
        if decision.remove_finalizer:
            await remove_finalizer(self.client, EPHEMERAL_ALLOCATIONS, ns, name, fin.ALLOCATION, current=allocation)
            return Result.done()
        return Result(requeue_after=decision.requeue_after)
