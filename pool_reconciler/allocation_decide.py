"""The pure EphemeralAllocation decision: routing, exclusive bind, expiry, release, timeouts.

``allocation_decide(observed) -> AllocationDecision`` is the whole pass; ``best_match`` (§7.4)
and ``decide_allocation`` (§7.3) are the spec's tables, corrected per DESIGN §2.10 (each
correction a row in docs/divergences.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import msgspec

from pool_reconciler.decision import AllocationDecision, AllocationObserved, Event, MemberPatch
from pool_reconciler.pool_decide import belongs_to_pool, member_state
from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.allocation import AllocationPhase, AllocationRef, EphemeralAllocation
from shared.domain.api.codec import format_timestamp
from shared.domain.api.pool import EphemeralPool, MatchKey, MemberState
from shared.domain.api.process import Process
from shared.domain.duration import DurationError, parse_duration
from shared.kube.patch import annotations_patch

__all__ = [
    "DEFAULT_TTL",
    "RETURN_GRACE",
    "AllocationAction",
    "AllocationContext",
    "allocation_decide",
    "best_match",
    "bind_patch",
    "decide_allocation",
    "free_members",
    "resolve_expiry",
    "route",
]

DEFAULT_TTL: Final = timedelta(hours=1)
"""The hold when neither the allocation nor the template gives a parsable TTL (spec §5.6)."""

RETURN_GRACE: Final = timedelta(minutes=10)
"""How long a bound member's own TTL outlives its allocation's ``expiresAt``: the allocation's
expiry (and the pool's return policy) acts first; the member's clock is only a backstop."""


# ── routing (§6.4, §7.4) ─────────────────────────────────────────────────────


def best_match(candidates: Sequence[EphemeralPool], key: MatchKey) -> EphemeralPool | None:
    """§7.4: among pools whose selector matches, the highest specificity; ties → smallest name."""
    matching = [p for p in candidates if p.spec.selector.matches(key)]
    if not matching:
        return None
    return min(matching, key=lambda p: (-p.spec.selector.specificity, p.metadata.name or ""))


def route(allocation: EphemeralAllocation, pools: Sequence[EphemeralPool]) -> EphemeralPool | None:
    """§6.4: the explicit ``poolRef`` (name and namespace), else :func:`best_match` among the pools
    of the allocation's namespace. Pools being deleted are skipped (they are draining)."""
    ns = allocation.metadata.namespace
    live = [p for p in pools if p.metadata.namespace == ns and p.metadata.deletion_timestamp is None]
    ref = allocation.spec.pool_ref
    if ref is not None:
        return next((p for p in live if p.metadata.name == ref.name and ref.namespace == ns), None)
    return best_match(live, MatchKey.of(allocation.spec.requestor))


# ── the §7.3 table ───────────────────────────────────────────────────────────


class AllocationContext(msgspec.Struct, frozen=True, kw_only=True):
    """The §7.3 decision input (snake_case keys on the wire, as the reference serialises it)."""

    phase: AllocationPhase
    being_deleted: bool
    expires_at: datetime | None = None
    assigned_process: str | None = None
    bound_pool: AllocationRef | None = None
    now: datetime
    matched_pool: AllocationRef | None = None
    free_member: str | None = None


class AllocationAction(msgspec.Struct, frozen=True):
    """§7.3 output: ``NoOp``, ``Release(member, pool)``, ``HeartbeatBound``, ``NoMatchingPool``,
    ``Bind(pool, member)``, ``Wait(pool)``; plus ``AwaitReturn`` (Releasing waits for the pool to
    return the member; never re-routed, D7)."""

    kind: Literal["NoOp", "Release", "HeartbeatBound", "NoMatchingPool", "Bind", "Wait", "AwaitReturn"]
    pool: AllocationRef | None = None
    member: str | None = None


def decide_allocation(ctx: AllocationContext) -> AllocationAction:
    """§7.3, first matching row wins; Releasing (not deleting) waits for the return instead of
    being re-routed (D7)."""
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


# ── member choice (§5.4, D8 corrected) ───────────────────────────────────────


def _claimed_by_status(allocations: Sequence[EphemeralAllocation], me: EphemeralAllocation) -> set[str]:
    """Members named in another live allocation's ``status.assignedProcess``."""
    out: set[str] = set()
    for a in allocations:
        if a.metadata.uid == me.metadata.uid and a.metadata.name == me.metadata.name:
            continue
        if a.status is not None and a.status.assigned_process is not None and not a.phase.is_terminal:
            out.add(a.status.assigned_process.name)
    return out


def free_members(pool: EphemeralPool, members: Sequence[Process], claimed: Collection[str] = ()) -> list[Process]:
    """Members of ``pool`` that may be bound, by name: Free (Attested, permanent, not deleting,
    no ``return-trigger``), no bind annotations, not named in another allocation's status."""
    name = pool.metadata.name or ""
    out = [
        m
        for m in members
        if belongs_to_pool(m, name)
        and m.metadata.namespace == pool.metadata.namespace
        and member_state(m) is MemberState.FREE
        and ann.ALLOCATION not in m.metadata.annotations
        and ann.REQUESTOR not in m.metadata.annotations
        and (m.metadata.name or "") not in claimed
    ]
    return sorted(out, key=lambda m: m.metadata.name or "")


def _fifo_key(a: EphemeralAllocation) -> tuple[str, str]:
    created = a.metadata.creation_timestamp
    return (format_timestamp(created) if created else "", a.metadata.name or "")


def _queue_position(obs: AllocationObserved, pool: EphemeralPool) -> int:
    """How many waiting allocations routed to ``pool`` were created before this one (FIFO)."""
    me = obs.allocation
    ahead = 0
    for other in obs.allocations:
        if other.metadata.name == me.metadata.name or other.metadata.deletion_timestamp is not None:
            continue
        if not other.phase.needs_pool_routing or _fifo_key(other) >= _fifo_key(me):
            continue
        routed = route(other, obs.pools)
        if routed is not None and routed.metadata.name == pool.metadata.name:
            ahead += 1
    return ahead


# ── TTL and bind patch (§5.5, §5.6, D9/D20 corrected) ────────────────────────


def _parse(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError:
        return None


def resolve_expiry(allocation: EphemeralAllocation, pool: EphemeralPool, now: datetime) -> tuple[datetime, str | None]:
    """``(expiresAt, warning)``: now + TTL (``spec.ttl``, else the template ``ttl``, else 1 h; an
    unparsable value falls back to 1 h with a warning), capped by ``maxAllocationTtl`` (§5.6, D9)."""
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
    """The exclusive claim (§5.5, corrected): a resourceVersion-guarded merge patch that stamps
    ``requestor`` / ``requestor-kind`` / ``allocation`` and makes the lifetime ephemeral only
    (``permanent: null``, D6) with ``teardownPolicy: Never`` and a TTL, counted from the member's
    creation, that ends :data:`RETURN_GRACE` after ``expires_at`` (D20): never before it."""
    ns, name = allocation.metadata.namespace or "", allocation.metadata.name or ""
    created = member.metadata.creation_timestamp or now
    seconds = math.ceil((expires_at - created + RETURN_GRACE).total_seconds())
    rv = member.metadata.resource_version
    metadata: dict[str, Any] = {
        "annotations": {
            ann.REQUESTOR: ann.qualified_ref(ns, name),
            ann.REQUESTOR_KIND: allocation.spec.requestor.kind,
            ann.ALLOCATION: name,
        }
    }
    if rv:
        metadata["resourceVersion"] = rv
    patch = {
        "metadata": metadata,
        "spec": {
            "lifetime": {
                "permanent": None,
                "ephemeral": {"ttl": f"{seconds}s", "teardownPolicy": "Never", "maxConcurrent": 0},
            }
        },
    }
    return MemberPatch(name=member.metadata.name or "", patch=patch, reason="Bind", resource_version=rv)


# ── the pass ─────────────────────────────────────────────────────────────────


def _ref(pool: EphemeralPool) -> AllocationRef:
    return AllocationRef(name=pool.metadata.name or "", namespace=pool.metadata.namespace or "")


def _ref_wire(ref: AllocationRef) -> dict[str, str]:
    return {"name": ref.name, "namespace": ref.namespace}


def _status(obs: AllocationObserved, phase: AllocationPhase, message: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"phase": phase.value, "phaseSince": format_timestamp(obs.now), "message": message}
    body.update(extra)
    return {"status": body}


def _changed(obs: AllocationObserved, phase: AllocationPhase, message: str) -> bool:
    st = obs.allocation.status
    return st is None or st.phase is not phase or st.message != message


def _owned_by(member: Process | None, allocation: EphemeralAllocation) -> bool:
    return member is not None and member.metadata.annotations.get(ann.ALLOCATION) == allocation.metadata.name


def allocation_decide(obs: AllocationObserved) -> AllocationDecision:
    """One EphemeralAllocation pass (spec §5, corrected per DESIGN §2.10).

    The ``ALLOCATION`` finalizer gates deletion; binds claim a Free member exclusively, FIFO by
    creation among waiting allocations; Bound → Releasing (``return-trigger`` stamped) → Released
    once the pool has returned the member; waiting longer than the spawn timeout → Failed.
    """
    alloc, now = obs.allocation, obs.now
    name, ns = alloc.metadata.name or "", alloc.metadata.namespace or ""
    deleting = alloc.metadata.deletion_timestamp is not None
    has_fin = finalizers.ALLOCATION in alloc.metadata.finalizers
    phase = alloc.phase
    st = alloc.status
    by_name = {m.metadata.name: m for m in obs.members if m.metadata.namespace == ns}

    if phase.is_terminal:
        return AllocationDecision("NoOp", remove_finalizer=deleting and has_fin)
    add_fin = not deleting and not has_fin

    # A bind whose status write was lost (restart mid-bind): adopt the member already claimed for us.
    if phase.needs_pool_routing and not deleting:
        mine = next(
            (
                m
                for m in by_name.values()
                if _owned_by(m, alloc)
                and m.metadata.annotations.get(ann.REQUESTOR) == f"{ns}/{name}"
                and ann.RETURN_TRIGGER not in m.metadata.annotations
            ),
            None,
        )
        pool = next((p for p in obs.pools if mine is not None and belongs_to_pool(mine, p.metadata.name or "")), None)
        if mine is not None and pool is not None:
            expires, _ = resolve_expiry(alloc, pool, now)
            return _bound(obs, pool, mine, expires, None, add_fin, "Bind")

    matched: EphemeralPool | None = None
    free: str | None = None
    if phase.needs_pool_routing and not deleting:
        matched = route(alloc, obs.pools)
        if matched is not None:
            candidates = free_members(matched, obs.members, _claimed_by_status(obs.allocations, alloc))
            position = _queue_position(obs, matched)
            if position < len(candidates):
                free = candidates[position].metadata.name
    ctx = AllocationContext(
        phase=phase,
        being_deleted=deleting,
        expires_at=st.expires_at if st else None,
        assigned_process=st.assigned_process.name if st and st.assigned_process else None,
        bound_pool=st.bound_pool if st else None,
        now=now,
        matched_pool=_ref(matched) if matched is not None else None,
        free_member=free,
    )
    action = decide_allocation(ctx)
    beat = obs.heartbeat_seconds

    if action.kind == "NoOp":
        return AllocationDecision("NoOp", remove_finalizer=deleting and has_fin, add_finalizer=add_fin)
    if action.kind == "HeartbeatBound":
        left = (ctx.expires_at - now).total_seconds() if ctx.expires_at else beat
        return AllocationDecision("HeartbeatBound", add_finalizer=add_fin, requeue_after=max(min(beat, left), 1.0))
    if action.kind in ("Release", "AwaitReturn"):
        return _release(obs, action, by_name.get(action.member), deleting, has_fin, add_fin)
    if action.kind == "NoMatchingPool":
        msg = "no pool matches this requestor" if alloc.spec.pool_ref is None else "poolRef names no pool here"
        return _phase(obs, AllocationPhase.NO_MATCHING_POOL, msg, "Warning", add_fin, beat)
    assert matched is not None
    if action.kind == "Bind" and free is not None:
        expires, warning = resolve_expiry(alloc, matched, now)
        return _bound(obs, matched, by_name[free], expires, warning, add_fin, "Bind")
    # Wait: queued until a member frees up, or Failed past the spawn timeout (§5.9, D9).
    created = alloc.metadata.creation_timestamp
    if created is not None and now - created >= obs.spawn_timeout:
        limit = int(obs.spawn_timeout.total_seconds())
        msg = f"no free member in pool {matched.metadata.name} within the spawn timeout ({limit}s)"
        return _phase(obs, AllocationPhase.FAILED, msg, "Warning", add_fin, None, reason="SpawnTimeout")
    msg = f"waiting for a free member of pool {matched.metadata.name}"
    # Wake up no later than the spawn timeout, even when it is shorter than the heartbeat.
    requeue = beat
    if created is not None:
        requeue = max(min(beat, (created + obs.spawn_timeout - now).total_seconds()), 0.1)
    decision = _phase(obs, AllocationPhase.QUEUED, msg, "Normal", add_fin, requeue,
                      boundPool=_ref_wire(_ref(matched)))
    return decision


def _phase(
    obs: AllocationObserved,
    phase: AllocationPhase,
    message: str,
    kind: Literal["Normal", "Warning"],
    add_fin: bool,
    requeue: float | None,
    reason: str | None = None,
    **extra: Any,
) -> AllocationDecision:
    """Move to ``phase`` with ``message``; writes and emits an Event only when something changed."""
    if not _changed(obs, phase, message):
        return AllocationDecision(phase.value, add_finalizer=add_fin, requeue_after=requeue)
    return AllocationDecision(
        phase.value,
        status=_status(obs, phase, message, **extra),
        add_finalizer=add_fin,
        events=(Event(kind, reason or phase.value, message),),
        requeue_after=requeue,
    )


def _bound(
    obs: AllocationObserved,
    pool: EphemeralPool,
    member: Process,
    expires: datetime,
    warning: str | None,
    add_fin: bool,
    action: str,
) -> AllocationDecision:
    """Bind to ``member``: the guarded claim (omitted when the member is already ours) and status Bound."""
    alloc, now = obs.allocation, obs.now
    claim = None if _owned_by(member, alloc) else bind_patch(alloc, member, expires, now)
    mname = member.metadata.name or ""
    message = f"bound to {mname} of pool {pool.metadata.name} until {format_timestamp(expires)}"
    status = _status(
        obs,
        AllocationPhase.BOUND,
        message,
        boundPool=_ref_wire(_ref(pool)),
        assignedProcess={"name": mname, "namespace": member.metadata.namespace},
        allocatedAt=format_timestamp(now),
        expiresAt=format_timestamp(expires),
    )
    events = [Event("Normal", "Bound", message)]
    if warning:
        events.append(Event("Warning", "InvalidTtl", warning))
    left = (expires - now).total_seconds()
    return AllocationDecision(
        action,
        claim=claim,
        status=status,
        add_finalizer=add_fin,
        events=tuple(events),
        requeue_after=max(min(obs.heartbeat_seconds, left), 1.0),
    )


def _release(
    obs: AllocationObserved,
    action: AllocationAction,
    member: Process | None,
    deleting: bool,
    has_fin: bool,
    add_fin: bool,
) -> AllocationDecision:
    """Bound → Releasing (stamp ``return-trigger``) → Released once the member is no longer ours
    (Keep/Reset stripped the annotations, Replace removed it, or it is gone) (§5.7, D4/D5 corrected)."""
    alloc = obs.allocation
    keep_refs: dict[str, Any] = {}
    if action.pool is not None:
        keep_refs["boundPool"] = _ref_wire(action.pool)
    if not _owned_by(member, alloc):
        msg = "released; member returned to its pool"
        d = _phase(obs, AllocationPhase.RELEASED, msg, "Normal", False, None, **keep_refs)
        return dataclasses.replace(d, action="Release", remove_finalizer=deleting and has_fin)
    assert member is not None
    trigger = None
    if ann.RETURN_TRIGGER not in member.metadata.annotations:
        trigger = MemberPatch(
            name=member.metadata.name or "",
            patch=annotations_patch({ann.RETURN_TRIGGER: ann.RETURN_TRIGGER_SET}),
            reason="Release",
        )
    why = "being deleted" if deleting else "expired"
    msg = f"{why}; returning {member.metadata.name} to its pool"
    d = _phase(obs, AllocationPhase.RELEASING, msg, "Normal", add_fin, obs.heartbeat_seconds)
    return dataclasses.replace(d, action=action.kind, member_patch=trigger)
