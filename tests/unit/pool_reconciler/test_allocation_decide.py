"""pool_reconciler.allocation_decide: the spec's tables (spec/pool-reconciler.md §7.3, §7.4, §8.2,
§8.5) and the corrected pass (DESIGN §2.10). CORRECTED rows differ on purpose (docs/divergences.md)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from pool_reconciler.allocation_decide import (
    AllocationAction,
    AllocationContext,
    allocation_decide,
    best_match,
    decide_allocation,
)
from pool_reconciler.decision import AllocationObserved
from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.allocation import AllocationPhase, AllocationRef, EphemeralAllocation
from shared.domain.api.codec import convert
from shared.domain.api.pool import EphemeralPool, MatchKey
from shared.domain.api.process import Process

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
PH = AllocationPhase
DEMO = AllocationRef(name="demo-pool", namespace="pools")


def pool(
    name: str = "demo-pool", selector: dict[str, Any] | None = None, ns: str = "pools", max_ttl: str = "4h"
) -> EphemeralPool:
    return convert(
        {
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": {
                "desiredSize": 1,
                "selector": selector or {},
                "maxAllocationTtl": max_ttl,
                "template": {"aplicacao": {"chartRef": "c", "version": "1"}, "ttl": "1h"},
            },
        },
        EphemeralPool,
    )


def member(
    name: str,
    pool_name: str = "demo-pool",
    *,
    phase: str = "Attested",
    ephemeral: bool = False,
    annotations: dict[str, str] | None = None,
    rv: str = "5",
) -> Process:
    lifetime = {"ephemeral": {"ttl": "1h"}} if ephemeral else {"permanent": {}}
    return convert(
        {
            "metadata": {
                "name": name,
                "namespace": "pools",
                "resourceVersion": rv,
                "creationTimestamp": (NOW - timedelta(hours=3)).isoformat(),
                "annotations": {ann.POOL: pool_name, **(annotations or {})},
            },
            "spec": {
                "classification": {"pointType": "Gate", "substrate": "Compute"},
                "intent": {"flux": {"gitRepository": "x", "path": "."}},
                "lifetime": lifetime,
            },
            "status": {"phase": phase},
        },
        Process,
    )


def alloc(
    name: str = "alloc-1",
    *,
    repo: str = "pleme-io/demo-app",
    status: dict[str, Any] | None = None,
    pool_ref: dict[str, str] | None = None,
    deleting: bool = False,
    created: float = 10,
    ttl: str | None = None,
    finalizer: bool = True,
) -> EphemeralAllocation:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "pools",
        "uid": f"uid-{name}",
        "creationTimestamp": (NOW - timedelta(seconds=created)).isoformat(),
        "finalizers": [finalizers.ALLOCATION] if finalizer else [],
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    spec: dict[str, Any] = {"requestor": {"kind": "manual", "repo": repo, "branch": "main"}}
    if pool_ref:
        spec["poolRef"] = pool_ref
    if ttl:
        spec["ttl"] = ttl
    doc: dict[str, Any] = {"metadata": meta, "spec": spec}
    if status is not None:
        doc["status"] = status
    return convert(doc, EphemeralAllocation)


def observe(
    a: EphemeralAllocation,
    pools: list[EphemeralPool],
    members: list[Process],
    others: list[EphemeralAllocation] | None = None,
) -> AllocationObserved:
    return AllocationObserved(
        allocation=a, pools=tuple(pools), members=tuple(members), now=NOW, allocations=(a, *(others or []))
    )


# ── §7.4 / §8.2 router ───────────────────────────────────────────────────────

DEMO_SEL = {"repos": ["pleme-io/demo-*"]}
ROUTER_ROWS = [
    ("no candidates route nowhere", [], MatchKey("x", "y", (), "manual"), None),
    (
        "an unmatched selector is skipped",
        [pool("demo-pool", DEMO_SEL)],
        MatchKey("drzln/dotfiles", "main", (), "manual"),
        None,
    ),
    (
        "the higher specificity wins",
        [pool("general"), pool("specific", {**DEMO_SEL, "branches": ["main"], "prLabels": ["needs-ephemeral"]})],
        MatchKey("pleme-io/demo-app", "main", ("needs-ephemeral",), "github-pr"),
        "specific",
    ),
    (
        "a tie goes to the smallest name",
        [pool("z-pool", DEMO_SEL), pool("a-pool", DEMO_SEL)],
        MatchKey("pleme-io/demo-app", "", (), "manual"),
        "a-pool",
    ),
    (
        "the empty selector matches general traffic",
        [pool("any")],
        MatchKey("any/repo", "any-branch", (), "manual"),
        "any",
    ),
]


@pytest.mark.parametrize(("pools", "key", "expected"), [r[1:] for r in ROUTER_ROWS], ids=[r[0] for r in ROUTER_ROWS])
def test_router_table(pools: list[EphemeralPool], key: MatchKey, expected: str | None) -> None:
    chosen = best_match(pools, key)
    assert (chosen.metadata.name if chosen else None) == expected


# ── §7.3 / §8.5 decision over a context ──────────────────────────────────────


def ctx(
    phase: AllocationPhase = PH.PENDING,
    *,
    deleting: bool = False,
    expires: float | None = None,
    assigned: str | None = None,
    bound: AllocationRef | None = None,
    matched: AllocationRef | None = None,
    free: str | None = None,
) -> AllocationContext:
    return AllocationContext(
        phase=phase,
        being_deleted=deleting,
        expires_at=NOW + timedelta(seconds=expires) if expires is not None else None,
        assigned_process=assigned,
        bound_pool=bound,
        now=NOW,
        matched_pool=matched,
        free_member=free,
    )


CTX_ROWS = [
    ("a Released allocation does nothing", ctx(PH.RELEASED), AllocationAction("NoOp")),
    (
        "a Failed allocation does nothing even with a free member",
        ctx(PH.FAILED, matched=DEMO, free="demo-fresh"),
        AllocationAction("NoOp"),
    ),
    ("a deleted Released allocation does nothing", ctx(PH.RELEASED, deleting=True), AllocationAction("NoOp")),
    (
        "a deleted Bound allocation releases its member",
        ctx(PH.BOUND, deleting=True, assigned="demo-xyz", bound=DEMO),
        AllocationAction("Release", DEMO, "demo-xyz"),
    ),
    ("a deleted Pending allocation with nothing assigned does nothing", ctx(deleting=True), AllocationAction("NoOp")),
    (
        "a Bound allocation past expiry releases",
        ctx(PH.BOUND, expires=-1800, assigned="demo-abcd", bound=DEMO),
        AllocationAction("Release", DEMO, "demo-abcd"),
    ),
    (
        "a Bound allocation exactly at expiry releases",
        ctx(PH.BOUND, expires=0, assigned="a", bound=DEMO),
        AllocationAction("Release", DEMO, "a"),
    ),
    (
        "a Bound allocation before expiry heartbeats",
        ctx(PH.BOUND, expires=60, assigned="a", bound=DEMO),
        AllocationAction("HeartbeatBound"),
    ),
    (
        "a Bound allocation without expiresAt heartbeats",
        ctx(PH.BOUND, assigned="a", bound=DEMO),
        AllocationAction("HeartbeatBound"),
    ),
    (
        "an expired Bound allocation without an assigned member heartbeats",
        ctx(PH.BOUND, expires=-1, bound=DEMO),
        AllocationAction("HeartbeatBound"),
    ),
    (
        "a Pending allocation with a free member binds",
        ctx(matched=DEMO, free="demo-abcd"),
        AllocationAction("Bind", DEMO, "demo-abcd"),
    ),
    ("a Pending allocation with a full pool waits", ctx(matched=DEMO), AllocationAction("Wait", DEMO)),
    ("a Pending allocation without a pool has no matching pool", ctx(), AllocationAction("NoMatchingPool")),
    (
        "a NoMatchingPool allocation binds once a pool has a free member",
        ctx(PH.NO_MATCHING_POOL, matched=DEMO, free="m"),
        AllocationAction("Bind", DEMO, "m"),
    ),
    (
        "CORRECTED: a Releasing allocation waits for the return and never re-routes",
        ctx(PH.RELEASING, assigned="demo-old", bound=DEMO, matched=DEMO, free="demo-fresh"),
        AllocationAction("AwaitReturn", DEMO, "demo-old"),
    ),
]


@pytest.mark.parametrize(("c", "expected"), [r[1:] for r in CTX_ROWS], ids=[r[0] for r in CTX_ROWS])
def test_allocation_decision_table(c: AllocationContext, expected: AllocationAction) -> None:
    assert decide_allocation(c) == expected


def test_the_context_round_trips_through_json_with_snake_case_keys() -> None:
    c = ctx(PH.BOUND, expires=60, assigned="demo-abcd", bound=DEMO)
    raw = msgspec.json.encode(c)
    assert b'"being_deleted"' in raw
    assert msgspec.json.decode(raw, type=AllocationContext) == c


# ── the pass (allocation_decide, §8.5 scenarios and corrections) ─────────────


def test_no_matching_pool_when_the_selector_excludes() -> None:
    d = allocation_decide(observe(alloc(repo="drzln/dotfiles"), [pool(selector=DEMO_SEL)], []))
    assert d.action == "NoMatchingPool"
    assert d.status is not None
    assert d.status["status"]["phase"] == "NoMatchingPool"


def test_bind_claims_a_free_member_with_its_resource_version() -> None:
    d = allocation_decide(observe(alloc(), [pool()], [member("demo-abcd1234", rv="17")]))
    assert d.action == "Bind"
    assert d.claim is not None
    assert d.claim.name == "demo-abcd1234"
    assert d.claim.resource_version == "17"
    assert d.claim.patch["metadata"]["resourceVersion"] == "17"
    assert d.claim.patch["metadata"]["annotations"] == {
        ann.REQUESTOR: "pools/alloc-1",
        ann.REQUESTOR_KIND: "manual",
        ann.ALLOCATION: "alloc-1",
    }
    lifetime = d.claim.patch["spec"]["lifetime"]
    assert lifetime["permanent"] is None
    assert lifetime["ephemeral"]["teardownPolicy"] == "Never"
    assert d.status is not None
    status = d.status["status"]
    assert status["phase"] == "Bound"
    assert status["expiresAt"] == "2025-06-01T13:00:00Z"


def test_CORRECTED_a_bound_member_lives_until_expiry_plus_grace_counted_from_its_creation() -> None:
    d = allocation_decide(observe(alloc(), [pool()], [member("m")]))
    assert d.claim is not None
    # created 3 h ago, expires in 1 h, +10 min grace → 4 h 10 min from creation
    assert d.claim.patch["spec"]["lifetime"]["ephemeral"]["ttl"] == f"{4 * 3600 + 600}s"


def test_CORRECTED_the_requested_ttl_is_capped_by_max_allocation_ttl() -> None:
    d = allocation_decide(observe(alloc(ttl="10h"), [pool(max_ttl="2h")], [member("m")]))
    assert d.status is not None
    assert d.status["status"]["expiresAt"] == "2025-06-01T14:00:00Z"


def test_wait_when_the_pool_is_full() -> None:
    d = allocation_decide(
        observe(alloc(), [pool()], [member("only-one", ephemeral=True, annotations={ann.ALLOCATION: "other"})])
    )
    assert d.action == "Queued"
    assert d.status is not None
    assert d.status["status"]["phase"] == "Queued"


def test_an_explicit_pool_ref_bypasses_selector_routing() -> None:
    a = alloc(repo="completely-unrelated/repo", pool_ref={"name": "pinned", "namespace": "pools"})
    d = allocation_decide(observe(a, [pool("pinned", {"repos": ["other/*"]})], [member("pinned-aaaa", "pinned")]))
    assert d.action == "Bind"


def test_CORRECTED_waiting_allocations_bind_distinct_members_in_fifo_order() -> None:
    older, newer = alloc("a-old", created=60), alloc("b-new", created=10)
    members = [member("m1"), member("m2")]
    first = allocation_decide(observe(older, [pool()], members, [newer]))
    second = allocation_decide(observe(newer, [pool()], members, [older]))
    assert first.claim is not None
    assert second.claim is not None
    assert (first.claim.name, second.claim.name) == ("m1", "m2")


def test_CORRECTED_a_member_named_in_another_allocations_status_is_not_free() -> None:
    other = alloc(
        "other", created=600, status={"phase": "Bound", "assignedProcess": {"name": "m1", "namespace": "pools"}}
    )
    d = allocation_decide(observe(alloc(), [pool()], [member("m1"), member("m2")], [other]))
    assert d.claim is not None
    assert d.claim.name == "m2"


def test_CORRECTED_a_lost_status_write_adopts_the_member_already_claimed() -> None:
    mine = member("m1", ephemeral=True, annotations={ann.ALLOCATION: "alloc-1", ann.REQUESTOR: "pools/alloc-1"})
    d = allocation_decide(observe(alloc(), [pool()], [mine, member("m2")]))
    assert d.claim is None
    assert d.status is not None
    assert d.status["status"]["assignedProcess"]["name"] == "m1"


def test_CORRECTED_an_expired_allocation_moves_to_releasing_and_stamps_the_return_trigger() -> None:
    status = {
        "phase": "Bound",
        "boundPool": {"name": "demo-pool", "namespace": "pools"},
        "assignedProcess": {"name": "demo-abcd", "namespace": "pools"},
        "expiresAt": (NOW - timedelta(minutes=30)).isoformat(),
    }
    mine = member("demo-abcd", ephemeral=True, annotations={ann.ALLOCATION: "alloc-1"})
    d = allocation_decide(observe(alloc(status=status), [pool()], [mine]))
    assert d.action == "Release"
    assert d.member_patch is not None
    assert d.member_patch.patch == {"metadata": {"annotations": {ann.RETURN_TRIGGER: "true"}}}
    assert d.status is not None
    assert d.status["status"]["phase"] == "Releasing"


def test_CORRECTED_releasing_becomes_released_once_the_member_is_returned() -> None:
    status = {
        "phase": "Releasing",
        "boundPool": {"name": "demo-pool", "namespace": "pools"},
        "assignedProcess": {"name": "demo-old", "namespace": "pools"},
    }
    d = allocation_decide(observe(alloc(status=status, deleting=True), [pool()], [member("demo-old")]))
    assert d.status is not None
    assert d.status["status"]["phase"] == "Released"
    assert d.remove_finalizer


def test_a_released_allocation_does_nothing_but_drop_its_finalizer_on_deletion() -> None:
    assert allocation_decide(observe(alloc(status={"phase": "Released"}), [], [])).status is None
    assert allocation_decide(observe(alloc(status={"phase": "Released"}, deleting=True), [], [])).remove_finalizer


def test_CORRECTED_a_new_allocation_gets_the_finalizer() -> None:
    assert allocation_decide(observe(alloc(finalizer=False), [pool()], [])).add_finalizer


def test_CORRECTED_waiting_past_the_spawn_timeout_fails_with_a_reason() -> None:
    d = allocation_decide(observe(alloc(created=3600), [pool()], []))
    assert d.status is not None
    assert d.status["status"]["phase"] == "Failed"
    assert [e.reason for e in d.events] == ["SpawnTimeout"]


def test_an_unchanged_queued_status_is_not_written_again() -> None:
    first = allocation_decide(observe(alloc(), [pool()], []))
    assert first.status is not None
    again = allocation_decide(observe(alloc(status=first.status["status"]), [pool()], []))
    assert again.status is None
    assert again.events == ()


def test_a_queued_allocation_wakes_at_its_spawn_timeout_when_shorter_than_the_heartbeat() -> None:
    obs = dataclasses.replace(observe(alloc(created=10), [pool()], []), spawn_timeout=timedelta(seconds=15),
                              heartbeat_seconds=30.0)
    d = allocation_decide(obs)
    assert d.action == "Queued"
    assert d.requeue_after == pytest.approx(5.0)
    assert allocation_decide(observe(alloc(created=10), [pool()], [])).requeue_after == 30.0
