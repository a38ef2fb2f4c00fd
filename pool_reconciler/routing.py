"""Which pool an allocation goes to, and which member it may take there.

- :func:`route`: the explicit ``poolRef`` (same namespace), else :func:`best_match` — among pools whose
  selector matches, the highest specificity, ties to the smallest name; deleting pools are skipped;
- :func:`free_members`: a pool's members that may be bound (Free, unclaimed), by name;
- :func:`queue_position`: FIFO among the allocations waiting on the same pool, by creation time then name.

Rules: docs/behaviour.md#allocation-routing, docs/behaviour.md#fifo-bind.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pool_reconciler.fifo import fifo_key
from pool_reconciler.members import belongs_to_pool, member_state
from shared.domain import annotations as ann
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool, MatchKey, MemberState
from shared.domain.api.process import Process

__all__ = ["best_match", "claimed_by_others", "free_members", "queue_position", "route"]


def best_match(candidates: Sequence[EphemeralPool], key: MatchKey) -> EphemeralPool | None:
    """Among pools whose selector matches ``key``, the highest specificity; ties → smallest name."""
    matching = [p for p in candidates if p.spec.selector.matches(key)]
    if not matching:
        return None
    return min(matching, key=lambda p: (-p.spec.selector.specificity, p.metadata.name or ""))


def route(allocation: EphemeralAllocation, pools: Sequence[EphemeralPool]) -> EphemeralPool | None:
    """The explicit ``poolRef`` (name and namespace), else :func:`best_match` among the pools of the
    allocation's namespace. Pools being deleted are skipped (they are draining)."""
    ns = allocation.metadata.namespace
    live = [p for p in pools if p.metadata.namespace == ns and p.metadata.deletion_timestamp is None]
    ref = allocation.spec.pool_ref
    if ref is not None:
        return next((p for p in live if p.metadata.name == ref.name and ref.namespace == ns), None)
    return best_match(live, MatchKey.of(allocation.spec.requestor))


def claimed_by_others(allocations: Sequence[EphemeralAllocation], me: EphemeralAllocation) -> set[str]:
    """Members named in the ``status.assignedProcess`` of another allocation that is not Released or Failed."""
    out: set[str] = set()
    for a in allocations:
        if a.metadata.uid == me.metadata.uid and a.metadata.name == me.metadata.name:
            continue
        if a.status is not None and a.status.assigned_process is not None and not a.phase.is_terminal:
            out.add(a.status.assigned_process.name)
    return out


def free_members(pool: EphemeralPool, members: Sequence[Process], claimed: Collection[str] = ()) -> list[Process]:
    """Members of ``pool`` that may be bound, by name: Free (Attested, permanent, not deleting, no
    ``return-trigger``), no bind annotations, not in ``claimed``."""
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


def queue_position(
    me: EphemeralAllocation, allocations: Sequence[EphemeralAllocation], pools: Sequence[EphemeralPool],
    pool: EphemeralPool,
) -> int:
    """How many allocations waiting on ``pool`` (routed there, not being deleted) were created before ``me``.

    The rule's reference form, a scan of every allocation; the controller reads the same number from
    its index (:class:`pool_reconciler.fifo.WaitingQueues`)."""
    mine = fifo_key(me)
    ahead = 0
    for other in allocations:
        if other.metadata.name == me.metadata.name or other.metadata.deletion_timestamp is not None:
            continue
        if not other.phase.needs_pool_routing or fifo_key(other) >= mine:
            continue
        routed = route(other, pools)
        if routed is not None and routed.metadata.name == pool.metadata.name:
            ahead += 1
    return ahead
