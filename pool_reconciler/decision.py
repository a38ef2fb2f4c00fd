"""The contract between the pure pool/allocation decisions and the executor that performs their I/O.

``pool_decide`` and ``allocation_decide`` are pure functions ``(Observed) -> Decision``
(DESIGN §3 "Pure decisions, thin effects"): they read only the snapshot they are given —
the object, the member Processes and allocations from the informer caches, ``now`` — and
return what to write. The executor applies a Decision in a fixed order: finalizer add →
member creates → member patches (each guarded by its ``resource_version`` when set: a 409
means another writer won, so re-decide) → member deletes → extra object applies (reset
Jobs) → status patch → Events → finalizer removal → requeue.

— spec/pool-reconciler.md §4, §5; DESIGN §2.10.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process

__all__ = [
    "DEFAULT_HEARTBEAT_SECONDS",
    "DEFAULT_SPAWN_TIMEOUT",
    "AllocationDecision",
    "AllocationObserved",
    "Event",
    "MemberCreate",
    "MemberDelete",
    "MemberPatch",
    "PoolDecision",
    "PoolObserved",
]

DEFAULT_HEARTBEAT_SECONDS = 30.0
"""The reference's ``--heartbeat-seconds`` default (spec §3.6)."""

DEFAULT_SPAWN_TIMEOUT = timedelta(minutes=10)
"""The reference's ``--spawn-timeout`` default (spec §5.9), enforced here."""


@dataclass(frozen=True)
class Event:
    """A core/v1 Event on the reconciled object: ``type``, CamelCase ``reason``, a sentence."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class MemberCreate:
    """POST one member Process (spec §4.7). ``document`` is the full wire document."""

    slot: int
    name: str
    document: dict[str, Any]


@dataclass(frozen=True)
class MemberPatch:
    """JSON merge patch on a member Process (no ``force``, no field manager; D1).

    ``resource_version``: when set it is also in ``patch["metadata"]["resourceVersion"]``,
    so the API server answers 409 if the member changed since it was observed — the
    exclusive claim of DESIGN §2.10. ``reason`` names the step (``Bind``, ``ReturnKeep``…).
    """

    name: str
    patch: dict[str, Any]
    reason: str
    resource_version: str | None = None


@dataclass(frozen=True)
class MemberDelete:
    """DELETE one member Process; ``reason`` names the step (``ScaleDown``, ``ReplaceFailed``…)."""

    name: str
    reason: str


@dataclass(frozen=True)
class PoolObserved:
    """What a pool pass reads; everything from caches, nothing fetched.

    Attributes:
        pool: the EphemeralPool.
        members: Processes of the pool's namespace whose ``tatara.pleme.io/pool`` annotation is the
            pool's name (spec §4.1 step 3), in any order (decisions sort by name).
        now: the current instant (UTC), injected.
        reset_jobs: member name → outcome of its reset Job: True succeeded, False failed, None still
            running; a member absent from the map has no Job (Reset return policy, spec §4.11).
        reset_image: the reset Job image (``--reset-image``), default per spec §7.8.
        heartbeat_seconds: the requeue interval (spec §3.6).
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
        apply: other documents to server-side apply (reset Jobs).
        status: JSON merge patch body for the pool's ``/status`` (``{"status": {...}}``), or None when
            the status is unchanged — our own writes never retrigger a pass (D2).
        add_finalizer / remove_finalizer: the ``tatara.pleme.io/pool-finalizer``.
        events: Events on the pool.
        member_counts: members per state name, for ``tatara_pool_members{pool,state}``.
        requeue_after: seconds until the next pass (None: wait for a watch event).
    """

    create: tuple[MemberCreate, ...] = ()
    patch: tuple[MemberPatch, ...] = ()
    delete: tuple[MemberDelete, ...] = ()
    apply: tuple[dict[str, Any], ...] = ()
    status: dict[str, Any] | None = None
    add_finalizer: bool = False
    remove_finalizer: bool = False
    events: tuple[Event, ...] = ()
    member_counts: Mapping[str, int] = field(default_factory=dict)
    requeue_after: float | None = None


@dataclass(frozen=True)
class AllocationObserved:
    """What an allocation pass reads; everything from caches, nothing fetched.

    Attributes:
        allocation: the EphemeralAllocation.
        pools: EphemeralPools of the allocation's namespace (spec §5.1 step 2).
        members: Processes carrying a ``tatara.pleme.io/pool`` annotation in that namespace.
        allocations: every EphemeralAllocation of the namespace (this one included) — for the FIFO
            order of waiting allocations and for members already claimed in another's status.
        now: the current instant (UTC), injected.
        spawn_timeout: how long an allocation may wait for a member before it is Failed (spec §5.9).
        heartbeat_seconds: the requeue interval (spec §3.6).
    """

    allocation: EphemeralAllocation
    pools: tuple[EphemeralPool, ...]
    members: tuple[Process, ...]
    now: datetime
    allocations: tuple[EphemeralAllocation, ...] = ()
    spawn_timeout: timedelta = DEFAULT_SPAWN_TIMEOUT
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS


@dataclass(frozen=True)
class AllocationDecision:
    """What one allocation pass writes. An all-default decision writes nothing.

    Attributes:
        action: the §7.3 decision name (``Bind``, ``Wait``, ``Release``…), for logs and metrics.
        claim: the resourceVersion-guarded bind patch on the chosen member (spec §5.5, corrected);
            the executor writes ``status`` only if it succeeds, and re-decides on 409.
        member_patch: an unguarded member patch (the ``return-trigger`` stamp, spec §5.7).
        status: JSON merge patch body for the allocation's ``/status``, or None when unchanged.
        add_finalizer / remove_finalizer: the ``tatara.pleme.io/allocation-finalizer``.
        events: Events on the allocation (one per phase change).
        requeue_after: seconds until the next pass (None: wait for a watch event).
    """

    action: str
    claim: MemberPatch | None = None
    member_patch: MemberPatch | None = None
    status: dict[str, Any] | None = None
    add_finalizer: bool = False
    remove_finalizer: bool = False
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
