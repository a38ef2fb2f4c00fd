"""Which cache each named-Process read uses (docs/architecture.md#one-processtable-many-shards)."""

from __future__ import annotations

import pytest

from reconciler.cross_shard import Cache, Read, cache_for, may_enqueue


@pytest.mark.parametrize(("read", "sharded", "cache"), [
    (Read.DEPENDENCY, True, Cache.EVERY),
    (Read.BOUNDARY_PHASE, True, Cache.EVERY),
    (Read.PARENT_PID, True, Cache.EVERY),
    (Read.CHILD_PROCESSES, True, Cache.SELECTED),
    (Read.CONCURRENCY_GROUP, True, Cache.SELECTED),
    (Read.SEQUENCE_HOLDERS, True, Cache.SELECTED),
    *[(read, False, Cache.SELECTED) for read in Read],
])
def test_cache_for(read: Read, sharded: bool, cache: Cache) -> None:
    assert cache_for(read, sharded=sharded) is cache


@pytest.mark.parametrize(("selected", "expected"), [(True, True), (False, False)])
def test_may_enqueue_only_own_shard(selected: bool, expected: bool) -> None:
    assert may_enqueue(in_selected_cache=selected) is expected
