"""The FIFO queues of waiting allocations, kept as an index instead of recomputed per reconcile.

An allocation that waits (Pending, Queued, NoMatchingPool; not being deleted) and routes to a pool
sits in that pool's queue, ordered by creation time then name (docs/behaviour.md#fifo-bind). The
allocation at position *p* may take the *p*-th free member, so a reconcile needs its own position
and a freed member needs the head of the queue — both read here in O(log n), where a scan of every
allocation (:func:`pool_reconciler.routing.queue_position`, the rule's reference form) made a burst
of n allocations cost O(n²).

:class:`WaitingQueues` is fed by the allocation informer's event handler (:meth:`WaitingQueues.upsert`,
:meth:`WaitingQueues.discard`) and rebuilt whole when a pool's spec changes (routing depends on the
pools' selectors). It holds names and sort keys only, never objects.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from shared.domain.api.allocation import EphemeralAllocation

__all__ = ["FifoKey", "WaitingQueues", "fifo_key", "is_waiting"]

_EARLIEST = datetime.min.replace(tzinfo=UTC)

FifoKey = tuple[datetime, str]
"""(creationTimestamp, name): the FIFO order; an allocation without a creation time sorts first."""


def fifo_key(allocation: EphemeralAllocation) -> FifoKey:
    """The allocation's place in FIFO order (docs/behaviour.md#fifo-bind)."""
    return (allocation.metadata.creation_timestamp or _EARLIEST, allocation.metadata.name or "")


def is_waiting(allocation: EphemeralAllocation) -> bool:
    """Whether ``allocation`` is in a queue: its phase needs routing and it is not being deleted."""
    return allocation.phase.needs_pool_routing and allocation.metadata.deletion_timestamp is None


class WaitingQueues:
    """Per pool, the waiting allocations in FIFO order.

    Args:
        route: the pool an allocation goes to, as ``"<namespace>/<name>"`` (None: no pool matches);
            called when an allocation is filed, with the pools as they are then.

    Keys of allocations are ``"<namespace>/<name>"`` (the informer's object keys).
    """

    def __init__(self, route: Callable[[EphemeralAllocation], str | None]) -> None:
        self._route = route
        self._queues: dict[str, list[FifoKey]] = {}
        self._filed: dict[str, tuple[str, FifoKey]] = {}
        """allocation key → (pool key, FIFO key) of every allocation in a queue."""

    def upsert(self, key: str, allocation: EphemeralAllocation) -> None:
        """File ``allocation`` (stored under ``key``) in its pool's queue, or take it out if it no longer waits."""
        self.discard(key)
        if not is_waiting(allocation):
            return
        pool = self._route(allocation)
        if pool is None:
            return
        entry = fifo_key(allocation)
        bisect.insort(self._queues.setdefault(pool, []), entry)
        self._filed[key] = (pool, entry)

    def discard(self, key: str) -> None:
        """Take the allocation stored under ``key`` out of its queue (no-op when it is in none)."""
        filed = self._filed.pop(key, None)
        if filed is None:
            return
        pool, entry = filed
        queue = self._queues[pool]
        del queue[bisect.bisect_left(queue, entry)]
        if not queue:
            del self._queues[pool]

    def rebuild(self, allocations: Iterable[tuple[str, EphemeralAllocation]]) -> None:
        """File every ``(key, allocation)`` again from scratch (after a pool change re-routes them)."""
        self._queues.clear()
        self._filed.clear()
        for key, allocation in allocations:
            self.upsert(key, allocation)

    def pool_of(self, key: str) -> str | None:
        """The pool whose queue holds the allocation stored under ``key``, or None."""
        filed = self._filed.get(key)
        return filed[0] if filed is not None else None

    def position(self, key: str) -> int | None:
        """How many allocations wait ahead of ``key`` in its pool's queue; None when it is in no queue."""
        filed = self._filed.get(key)
        if filed is None:
            return None
        pool, entry = filed
        return bisect.bisect_left(self._queues[pool], entry)

    def position_past_claims(self, key: str, holders: Iterable[str]) -> int | None:
        """:meth:`position`, not counting allocations ahead whose member claim already landed
        (``holders``: keys of allocations some member's ``allocation`` annotation names): they take no
        free member from those behind them, their Bound status is only still on its way."""
        filed = self._filed.get(key)
        if filed is None:
            return None
        pool, entry = filed
        ahead = bisect.bisect_left(self._queues[pool], entry)
        for holder in set(holders):
            other = self._filed.get(holder)
            if other is not None and other[0] == pool and other[1] < entry:
                ahead -= 1
        return ahead

    def holding(self, pool: str, holders: Iterable[str]) -> int:
        """How many of ``holders`` still sit in ``pool``'s queue (their claims landed, their status not yet)."""
        return sum(1 for h in set(holders) if (filed := self._filed.get(h)) is not None and filed[0] == pool)

    def head(self, pool: str, count: int) -> list[str]:
        """Names of the first ``count`` allocations waiting on ``pool`` (``"<namespace>/<name>"``), FIFO."""
        namespace = pool.split("/", 1)[0]
        return [f"{namespace}/{name}" for _, name in self._queues.get(pool, ())[:max(count, 0)]]

    def __len__(self) -> int:
        return len(self._filed)
