"""pool_reconciler.routing: which pool an allocation goes to and which member it may take there."""

from __future__ import annotations

import pytest

from pool_reconciler.routing import best_match, claimed_by_others, free_members, queue_position, route
from shared.domain import annotations as ann
from shared.domain.api.pool import EphemeralPool, MatchKey
from tests.unit.pool_reconciler.builders import alloc, demo_pool, member

# ── the router ───────────────────────────────────────────────────────────────

DEMO_SEL = {"repos": ["pleme-io/demo-*"]}
ROUTER_ROWS = [
    ("no candidates route nowhere", [], MatchKey("x", "y", (), "manual"), None),
    (
        "an unmatched selector is skipped",
        [demo_pool("demo-pool", DEMO_SEL)],
        MatchKey("drzln/dotfiles", "main", (), "manual"),
        None,
    ),
    (
        "the higher specificity wins",
        [
            demo_pool("general"),
            demo_pool("specific", {**DEMO_SEL, "branches": ["main"], "prLabels": ["needs-ephemeral"]}),
        ],
        MatchKey("pleme-io/demo-app", "main", ("needs-ephemeral",), "github-pr"),
        "specific",
    ),
    (
        "a tie goes to the smallest name",
        [demo_pool("z-pool", DEMO_SEL), demo_pool("a-pool", DEMO_SEL)],
        MatchKey("pleme-io/demo-app", "", (), "manual"),
        "a-pool",
    ),
    (
        "the empty selector matches general traffic",
        [demo_pool("any")],
        MatchKey("any/repo", "any-branch", (), "manual"),
        "any",
    ),
]


@pytest.mark.parametrize(("pools", "key", "expected"), [r[1:] for r in ROUTER_ROWS], ids=[r[0] for r in ROUTER_ROWS])
def test_router_table(pools: list[EphemeralPool], key: MatchKey, expected: str | None) -> None:
    chosen = best_match(pools, key)
    assert (chosen.metadata.name if chosen else None) == expected



def test_route_follows_an_explicit_pool_ref_and_skips_deleting_pools() -> None:
    pools = [demo_pool("general"), demo_pool("pinned", {"repos": ["other/*"]})]
    chosen = route(alloc(pool_ref={"name": "pinned", "namespace": "pools"}), pools)
    assert chosen is not None
    assert chosen.metadata.name == "pinned"
    assert route(alloc(pool_ref={"name": "pinned", "namespace": "elsewhere"}), pools) is None
    assert route(alloc(), [demo_pool("general", deleting=True)]) is None


# ── member choice ────────────────────────────────────────────────────────────


def test_free_members_are_free_unclaimed_members_of_the_pool_by_name() -> None:
    members = [
        member("m3"),
        member("m1"),
        member("busy", ephemeral=True, annotations={ann.ALLOCATION: "a"}),
        member("stamped", annotations={ann.REQUESTOR: "pools/a"}),
        member("starting", phase="Running"),
        member("elsewhere", "other-pool"),
        member("taken"),
    ]
    found = free_members(demo_pool(), members, claimed={"taken"})
    assert [m.metadata.name for m in found] == ["m1", "m3"]


def test_claimed_by_others_names_members_in_other_live_allocations_status() -> None:
    me = alloc("me")
    bound = alloc("b", status={"phase": "Bound", "assignedProcess": {"name": "m1", "namespace": "pools"}})
    released = alloc("r", status={"phase": "Released", "assignedProcess": {"name": "m2", "namespace": "pools"}})
    mine = alloc("me", status={"phase": "Bound", "assignedProcess": {"name": "m3", "namespace": "pools"}})
    assert claimed_by_others([me, bound, released, mine], me) == {"m1"}


def test_the_queue_position_counts_older_waiting_allocations_on_the_same_pool() -> None:
    pools = [demo_pool(), demo_pool("other", {"repos": ["x/*"]})]
    me = alloc("me", created=10)
    ahead = [alloc("old", created=60), alloc("older", created=90, status={"phase": "Queued"})]
    not_ahead = [
        alloc("newer", created=5),
        alloc("bound", created=60, status={"phase": "Bound"}),
        alloc("deleting", created=60, deleting=True),
        alloc("routed-elsewhere", created=60, pool_ref={"name": "other", "namespace": "pools"}),
    ]
    assert queue_position(me, [me, *ahead, *not_ahead], pools, pools[0]) == 2


def test_a_same_instant_tie_in_the_queue_goes_to_the_smaller_name() -> None:
    a, b = alloc("a", created=10), alloc("b", created=10)
    pools = [demo_pool()]
    assert (queue_position(a, [a, b], pools, pools[0]), queue_position(b, [a, b], pools, pools[0])) == (0, 1)
