"""The contract between the pure pool/allocation decisions and the executor that performs their I/O.

:func:`pool_reconciler.pool_decide.pool_decide` and :func:`pool_reconciler.allocation_decide.allocation_decide`
are pure functions ``(Observed) -> Decision`` (docs/architecture.md#one-reconcile): they read only the
snapshot they are given — the object, the member Processes and allocations from the informer caches,
``now`` — and return what to write, as typed values: member Processes
(:class:`~shared.domain.api.process.Process`), merge patches (:mod:`pool_reconciler.patches`), reset
Jobs (:class:`~shared.domain.manifests.batch.Job`) and Events. :mod:`pool_reconciler.executor` writes
them in one fixed order (docs/architecture.md#the-executor-order). Finalizers are not part of a
decision: the controller runs each pass under :func:`shared.kube.finalizer.finalize`, and a decision
only says whether the object is ``released`` (holds nothing any more, so its finalizer may go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from pool_reconciler.patches import AllocationStatusPatch, PoolStatusPatch, ProcessPatch
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.manifests.batch import Job
from shared.kube.events import Event

__all__ = [
    "DEFAULT_HEARTBEAT_SECONDS",
    "DEFAULT_SPAWN_TIMEOUT",
    "AllocationDecision",
    "AllocationObserved",
    "DeleteReason",
    "MemberCreate",
    "MemberDelete",
    "MemberPatch",
    "MemberWrite",
    "PoolDecision",
    "PoolObserved",
]

DEFAULT_HEARTBEAT_SECONDS = 30.0
"""Seconds between passes when nothing happens (``--heartbeat-seconds``;
docs/behaviour.md#tatara-pool-reconciler-flags)."""

DEFAULT_SPAWN_TIMEOUT = timedelta(minutes=10)
"""How long an allocation may wait for a member before it is Failed (``--spawn-timeout``;
docs/behaviour.md#spawn-timeout)."""


@dataclass(frozen=True)
class MemberCreate:
    """POST one member Process: ``process`` is the whole object (written with ``to_wire``) for ``slot``."""

    slot: int
    process: Process

    @property
    def name(self) -> str:
        return self.process.metadata.name or ""


class MemberWrite(StrEnum):
    """Why a member Process is patched; the return steps name the ``tatara_pool_releases_total`` outcome."""

    BIND = "Bind"
    """The exclusive claim of a free member by an allocation."""
    RELEASE = "Release"
    """The allocation stamps ``return-trigger``: the pool takes the member back."""
    RETURN_KEEP = "ReturnKeep"
    RETURN_RESET = "ReturnReset"
    RETURN_REPLACE = "ReturnReplace"

    @property
    def return_outcome(self) -> str | None:
        """``keep`` / ``reset`` / ``replace`` for a return step, None otherwise."""
        return _RETURN_OUTCOMES.get(self)


_RETURN_OUTCOMES: Mapping[MemberWrite, str] = {
    MemberWrite.RETURN_KEEP: "keep",
    MemberWrite.RETURN_RESET: "reset",
    MemberWrite.RETURN_REPLACE: "replace",
}


@dataclass(frozen=True)
class MemberPatch:
    """A JSON merge patch of member ``name`` (no ``force``, no field manager: docs/divergences.md#allocation-bind).

    When ``patch`` carries ``metadata.resourceVersion`` (:attr:`resource_version`) the API server answers
    409 if the member changed since it was observed: the exclusive claim
    (docs/behaviour.md#exclusive-claim). ``reason`` names the step.
    """

    name: str
    patch: ProcessPatch
    reason: MemberWrite

    @property
    def resource_version(self) -> str | None:
        """The guard, or None for an unguarded patch."""
        return self.patch.resource_version


DeleteReason = Literal["Drain", "ScaleDown", "Replace", "ReplaceFailed", "ReturnReplace"]
"""Why a member is deleted: the pool is deleted, it is excess, stale or failed (legacy), failed
(desired-count), or its Replace return finished."""


@dataclass(frozen=True)
class MemberDelete:
    """DELETE one member Process.

    ``resource_version``: when set, the DELETE carries it as a precondition, so a member changed since
    it was observed (claimed by an allocation in between, say) is not deleted: the API server answers
    409 and the pool decides again (docs/behaviour.md#scale-down).
    """

    name: str
    reason: DeleteReason
    resource_version: str | None = None


@dataclass(frozen=True)
class PoolObserved:
    """What a pool pass reads; everything from caches, nothing fetched.

    Attributes:
        pool: the EphemeralPool.
        members: Processes of the pool's namespace whose ``tatara.pleme.io/pool`` annotation is the
            pool's name, in any order (decisions sort by name).
        now: the current instant (UTC), injected.
        reset_jobs: reset Job name → its outcome: True succeeded, False failed, None still running;
            a Job absent from the map does not exist (docs/behaviour.md#return-policies).
        reset_image: the reset Job image (``--reset-image``).
        heartbeat_seconds: the requeue interval.
    """

    pool: EphemeralPool
    members: tuple[Process, ...]
    now: datetime
    reset_jobs: Mapping[str, bool | None] = field(default_factory=dict)
    reset_image: str | None = None
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS


@dataclass(frozen=True)
class PoolDecision:
    """What one pool pass writes. An all-default decision writes nothing.

    Attributes:
        create / patch / delete: member Process writes (see the types).
        apply: reset Jobs to server-side apply.
        status: merge patch of the pool's ``/status``, or None when the stored status already says it
            all (our own writes never retrigger a pass).
        events: Events on the pool.
        released: the pool is being deleted and has no member left: its finalizer may go.
        requeue_after: seconds until the next pass (None: wait for a watch event).
    """

    create: tuple[MemberCreate, ...] = ()
    patch: tuple[MemberPatch, ...] = ()
    delete: tuple[MemberDelete, ...] = ()
    apply: tuple[Job, ...] = ()
    status: PoolStatusPatch | None = None
    events: tuple[Event, ...] = ()
    released: bool = False
    requeue_after: float | None = None


@dataclass(frozen=True)
class AllocationObserved:
    """What an allocation pass reads; everything from caches, nothing fetched.

    Attributes:
        allocation: the EphemeralAllocation.
        pools: EphemeralPools of the allocation's namespace.
        members: Processes carrying a ``tatara.pleme.io/pool`` annotation in that namespace.
        allocations: every EphemeralAllocation of the namespace (this one included) — for the FIFO
            order of waiting allocations and for members already claimed in another's status, when
            ``queue_position`` / ``claimed`` are not given.
        queue_position: how many allocations wait ahead of this one on its pool (the controller's
            FIFO index, :class:`pool_reconciler.fifo.WaitingQueues`); None: computed from ``allocations``.
        claimed: members named in the ``status.assignedProcess`` of another live allocation (the
            controller's index); None: computed from ``allocations``.
        now: the current instant (UTC), injected.
        spawn_timeout: how long an allocation may wait for a member before it is Failed.
        heartbeat_seconds: the requeue interval.
        other_shard_pools: pools of the namespace that another shard owns (a sharded instance's; none
            otherwise): a ``poolRef`` naming one is told so (docs/architecture.md#sharding).
    """

    allocation: EphemeralAllocation
    pools: tuple[EphemeralPool, ...]
    members: tuple[Process, ...]
    now: datetime
    allocations: tuple[EphemeralAllocation, ...] = ()
    queue_position: int | None = None
    claimed: frozenset[str] | None = None
    spawn_timeout: timedelta = DEFAULT_SPAWN_TIMEOUT
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    other_shard_pools: tuple[EphemeralPool, ...] = ()


@dataclass(frozen=True)
class AllocationDecision:
    """What one allocation pass writes. An all-default decision writes nothing.

    Attributes:
        action: what the pass decided (``Bind``, ``Queued``, ``Release``…), for logs.
        claim: the resourceVersion-guarded bind patch on the chosen member; the executor writes
            ``status`` only if it wins, and has the allocation decided again if it loses (409).
        member_patch: an unguarded member patch (the ``return-trigger`` stamp).
        status: merge patch of the allocation's ``/status``, or None when unchanged.
        events: Events on the allocation (one per phase change).
        released: the allocation is being deleted and is (or, with this pass's status, becomes)
            Released or Failed: its finalizer may go.
        requeue_after: seconds until the next pass (None: wait for a watch event).
    """

    action: str
    claim: MemberPatch | None = None
    member_patch: MemberPatch | None = None
    status: AllocationStatusPatch | None = None
    events: tuple[Event, ...] = ()
    released: bool = False
    requeue_after: float | None = None
