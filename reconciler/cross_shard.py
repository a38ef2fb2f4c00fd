"""Which cache a sharded Process reconciler reads a named Process from, and whom it may wake
(docs/architecture.md#one-processtable-many-shards).

A read that names another Process (a ``dependsOn`` entry, a ProcessPhase boundary condition, the parent
PID) may cross shards: with a ``--watch-label-selector`` it is answered from the unselected cache of
every Process. Everything a pass writes or enqueues stays on the instance's own shard.

All pure: no I/O.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["CROSSES_SHARDS", "Cache", "Read", "cache_for", "may_enqueue"]


class Cache(Enum):
    SELECTED = "selected"
    """The instance's own shard (its ``--watch-label-selector``)."""
    EVERY = "every"
    """Every Process (the ProcessTable writer's cache)."""


class Read(Enum):
    DEPENDENCY = "dependsOn"
    BOUNDARY_PHASE = "ProcessPhase"
    PARENT_PID = "parent"
    CHILD_PROCESSES = "children"
    CONCURRENCY_GROUP = "maxConcurrent"
    SEQUENCE_HOLDERS = "sequence"


CROSSES_SHARDS = frozenset({Read.DEPENDENCY, Read.BOUNDARY_PHASE, Read.PARENT_PID})
"""The reads that name a Process which may be on another shard."""


def cache_for(read: Read, *, sharded: bool) -> Cache:
    """The cache ``read`` is answered from: every Process for a cross-shard read of a sharded instance."""
    return Cache.EVERY if sharded and read in CROSSES_SHARDS else Cache.SELECTED


def may_enqueue(*, in_selected_cache: bool) -> bool:
    """Whether a Process found as an owner or dependent may be queued: only one of this instance's shard
    (another shard's object is read, never reconciled)."""
    return in_selected_cache
