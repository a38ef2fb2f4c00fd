"""The thin shell: performs a :class:`~pool_reconciler.decision.PoolDecision` or
:class:`~pool_reconciler.decision.AllocationDecision` as API calls. It decides nothing.

One order for both kinds (a decision leaves out the steps it has nothing for):

1. **the claim** — the bind patch guarded by the member's resourceVersion. If it loses (409: another
   allocation or the pool changed the member since it was observed) or the member is gone, nothing
   else of the decision is written, the allocation's status in particular, and the allocation is
   decided again in :data:`RETRY_AFTER_CONFLICT` seconds from the updated caches;
2. **member creates** (409 AlreadyExists: an earlier pass created it);
3. **member patches** (a guarded one that loses makes the pass come back in
   :data:`RETRY_AFTER_CONFLICT` seconds, after the rest is written);
4. **member deletes** (404 tolerated); one guarded by the member's resourceVersion that loses (409:
   the member changed since observed, e.g. an allocation claimed it) is not deleted, and the pass
   comes back in :data:`RETRY_AFTER_CONFLICT` seconds;
5. **reset Jobs**, server-side applied as :data:`FIELD_MANAGER`; one the API server refuses for good
   (403 RBAC, 400/422 admission or validation) gets a Warning Event ``ResetRefused`` on the pool with
   the server's message before the error is raised (the pass backs off and retries; without the Event
   nothing on the pool said why its returned member never came back);
6. **the ``/status`` merge patch**, skipped when it changes nothing; guarded by the resourceVersion the
   decision was made on when the controller read the object live (a 409 means "decide again"). The
   resourceVersion each status write returns is remembered (:attr:`Executor.pool_writes`,
   :attr:`Executor.allocation_writes`), so the controllers do not decide again on a cache that does not
   show it yet (which wrote each Queued status twice, and sent a pool's Warning twice: docs/runtime.md#own-writes);
7. **Events**;
8. **the result**: requeue after ``decision.requeue_after``.

Every Process write is a plain JSON merge patch or POST (no ``force``, no field manager;
docs/divergences.md#allocation-bind). Finalizers are not written here: the controller runs each pass under
:func:`shared.kube.finalizer.finalize`, which adds the finalizer before step 1 and removes it after
step 8 once the decision says ``released``.

Metrics: ``tatara_pool_binds_total`` per claim outcome, ``tatara_allocation_bind_seconds`` per won
claim, ``tatara_pool_releases_total`` per member return (counted once per return, see
:func:`pool_reconciler.returns.return_mark`) and per allocation reaching Released.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime
from typing import Final

import msgspec

from pool_reconciler.decision import AllocationDecision, MemberPatch, PoolDecision
from pool_reconciler.metrics import PoolMetrics
from pool_reconciler.reasons import PoolReason
from pool_reconciler.returns import SeenReturns, return_mark
from shared.domain.api.allocation import AllocationPhase, EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.controller import Result
from shared.kube.errors import AlreadyExists, BadRequest, Conflict, Forbidden, Invalid, NotFound
from shared.kube.events import Event, EventRecorder
from shared.kube.expectations import WriteExpectations
from shared.kube.meta import ObjectMeta
from shared.kube.patch import apply, patch_status

__all__ = ["FIELD_MANAGER", "RETRY_AFTER_CONFLICT", "Executor"]

log = logging.getLogger(__name__)

FIELD_MANAGER: Final = "tatara-pool-reconciler"
"""Field manager of the reset Job apply (docs/wire-format.md#field-managers)."""

RETRY_AFTER_CONFLICT: Final = 0.05
"""Seconds before deciding again after a lost guarded write: long enough for the watch to deliver the
winner's write into the cache, short enough that the loser queues or binds at once."""


class _Stored(msgspec.Struct):
    """The part of a patched member the executor reads back: its metadata (uid, resourceVersion)."""

    metadata: ObjectMeta = ObjectMeta()


class Executor:
    """Performs pool and allocation decisions.

    Args:
        client: the shared API client.
        recorder: Event recorder.
        metrics: domain metrics.

    Attributes:
        pool_writes / allocation_writes: per ``<ns>/<name>``, the resourceVersion of the last pool /
            allocation status write, until that cache shows it (read by the controllers).
    """

    def __init__(self, client: KubeApi, recorder: EventRecorder, metrics: PoolMetrics) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.pool_writes = WriteExpectations()
        self.allocation_writes = WriteExpectations()
        self._returns = SeenReturns()

    async def execute_pool(self, pool: EphemeralPool, decision: PoolDecision) -> Result:
        """Carry out ``decision`` for ``pool`` (the cached object it was decided on), steps 2–8.

        Raises:
            shared.kube.errors.ApiError: a write failed; the controller backs off and retries the
                whole reconcile, which decides again from fresh state.
        """
        ns, name = pool.metadata.namespace or "default", pool.metadata.name or ""
        for create in decision.create:
            with contextlib.suppress(AlreadyExists):  # an earlier pass created it
                await self.client.create(PROCESSES, create.process.to_json(), ns)
        lost = False
        for patch in decision.patch:
            stored = await self._member_patch(ns, patch)
            if stored is None:
                lost = True
            else:
                self._count_return(ns, patch, stored)
        for delete in decision.delete:
            try:
                await self.client.delete(PROCESSES, delete.name, ns, resource_version=delete.resource_version)
            except NotFound:
                pass
            except Conflict:  # the member changed since observed (claimed, say): decide again
                log.info("member %s/%s changed since observed (%s); not deleted", ns, delete.name, delete.reason)
                lost = True
        for job in decision.apply:
            try:
                await apply(self.client, JOBS, job, field_manager=FIELD_MANAGER)
            except (Forbidden, Invalid, BadRequest) as refused:
                await self.recorder.emit(EPHEMERAL_POOLS, pool, Event.warning(
                    PoolReason.RESET_REFUSED, f"reset Job {job.metadata.name} refused: {refused}"))
                raise
        if decision.status is not None:
            written = await patch_status(self.client, EPHEMERAL_POOLS, ns, name, decision.status, current=pool)
            self._wrote(self.pool_writes, ns, name, written)
        await self._events(EPHEMERAL_POOLS, pool, decision.events)
        return Result.after(RETRY_AFTER_CONFLICT) if lost else Result(requeue_after=decision.requeue_after)

    async def execute_allocation(self, allocation: EphemeralAllocation, decision: AllocationDecision,
                                 now: datetime, *, resource_version: str | None = None) -> Result:
        """Carry out ``decision`` for ``allocation`` (the object it was decided on), steps 1, 3, 6–8.

        ``resource_version``: the guard of the status write (the allocation was read live), or None.
        ``now``: the instant of the decision, for the bind latency.

        Raises:
            shared.kube.errors.ApiError: a write failed (see :meth:`execute_pool`).
        """
        ns, name = allocation.metadata.namespace or "default", allocation.metadata.name or ""
        if decision.claim is not None and not await self._claim(ns, allocation, decision.claim, now):
            return Result.after(RETRY_AFTER_CONFLICT)
        if decision.member_patch is not None:
            await self._member_patch(ns, decision.member_patch)
        if decision.status is not None:
            try:
                written = await patch_status(self.client, EPHEMERAL_ALLOCATIONS, ns, name, decision.status,
                                             current=allocation, resource_version=resource_version)
            except Conflict:
                log.info("allocation %s/%s changed since it was read; deciding again", ns, name)
                return Result.after(RETRY_AFTER_CONFLICT)
            self._wrote(self.allocation_writes, ns, name, written)
            if decision.status.phase is AllocationPhase.RELEASED:
                self.metrics.releases.labels("released").inc()
        await self._events(EPHEMERAL_ALLOCATIONS, allocation, decision.events)
        return Result(requeue_after=decision.requeue_after)

    async def _claim(self, ns: str, allocation: EphemeralAllocation, claim: MemberPatch, now: datetime) -> bool:
        """Write the claim; False when it lost. Counts the outcome and, when won, the bind latency."""
        try:
            stored = await self._member_patch(ns, claim)
        except Exception:
            self.metrics.binds.labels("error").inc()
            raise
        if stored is None:
            self.metrics.binds.labels("conflict").inc()
            return False
        self.metrics.binds.labels("bound").inc()
        created = allocation.metadata.creation_timestamp
        if created is not None:
            self.metrics.bind_seconds.observe(max((now - created).total_seconds(), 0.0))
        return True

    async def _member_patch(self, ns: str, patch: MemberPatch) -> ObjectMeta | None:
        """Write one member patch: the member's metadata as stored, or None when the patch lost its
        resourceVersion guard (409) or the member is gone."""
        try:
            raw = await self.client.merge_patch(PROCESSES, patch.name, patch.patch.to_json(), ns)
        except Conflict:
            log.info("member %s/%s changed since observed (%s); deciding again", ns, patch.name, patch.reason)
            return None
        except NotFound:
            log.info("member %s/%s is gone (%s); deciding again", ns, patch.name, patch.reason)
            return None
        return msgspec.json.decode(raw, type=_Stored).metadata

    @staticmethod
    def _wrote(expectations: WriteExpectations, ns: str, name: str, written: bytes | None) -> None:
        """Remember the resourceVersion a status write returned (none when nothing was sent)."""
        if written is not None:
            expectations.wrote(f"{ns}/{name}", msgspec.json.decode(written, type=_Stored).metadata.resource_version)

    def _count_return(self, ns: str, patch: MemberPatch, stored: ObjectMeta) -> None:
        mark = return_mark(ns, patch, stored)
        outcome = patch.reason.return_outcome
        if mark is not None and outcome is not None and self._returns.first_time(mark):
            self.metrics.releases.labels(outcome).inc()

    async def _events(self, resource: Resource, obj: EphemeralPool | EphemeralAllocation,
                      events: tuple[Event, ...]) -> None:
        for event in events:
            await self.recorder.emit(resource, obj, event)
