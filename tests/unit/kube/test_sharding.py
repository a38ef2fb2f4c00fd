"""shared.kube.sharding's pure parts: rendezvous hashing (docs/architecture.md#dynamic-sharding gives the formula
these tests compute independently), the sharder's move table, and the membership's reading of Lease records on its
own clock."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, cast

import anyio
import pytest

from shared.kube.api import KubeApi
from shared.kube.client import LEASES
from shared.kube.informer import Informer
from shared.kube.leader import Lease, LeaseSpec
from shared.kube.meta import ObjectMeta
from shared.kube.sharding import Membership, Move, MoveKind, decide_move, pick, score
from shared.kube.store import WatchEventType
from tests.support.kube import wait_for

SHARD = "shard.example.com/ring"
DRAIN = "drain.example.com/ring"
KEYS = [f"ns-{i % 7}/object-{i}" for i in range(3000)]


def documented_score(member: str, key: str) -> int:
    """The weight as docs/architecture.md#dynamic-sharding states it: BLAKE2b with an 8-byte digest over
    ``member NUL key`` in UTF-8, read as a big-endian unsigned integer."""
    return int(hashlib.blake2b(member.encode() + b"\x00" + key.encode(), digest_size=8).hexdigest(), 16)


def documented_pick(key: str, members: list[str]) -> str:
    return sorted(members, key=lambda m: (-documented_score(m, key), m))[0]


def test_the_score_is_the_documented_blake2b_weight() -> None:
    for member, key in [("a", "b"), ("tatara-reconciler-0", "team-a/p1"), ("m", "")]:
        assert score(member, key) == documented_score(member, key)


def test_pick_is_the_member_of_highest_weight_and_none_without_members() -> None:
    members = ["r0", "r1", "r2"]
    for key in KEYS[:300]:
        assert pick(key, members) == documented_pick(key, members)
        assert pick(key, reversed(members)) == pick(key, members)  # type: ignore[arg-type]  # order-free
    assert pick("ns/p", []) is None


def test_three_members_share_the_keys_about_evenly() -> None:
    counts = Counter(pick(key, ["r0", "r1", "r2"]) for key in KEYS)
    assert set(counts) == {"r0", "r1", "r2"}
    for member, count in counts.items():
        assert 0.28 < count / len(KEYS) < 0.39, (member, count)


def test_a_joining_member_takes_only_keys_it_now_owns_about_a_quarter() -> None:
    before = {key: pick(key, ["r0", "r1", "r2"]) for key in KEYS}
    after = {key: pick(key, ["r0", "r1", "r2", "r3"]) for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == "r3" for key in moved)  # nothing moves between the old members
    assert 0.20 < len(moved) / len(KEYS) < 0.30


def test_a_leaving_member_gives_up_only_its_own_keys() -> None:
    before = {key: pick(key, ["r0", "r1", "r2"]) for key in KEYS}
    after = {key: pick(key, ["r0", "r2"]) for key in KEYS}
    assert all(before[key] == "r1" for key in KEYS if before[key] != after[key])
    assert all(after[key] == before[key] for key in KEYS if before[key] != "r1")


ALIVE = frozenset({"a", "b"})


@pytest.mark.parametrize(
    ("labels", "desired", "expected"),
    [
        ({}, None, Move(MoveKind.NONE)),
        ({SHARD: "a"}, None, Move(MoveKind.NONE)),
        ({}, "a", Move(MoveKind.ASSIGN, {SHARD: "a"}, "new")),
        ({SHARD: ""}, "a", Move(MoveKind.ASSIGN, {SHARD: "a"}, "new")),
        ({SHARD: "gone"}, "b", Move(MoveKind.ASSIGN, {SHARD: "b"}, "orphaned")),
        ({SHARD: "gone", DRAIN: "true"}, "b", Move(MoveKind.ASSIGN, {SHARD: "b", DRAIN: None}, "orphaned")),
        ({DRAIN: "true"}, "a", Move(MoveKind.ASSIGN, {SHARD: "a", DRAIN: None}, "new")),
        ({SHARD: "a"}, "a", Move(MoveKind.NONE)),
        ({SHARD: "a", DRAIN: "true"}, "a", Move(MoveKind.CANCEL_DRAIN, {DRAIN: None}, "cancelled")),
        ({SHARD: "a"}, "b", Move(MoveKind.DRAIN, {DRAIN: "true"}, "rebalance")),
        ({SHARD: "a", DRAIN: "true"}, "b", Move(MoveKind.NONE)),
    ],
    ids=["no member alive", "no member alive, assigned", "new", "empty label is none", "member gone",
         "member gone while draining", "drain label without a member", "in place", "ring changed back",
         "another member owns it", "hand-over awaited"],
)
def test_the_move_table(labels: dict[str, str], desired: str | None, expected: Move) -> None:
    assert decide_move(labels, shard_label=SHARD, drain_label=DRAIN, desired=desired, alive=ALIVE) == expected


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease(name: str, holder: str | None, duration: int = 10, renewed: str = "t0") -> Lease:
    return Lease(metadata=ObjectMeta(name=name, namespace="sys"),
                 spec=LeaseSpec(holder_identity=holder, lease_duration_seconds=duration, renew_time=renewed))


def membership() -> tuple[Membership, Informer[Any], FakeClock]:
    clock = FakeClock()
    informer: Informer[Any] = Informer(cast(KubeApi, None), LEASES, Lease)
    return Membership(informer, clock=clock), informer, clock


def test_a_member_is_alive_for_its_lease_duration_after_its_record_last_changed_on_our_clock() -> None:
    members, informer, clock = membership()
    informer.store.apply(WatchEventType.ADDED, lease("m1", "m1_x", duration=10))
    informer.store.apply(WatchEventType.ADDED, lease("m2", "m2_y", duration=4))
    assert members.alive() == {"m1", "m2"}
    assert members.next_expiry() == pytest.approx(4)
    clock.now += 5
    assert members.alive() == {"m1"}
    assert members.gone_since() == {"m2": pytest.approx(1)}
    # the same record seen again does not extend it; a renewal (a new record) does
    informer.store.apply(WatchEventType.MODIFIED, lease("m1", "m1_x", duration=10))
    clock.now += 5
    assert members.alive() == frozenset()
    informer.store.apply(WatchEventType.MODIFIED, lease("m1", "m1_x", duration=10, renewed="t1"))
    assert members.alive() == {"m1"}
    assert members.next_expiry() == pytest.approx(10)


def test_a_released_or_deleted_lease_is_a_member_gone_at_once() -> None:
    members, informer, _clock = membership()
    informer.store.apply(WatchEventType.ADDED, lease("m1", "m1_x"))
    informer.store.apply(WatchEventType.ADDED, lease("m2", "m2_x"))
    informer.store.apply(WatchEventType.MODIFIED, lease("m1", None, duration=1))
    assert members.alive() == {"m2"}
    assert members.gone_since() == {"m1": 0}
    informer.store.apply(WatchEventType.DELETED, lease("m2", "m2_x"))
    assert members.alive() == frozenset()
    assert members.next_expiry() is None


@pytest.mark.anyio
async def test_every_watcher_of_one_membership_hears_a_member_join() -> None:
    """Two sharders (the pool reconciler's pools and allocations) share one membership: a Lease event wakes both,
    not only the last to wait."""
    members, informer, _clock = membership()
    heard: dict[str, list[frozenset[str]]] = {"pools": [], "allocations": []}
    async with anyio.create_task_group() as tg:
        for name in heard:
            tg.start_soon(members.watch, heard[name].append)
        await wait_for(lambda: _true(all(seen == [frozenset()] for seen in heard.values())), timeout=5,
                       what="both watchers told the empty ring")
        informer.store.apply(WatchEventType.ADDED, lease("m1", "m1_x", duration=3600))
        await wait_for(lambda: _true(all(seen[-1] == {"m1"} for seen in heard.values())), timeout=5,
                       what="both watchers told of m1")
        tg.cancel_scope.cancel()


async def _true(value: bool) -> bool:
    return value
