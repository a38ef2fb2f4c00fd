"""pool_reconciler.fifo: the FIFO index agrees with the rule's reference scan (routing.queue_position)
after any sequence of files, updates and removals; the head of a queue is its oldest allocations."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool_reconciler.fifo import WaitingQueues, is_waiting
from pool_reconciler.routing import queue_position, route
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from tests.unit.pool_reconciler.builders import alloc, demo_pool

POOLS = [demo_pool(), demo_pool("other", {"repos": ["x/*"]})]
PHASES = [None, "Pending", "Queued", "NoMatchingPool", "Bound", "Released", "Failed"]


def key(a: EphemeralAllocation) -> str:
    return f"{a.metadata.namespace}/{a.metadata.name}"


def route_key(pools: list[EphemeralPool]) -> Any:
    def to(a: EphemeralAllocation) -> str | None:
        p = route(a, pools)
        return f"{p.metadata.namespace}/{p.metadata.name}" if p is not None else None
    return to


allocations = st.builds(
    lambda name, created, phase, deleting, repo, ref: alloc(
        name, created=created, deleting=deleting, repo=repo,
        status={"phase": phase} if phase else None,
        pool_ref={"name": "other", "namespace": "pools"} if ref else None),
    name=st.sampled_from([f"a{i}" for i in range(12)]),
    created=st.integers(0, 5),  # few instants: ties are common, broken by name
    phase=st.sampled_from(PHASES),
    deleting=st.booleans(),
    repo=st.sampled_from(["pleme-io/demo-app", "x/y", "nobody/none"]),
    ref=st.booleans(),
)


def expected_positions(store: dict[str, EphemeralAllocation]) -> dict[str, int]:
    """The reference scan's position of every waiting allocation that routes to a pool."""
    out: dict[str, int] = {}
    objects = list(store.values())
    for a in objects:
        pool = route(a, POOLS)
        if is_waiting(a) and pool is not None:
            out[key(a)] = queue_position(a, objects, POOLS, pool)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), allocations), max_size=40))
def test_positions_match_the_reference_scan_after_any_sequence_of_events(
    events: list[tuple[bool, EphemeralAllocation]],
) -> None:
    queues = WaitingQueues(route_key(POOLS))
    store: dict[str, EphemeralAllocation] = {}
    for delete, a in events:
        if delete:
            store.pop(key(a), None)
            queues.discard(key(a))
        else:
            store[key(a)] = a
            queues.upsert(key(a), a)
    expected = expected_positions(store)
    assert {k: queues.position(k) for k in store if queues.position(k) is not None} == expected
    assert len(queues) == len(expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(allocations, max_size=30))
def test_a_rebuild_files_what_the_events_filed(batch: list[EphemeralAllocation]) -> None:
    store = {key(a): a for a in batch}
    rebuilt = WaitingQueues(route_key(POOLS))
    rebuilt.rebuild(store.items())
    assert {k: rebuilt.position(k) for k in store if rebuilt.position(k) is not None} == expected_positions(store)


def test_the_head_is_the_oldest_waiting_allocations_then_the_smaller_name() -> None:
    queues = WaitingQueues(route_key(POOLS))
    batch = [alloc("young", created=1), alloc("old", created=50), alloc("b-tie", created=20),
             alloc("a-tie", created=20), alloc("bound", created=90, status={"phase": "Bound"}),
             alloc("elsewhere", created=99, pool_ref={"name": "other", "namespace": "pools"})]
    for a in batch:
        queues.upsert(key(a), a)
    assert queues.head("pools/demo-pool", 3) == ["pools/old", "pools/a-tie", "pools/b-tie"]
    assert queues.head("pools/demo-pool", 0) == []
    assert queues.head("pools/other", 5) == ["pools/elsewhere"]
    assert queues.head("pools/missing", 5) == []
    assert queues.pool_of("pools/bound") is None


def test_allocations_ahead_whose_claim_landed_do_not_count_and_are_counted_as_holding() -> None:
    """A claimed member is missing from the free list before its allocation's Bound status arrives:
    the positions of those behind must skip that allocation too, or each maps to the wrong free member
    and the last ones to none (docs/behaviour.md#fifo-bind)."""
    queues = WaitingQueues(route_key(POOLS))
    for name, created in (("first", 50), ("second", 40), ("third", 30), ("fourth", 20)):
        a = alloc(name, created=created)
        queues.upsert(key(a), a)
    holders = ["pools/first", "pools/third", "pools/elsewhere"]  # claims landed; "elsewhere" is in no queue
    assert [queues.position_past_claims(f"pools/{n}", holders) for n in ("first", "second", "third", "fourth")] \
        == [0, 0, 1, 1]
    assert queues.position_past_claims("pools/missing", holders) is None
    assert queues.holding("pools/demo-pool", holders) == 2
    assert queues.holding("pools/other", holders) == 0
