"""One EphemeralAllocation pass, pure, in named steps: ``allocation_decide(observed) -> AllocationDecision``.

1. Released or Failed: nothing to do (released, if it is being deleted);
2. :func:`adopt_claimed`: a member already claimed for this allocation (a bind whose status write was
   lost) makes it Bound at once;
3. :func:`route_allocation` (pool and FIFO member choice, :mod:`pool_reconciler.routing`) and
   :func:`allocation_context`;
4. :func:`allocation_action`: the phase table over that context, first matching row wins;
5. the step that writes the action: :func:`heartbeat` (or :func:`member_lost` when a Bound
   allocation's member is gone), :func:`release`, :func:`no_matching_pool`,
   :func:`bind` or :func:`wait`.

Rules: docs/behaviour.md#allocations (phases, exclusive claim, TTL, release, spawn timeout); where they
differ from the reference's: docs/divergences.md#allocation-bind, docs/divergences.md#allocation-release,
docs/divergences.md#allocation-ttl.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pool_reconciler.decision import AllocationDecision, AllocationObserved, MemberPatch, MemberWrite
from pool_reconciler.members import belongs_to_pool
from pool_reconciler.patches import (
    AllocationStatusPatch,
    LifetimePatch,
    MetadataPatch,
    ProcessPatch,
    SpecPatch,
    annotate,
)
from pool_reconciler.reasons import PoolReason
from pool_reconciler.routing import claimed_by_others, free_members, queue_position, route
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationCondition, AllocationPhase, AllocationRef, EphemeralAllocation
from shared.domain.api.codec import format_timestamp
from shared.domain.api.lifetime import EphemeralLifetime, TeardownPolicy
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process
from shared.domain.duration import DurationError, parse_duration
from shared.domain.kstatus import Truth, kstatus_conditions
from shared.domain.sharding import SHARD_KEY, shard_of
from shared.kube.events import Event, EventType

__all__ = [
    "DEFAULT_TTL",
    "RETURN_GRACE",
    "AllocationAction",
    "AllocationContext",
    "Routed",
    "adopt_claimed",
    "allocation_action",
    "allocation_conditions",
    "allocation_context",
    "allocation_decide",
    "bind",
    "bind_patch",
    "heartbeat",
    "member_lost",
    "no_matching_pool",
    "other_shard_message",
    "release",
    "resolve_expiry",
    "route_allocation",
    "wait",
    "with_conditions",
]

DEFAULT_TTL: Final = timedelta(hours=1)
"""The hold when neither the allocation nor the template gives a parsable TTL."""

RETURN_GRACE: Final = timedelta(minutes=10)
"""How long a bound member's own TTL outlives its allocation's ``expiresAt``: the allocation's
expiry (and the pool's return policy) acts first; the member's clock is only a backstop."""


def allocation_decide(obs: AllocationObserved) -> AllocationDecision:
    """One pass over ``obs.allocation`` (see the module docstring for the steps)."""
    deleting = obs.allocation.metadata.deletion_timestamp is not None
    if obs.allocation.phase.is_terminal:
        return AllocationDecision("NoOp", released=deleting)
    adopted = adopt_claimed(obs)
    if adopted is not None:
        return adopted
    routed = route_allocation(obs)
    ctx = allocation_context(obs, routed)
    action = allocation_action(ctx)
    if action.kind == "NoOp":
        return AllocationDecision("NoOp", released=deleting)
    if action.kind == "HeartbeatBound":
        lost = member_lost(obs, ctx)
        return lost if lost is not None else heartbeat(obs, ctx)
    if action.kind in ("Release", "AwaitReturn"):
        return release(obs, action)
    if action.kind == "NoMatchingPool" or routed.pool is None:
        return no_matching_pool(obs)
    if action.kind == "Bind" and routed.member is not None:
        return bind(obs, routed.pool, routed.member)
    return wait(obs, routed.pool)


# ── the phase table ──────────────────────────────────────────────────────────


class AllocationContext(msgspec.Struct, frozen=True, kw_only=True):
    """The input of :func:`allocation_action` (snake_case keys on the wire, as the reference serialises it)."""

    phase: AllocationPhase
    being_deleted: bool
    expires_at: datetime | None = None
    assigned_process: str | None = None
    bound_pool: AllocationRef | None = None
    now: datetime
    matched_pool: AllocationRef | None = None
    free_member: str | None = None


class AllocationAction(msgspec.Struct, frozen=True):
    """What the phase table decides: ``NoOp``, ``Release(pool, member)``, ``HeartbeatBound``,
    ``NoMatchingPool``, ``Bind(pool, member)``, ``Wait(pool)``, or ``AwaitReturn(pool, member)`` (Releasing
    waits for the pool to return the member; it is never routed again)."""

    kind: Literal["NoOp", "Release", "HeartbeatBound", "NoMatchingPool", "Bind", "Wait", "AwaitReturn"]
    pool: AllocationRef | None = None
    member: str | None = None


def allocation_action(ctx: AllocationContext) -> AllocationAction:
    """The phase table, first matching row wins:

    1. Released or Failed → NoOp; 2. being deleted → Release if a member and pool are assigned, else NoOp;
    3. Bound → Release once ``now ≥ expires_at`` (with an assignment), else HeartbeatBound; 4. Releasing →
    AwaitReturn; 5. no matched pool → NoMatchingPool; 6. a free member → Bind; 7. Wait.
    """
    assigned = ctx.assigned_process is not None and ctx.bound_pool is not None
    if ctx.phase.is_terminal:
        return AllocationAction("NoOp")
    if ctx.being_deleted:
        return (
            AllocationAction("Release", ctx.bound_pool, ctx.assigned_process) if assigned else AllocationAction("NoOp")
        )
    if ctx.phase is AllocationPhase.BOUND:
        if ctx.expires_at is not None and ctx.now >= ctx.expires_at and assigned:
            return AllocationAction("Release", ctx.bound_pool, ctx.assigned_process)
        return AllocationAction("HeartbeatBound")
    if ctx.phase is AllocationPhase.RELEASING:
        return AllocationAction("AwaitReturn", ctx.bound_pool, ctx.assigned_process)
    if ctx.matched_pool is None:
        return AllocationAction("NoMatchingPool")
    if ctx.free_member is not None:
        return AllocationAction("Bind", ctx.matched_pool, ctx.free_member)
    return AllocationAction("Wait", ctx.matched_pool)


# ── observing ────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Routed:
    """Where a waiting allocation goes: its ``pool`` (None: no pool matches) and the free ``member`` it gets
    there (None: none is free for it, FIFO)."""

    pool: EphemeralPool | None = None
    member: Process | None = None


def route_allocation(obs: AllocationObserved) -> Routed:
    """Route a waiting (Pending, Queued, NoMatchingPool), not deleting allocation: the pool, and the free
    member at its FIFO position among the allocations waiting there; others are not routed."""
    alloc = obs.allocation
    if not alloc.phase.needs_pool_routing or alloc.metadata.deletion_timestamp is not None:
        return Routed()
    pool = route(alloc, obs.pools)
    if pool is None:
        return Routed()
    claimed = obs.claimed if obs.claimed is not None else claimed_by_others(obs.allocations, alloc)
    candidates = free_members(pool, obs.members, claimed)
    position = (obs.queue_position if obs.queue_position is not None
                else queue_position(alloc, obs.allocations, obs.pools, pool))
    return Routed(pool, candidates[position] if position < len(candidates) else None)


def _ref(pool: EphemeralPool) -> AllocationRef:
    return AllocationRef(name=pool.metadata.name or "", namespace=pool.metadata.namespace or "")


def allocation_context(obs: AllocationObserved, routed: Routed) -> AllocationContext:
    """The phase table's input: the allocation's status and deletion, ``now``, and where it was routed."""
    alloc, st = obs.allocation, obs.allocation.status
    return AllocationContext(
        phase=alloc.phase,
        being_deleted=alloc.metadata.deletion_timestamp is not None,
        expires_at=st.expires_at if st else None,
        assigned_process=st.assigned_process.name if st and st.assigned_process else None,
        bound_pool=st.bound_pool if st else None,
        now=obs.now,
        matched_pool=_ref(routed.pool) if routed.pool is not None else None,
        free_member=routed.member.metadata.name if routed.member is not None else None,
    )


def _owned_by(member: Process | None, allocation: EphemeralAllocation) -> bool:
    return member is not None and member.metadata.annotations.get(ann.ALLOCATION) == allocation.metadata.name


def _members_here(obs: AllocationObserved) -> dict[str, Process]:
    ns = obs.allocation.metadata.namespace
    return {m.metadata.name or "": m for m in obs.members if m.metadata.namespace == ns}


# ── TTL and the claim ────────────────────────────────────────────────────────


def _parse(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError:
        return None


def resolve_expiry(allocation: EphemeralAllocation, pool: EphemeralPool, now: datetime) -> tuple[datetime, str | None]:
    """``(expiresAt, warning)``: now + TTL (``spec.ttl``, else the template ``ttl``, else 1 h; an
    unparsable value falls back to 1 h with a warning), capped by the pool's ``maxAllocationTtl``."""
    text = allocation.spec.ttl or pool.spec.template.ttl
    ttl = _parse(text)
    warning = None
    if ttl is None:
        warning = f"ttl {text!r} does not parse; using 1h"
        ttl = DEFAULT_TTL
    cap = _parse(pool.spec.max_allocation_ttl)
    if cap is not None and cap > timedelta(0) and ttl > cap:
        ttl = cap
    return now + ttl, warning


def bind_patch(allocation: EphemeralAllocation, member: Process, expires_at: datetime, now: datetime) -> MemberPatch:
    """The exclusive claim: a merge patch guarded by the member's resourceVersion that stamps ``requestor``
    / ``requestor-kind`` / ``allocation`` and makes the lifetime ephemeral only (``permanent: null``) with
    ``teardownPolicy: Never`` and a TTL, counted from the member's creation, that ends
    :data:`RETURN_GRACE` after ``expires_at``: never before it."""
    ns, name = allocation.metadata.namespace or "", allocation.metadata.name or ""
    created = member.metadata.creation_timestamp or now
    seconds = math.ceil((expires_at - created + RETURN_GRACE).total_seconds())
    patch = ProcessPatch(
        metadata=MetadataPatch(
            annotations={
                ann.REQUESTOR: ann.qualified_ref(ns, name),
                ann.REQUESTOR_KIND: allocation.spec.requestor.kind,
                ann.ALLOCATION: name,
            },
            resource_version=member.metadata.resource_version or UNSET,
        ),
        spec=SpecPatch(lifetime=LifetimePatch(permanent=None, ephemeral=EphemeralLifetime(
            ttl=f"{seconds}s", teardown_policy=TeardownPolicy.NEVER, max_concurrent=0))),
    )
    return MemberPatch(member.metadata.name or "", patch, MemberWrite.BIND)


# ── the steps ────────────────────────────────────────────────────────────────


_IN_PROGRESS: Final = frozenset({AllocationPhase.PENDING, AllocationPhase.QUEUED, AllocationPhase.NO_MATCHING_POOL,
                                  AllocationPhase.RELEASING})


def allocation_conditions(allocation: EphemeralAllocation, phase: AllocationPhase, reason: str, message: str,
                          now: datetime) -> list[AllocationCondition]:
    """``Ready`` / ``Reconciling`` / ``Stalled`` for ``phase`` (kstatus): Bound → Ready; Pending, Queued,
    NoMatchingPool, Releasing → Reconciling; Failed → Stalled; Released → none True. Each carries
    ``reason``, ``message`` and the allocation's generation; ``lastTransitionTime`` is kept while the
    condition's status holds (docs/behaviour.md#allocation-conditions)."""
    truth = Truth(ready=phase is AllocationPhase.BOUND, reconciling=phase in _IN_PROGRESS,
                  stalled=phase is AllocationPhase.FAILED)
    generation = allocation.metadata.generation
    return kstatus_conditions(
        truth, allocation.status.conditions if allocation.status else [], now,
        lambda type_, status, since: AllocationCondition(type_=type_, status=status, reason=reason, message=message,
                                                         last_transition_time=since, observed_generation=generation))


def with_conditions(allocation: EphemeralAllocation, status: AllocationStatusPatch, reason: str,
                    now: datetime) -> AllocationStatusPatch:
    """``status`` with the conditions of its phase and ``observedGeneration`` (when the object has one)."""
    phase = status.phase if not isinstance(status.phase, UnsetType) else allocation.phase
    message = status.message if not isinstance(status.message, UnsetType) else ""
    generation = allocation.metadata.generation
    return msgspec.structs.replace(
        status, conditions=allocation_conditions(allocation, phase, reason, message, now),
        observed_generation=generation if generation is not None else UNSET)


def phase_change(
    obs: AllocationObserved,
    phase: AllocationPhase,
    message: str,
    *,
    requeue: float | None,
    warning: bool = False,
    reason: str | None = None,
    bound_pool: AllocationRef | UnsetType = UNSET,
) -> AllocationDecision:
    """Move to ``phase`` with ``message`` (and ``bound_pool``): the status (``phaseSince`` now) and one Event
    (``reason`` default: the phase) only when the phase or the message differ from the stored ones."""
    stored = obs.allocation.status
    if stored is not None and stored.phase is phase and stored.message == message:
        return AllocationDecision(phase.value, requeue_after=requeue)
    status = with_conditions(obs.allocation, AllocationStatusPatch(
        phase=phase, phase_since=obs.now, message=message, bound_pool=bound_pool), reason or phase.value, obs.now)
    event = Event(EventType.WARNING if warning else EventType.NORMAL, reason or phase.value, message)
    return AllocationDecision(phase.value, status=status, events=(event,), requeue_after=requeue)


def adopt_claimed(obs: AllocationObserved) -> AllocationDecision | None:
    """A waiting allocation whose member is already claimed for it (annotations ``allocation`` and
    ``requestor`` name it, no ``return-trigger``) is Bound to that member without a new claim."""
    alloc = obs.allocation
    if not alloc.phase.needs_pool_routing or alloc.metadata.deletion_timestamp is not None:
        return None
    me = f"{alloc.metadata.namespace or ''}/{alloc.metadata.name or ''}"
    for member in _members_here(obs).values():
        annotations = member.metadata.annotations
        if not _owned_by(member, alloc) or annotations.get(ann.REQUESTOR) != me or ann.RETURN_TRIGGER in annotations:
            continue
        pool = next((p for p in obs.pools if belongs_to_pool(member, p.metadata.name or "")), None)
        if pool is not None:
            return bind(obs, pool, member)
    return None


def bind(obs: AllocationObserved, pool: EphemeralPool, member: Process) -> AllocationDecision:
    """Bound to ``member``: the guarded claim (none when the member is already ours), status Bound with
    the pool, member, ``allocatedAt`` and ``expiresAt``; with the claim, a Warning when the TTL does not parse."""
    alloc, now = obs.allocation, obs.now
    expires, ttl_warning = resolve_expiry(alloc, pool, now)
    claim = None if _owned_by(member, alloc) else bind_patch(alloc, member, expires, now)
    name = member.metadata.name or ""
    message = f"bound to {name} of pool {pool.metadata.name} until {format_timestamp(expires)}"
    status = AllocationStatusPatch(
        phase=AllocationPhase.BOUND,
        phase_since=now,
        message=message,
        bound_pool=_ref(pool),
        assigned_process=AllocationRef(name=name, namespace=member.metadata.namespace or ""),
        allocated_at=now,
        expires_at=expires,
    )
    status = with_conditions(alloc, status, PoolReason.BOUND, now)
    events = [Event.normal(PoolReason.BOUND, message)]
    if ttl_warning and claim is not None:
        events.append(Event.warning(PoolReason.INVALID_TTL, ttl_warning))
    left = (expires - now).total_seconds()
    return AllocationDecision("Bind", claim=claim, status=status, events=tuple(events),
                              requeue_after=max(min(obs.heartbeat_seconds, left), 1.0))


def heartbeat(obs: AllocationObserved, ctx: AllocationContext) -> AllocationDecision:
    """Bound, not expired: nothing to write; look again at the heartbeat or at expiry, whichever is sooner."""
    beat = obs.heartbeat_seconds
    left = (ctx.expires_at - obs.now).total_seconds() if ctx.expires_at else beat
    return AllocationDecision("HeartbeatBound", requeue_after=max(min(beat, left), 1.0))


def member_lost(obs: AllocationObserved, ctx: AllocationContext) -> AllocationDecision | None:
    """Bound to a member the caches no longer hold (deleted by hand, say), or whose name a member created
    after the bind now carries (the pool refilled the slot): Failed with reason
    ``MemberLost`` and a Warning Event, never Bound to a 404 (docs/behaviour.md#lost-member). None while
    the member is there, or when the status names none."""
    name = ctx.assigned_process
    if name is None:
        return None
    member = _members_here(obs).get(name)
    st = obs.allocation.status
    allocated_at = st.allocated_at if st is not None else None
    created = member.metadata.creation_timestamp if member is not None else None
    # a member of that name created after the bind is a new one on the same slot, never ours
    reborn = (member is not None and not _owned_by(member, obs.allocation) and created is not None
              and allocated_at is not None and created > allocated_at)
    if member is not None and not reborn:
        return None
    pool = ctx.bound_pool.name if ctx.bound_pool is not None else "?"
    message = f"member {name} of pool {pool} is gone; this allocation holds nothing"
    return phase_change(obs, AllocationPhase.FAILED, message, warning=True, reason=PoolReason.MEMBER_LOST, requeue=None)


def release(obs: AllocationObserved, action: AllocationAction) -> AllocationDecision:
    """Expired or deleted: Releasing, with ``return-trigger`` stamped on the member (once); Released once
    the member is no longer ours (Keep/Reset stripped its annotations, Replace removed it, or it is gone)."""
    alloc = obs.allocation
    deleting = alloc.metadata.deletion_timestamp is not None
    member = _members_here(obs).get(action.member or "")
    bound_pool: AllocationRef | UnsetType = action.pool if action.pool is not None else UNSET
    if member is None or not _owned_by(member, alloc):
        done = phase_change(obs, AllocationPhase.RELEASED, "released; member returned to its pool", requeue=None,
                            bound_pool=bound_pool)
        return AllocationDecision("Release", status=done.status, events=done.events, released=deleting)
    trigger = None
    if ann.RETURN_TRIGGER not in member.metadata.annotations:
        trigger = MemberPatch(member.metadata.name or "", annotate({ann.RETURN_TRIGGER: ann.RETURN_TRIGGER_SET}),
                              MemberWrite.RELEASE)
    why = "being deleted" if deleting else "expired"
    releasing = phase_change(obs, AllocationPhase.RELEASING, f"{why}; returning {member.metadata.name} to its pool",
                             requeue=obs.heartbeat_seconds)
    return AllocationDecision(action.kind, member_patch=trigger, status=releasing.status, events=releasing.events,
                              requeue_after=releasing.requeue_after)


def no_matching_pool(obs: AllocationObserved) -> AllocationDecision:
    """No pool matches (or ``poolRef`` names none here): NoMatchingPool, looked at again on the heartbeat
    (or when a pool changes). A ``poolRef`` naming a pool of another shard says so, with reason
    ``PoolOnOtherShard`` (docs/architecture.md#sharding): that shard never sees this allocation."""
    ref = obs.allocation.spec.pool_ref
    if ref is None:
        message = "no pool matches this requestor"
    else:
        elsewhere = next((p for p in obs.other_shard_pools if p.metadata.name == ref.name
                          and p.metadata.namespace == obs.allocation.metadata.namespace), None)
        if elsewhere is not None:
            return phase_change(obs, AllocationPhase.NO_MATCHING_POOL, other_shard_message(obs.allocation, elsewhere),
                                warning=True, reason=PoolReason.POOL_ON_OTHER_SHARD, requeue=obs.heartbeat_seconds)
        message = "poolRef names no pool here"
    return phase_change(obs, AllocationPhase.NO_MATCHING_POOL, message, warning=True, requeue=obs.heartbeat_seconds)


def _shard_text(shard: str | None) -> str:
    return "no shard (unsharded)" if shard is None else f"shard {shard!r}"


def other_shard_message(allocation: EphemeralAllocation, pool: EphemeralPool) -> str:
    """Why an allocation cannot bind to the pool its ``poolRef`` names on another shard, and the fix."""
    pool_shard = shard_of(pool.metadata.labels)
    fix = (f"label the allocation {SHARD_KEY}={pool_shard}" if pool_shard is not None
           else f"remove the allocation's {SHARD_KEY} label")
    return (f"poolRef names pool {pool.metadata.name} on {_shard_text(pool_shard)}, this allocation is on "
            f"{_shard_text(shard_of(allocation.metadata.labels))}: a pool, its members and its allocations live "
            f"on one shard; {fix}")


def wait(obs: AllocationObserved, pool: EphemeralPool) -> AllocationDecision:
    """No member is free for it: Queued on ``pool``, woken no later than its spawn timeout; Failed
    (``SpawnTimeout``) once it has waited that long since its creation."""
    created = obs.allocation.metadata.creation_timestamp
    beat, limit = obs.heartbeat_seconds, obs.spawn_timeout
    if created is not None and obs.now - created >= limit:
        seconds = int(limit.total_seconds())
        message = f"no free member in pool {pool.metadata.name} within the spawn timeout ({seconds}s)"
        return phase_change(obs, AllocationPhase.FAILED, message, warning=True, reason=PoolReason.SPAWN_TIMEOUT,
                            requeue=None)
    requeue = beat
    if created is not None:
        requeue = max(min(beat, (created + limit - obs.now).total_seconds()), 0.1)
    return phase_change(obs, AllocationPhase.QUEUED, f"waiting for a free member of pool {pool.metadata.name}",
                        requeue=requeue, bound_pool=_ref(pool))
