"""pool_reconciler.allocation_decide: the phase table, one allocation pass, and each of its steps.
CORRECTED tests differ from the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import msgspec
import pytest

from pool_reconciler.allocation_decide import (
    AllocationAction,
    AllocationContext,
    Routed,
    adopt_claimed,
    allocation_action,
    allocation_context,
    allocation_decide,
    bind,
    heartbeat,
    no_matching_pool,
    phase_change,
    release,
    resolve_expiry,
    route_allocation,
    wait,
)
from pool_reconciler.decision import AllocationDecision, MemberWrite
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationPhase, AllocationRef, EphemeralAllocation
from shared.domain.api.codec import format_timestamp
from shared.kube.events import Event
from tests.unit.pool_reconciler.builders import DEMO, NOW, alloc, demo_pool, member, observe_allocation

PH = AllocationPhase
DEMO_SEL = {"repos": ["pleme-io/demo-*"]}
pool = demo_pool
observe = observe_allocation


def without_conditions(status: dict[str, object]) -> dict[str, object]:
    """``status`` without its kstatus conditions (tested on their own below)."""
    return {k: v for k, v in status.items() if k != "conditions"}


# ── the phase table ──────────────────────────────────────────────────────────


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
    assert allocation_action(c) == expected


def test_the_context_round_trips_through_json_with_snake_case_keys() -> None:
    c = ctx(PH.BOUND, expires=60, assigned="demo-abcd", bound=DEMO)
    raw = msgspec.json.encode(c)
    assert b'"being_deleted"' in raw
    assert msgspec.json.decode(raw, type=AllocationContext) == c


# ── the pass ─────────────────────────────────────────────────────────────────


def test_no_matching_pool_when_the_selector_excludes() -> None:
    d = allocation_decide(observe(alloc(repo="drzln/dotfiles"), [pool(selector=DEMO_SEL)], []))
    assert d.action == "NoMatchingPool"
    assert d.status is not None
    assert d.status.to_json()["phase"] == "NoMatchingPool"


def test_bind_claims_a_free_member_with_its_resource_version() -> None:
    d = allocation_decide(observe(alloc(), [pool()], [member("demo-abcd1234", rv="17")]))
    assert d.action == "Bind"
    assert d.claim is not None
    assert d.claim.name == "demo-abcd1234"
    assert d.claim.resource_version == "17"
    assert d.claim.patch.to_json()["metadata"]["resourceVersion"] == "17"
    assert d.claim.patch.to_json()["metadata"]["annotations"] == {
        ann.REQUESTOR: "pools/alloc-1",
        ann.REQUESTOR_KIND: "manual",
        ann.ALLOCATION: "alloc-1",
    }
    lifetime = d.claim.patch.to_json()["spec"]["lifetime"]
    assert lifetime["permanent"] is None
    assert lifetime["ephemeral"]["teardownPolicy"] == "Never"
    assert d.status is not None
    status = d.status.to_json()
    assert status["phase"] == "Bound"
    assert status["expiresAt"] == "2025-06-01T13:00:00Z"


def test_CORRECTED_a_bound_member_lives_until_expiry_plus_grace_counted_from_its_creation() -> None:
    d = allocation_decide(observe(alloc(), [pool()], [member("m")]))
    assert d.claim is not None
    # created 3 h ago, expires in 1 h, +10 min grace → 4 h 10 min from creation
    assert d.claim.patch.to_json()["spec"]["lifetime"]["ephemeral"]["ttl"] == f"{4 * 3600 + 600}s"


def test_CORRECTED_the_requested_ttl_is_capped_by_max_allocation_ttl() -> None:
    d = allocation_decide(observe(alloc(ttl="10h"), [pool(max_ttl="2h")], [member("m")]))
    assert d.status is not None
    assert d.status.to_json()["expiresAt"] == "2025-06-01T14:00:00Z"


def test_wait_when_the_pool_is_full() -> None:
    d = allocation_decide(
        observe(alloc(), [pool()], [member("only-one", ephemeral=True, annotations={ann.ALLOCATION: "other"})])
    )
    assert d.action == "Queued"
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Queued"


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
    assert d.status.to_json()["assignedProcess"]["name"] == "m1"


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
    assert d.member_patch.patch.to_json() == {"metadata": {"annotations": {ann.RETURN_TRIGGER: "true"}}}
    assert (d.member_patch.reason, d.member_patch.resource_version) == (MemberWrite.RELEASE, None)
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Releasing"


def test_CORRECTED_releasing_becomes_released_once_the_member_is_returned() -> None:
    status = {
        "phase": "Releasing",
        "boundPool": {"name": "demo-pool", "namespace": "pools"},
        "assignedProcess": {"name": "demo-old", "namespace": "pools"},
    }
    d = allocation_decide(observe(alloc(status=status, deleting=True), [pool()], [member("demo-old")]))
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Released"
    assert d.released


def test_a_released_allocation_does_nothing_but_let_its_finalizer_go_on_deletion() -> None:
    live = allocation_decide(observe(alloc(status={"phase": "Released"}), [], []))
    assert (live.status, live.released) == (None, False)
    assert allocation_decide(observe(alloc(status={"phase": "Released"}, deleting=True), [], [])).released


def test_CORRECTED_a_deleted_allocation_that_never_held_a_member_lets_its_finalizer_go() -> None:
    d = allocation_decide(observe(alloc(deleting=True, status={"phase": "Queued", "message": "waiting"}), [pool()], []))
    assert (d.action, d.status, d.released) == ("NoOp", None, True)


def test_a_live_waiting_allocation_is_not_released() -> None:
    assert not allocation_decide(observe(alloc(finalizer=False), [pool()], [])).released


def test_CORRECTED_waiting_past_the_spawn_timeout_fails_with_a_reason() -> None:
    d = allocation_decide(observe(alloc(created=3600), [pool()], []))
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Failed"
    assert [e.reason for e in d.events] == ["SpawnTimeout"]


def test_an_unchanged_queued_status_is_not_written_again() -> None:
    first = allocation_decide(observe(alloc(), [pool()], []))
    assert first.status is not None
    again = allocation_decide(observe(alloc(status=first.status.to_json()), [pool()], []))
    assert again.status is None
    assert again.events == ()


def test_a_queued_allocation_wakes_at_its_spawn_timeout_when_shorter_than_the_heartbeat() -> None:
    obs = dataclasses.replace(observe(alloc(created=10), [pool()], []), spawn_timeout=timedelta(seconds=15),
                              heartbeat_seconds=30.0)
    d = allocation_decide(obs)
    assert d.action == "Queued"
    assert d.requeue_after == pytest.approx(5.0)
    assert allocation_decide(observe(alloc(created=10), [pool()], [])).requeue_after == 30.0


# ── the steps ────────────────────────────────────────────────────────────────

CLAIMED = {ann.ALLOCATION: "alloc-1", ann.REQUESTOR: "pools/alloc-1"}
BOUND_STATUS = {
    "phase": "Bound",
    "boundPool": {"name": "demo-pool", "namespace": "pools"},
    "assignedProcess": {"name": "m1", "namespace": "pools"},
}


def test_adopt_claimed_binds_to_the_member_already_claimed_without_a_new_claim() -> None:
    mine = member("m1", ephemeral=True, annotations=CLAIMED)
    d = adopt_claimed(observe(alloc(), [pool()], [member("m0"), mine]))
    assert d is not None
    assert (d.action, d.claim, d.events[0].reason) == ("Bind", None, "Bound")


ADOPT_NONE_ROWS = [
    ("a member claimed by another allocation", alloc(), {ann.ALLOCATION: "other", ann.REQUESTOR: "pools/other"}),
    ("a member already being returned", alloc(), {**CLAIMED, ann.RETURN_TRIGGER: "true"}),
    ("an allocation being deleted", alloc(deleting=True), CLAIMED),
    ("an allocation already Bound", alloc(status=BOUND_STATUS), CLAIMED),
]


@pytest.mark.parametrize(("a", "annotations"), [r[1:] for r in ADOPT_NONE_ROWS],
                         ids=[f"nothing is adopted for {r[0]}" for r in ADOPT_NONE_ROWS])
def test_adopt_claimed_adopts_nothing(a: EphemeralAllocation, annotations: dict[str, str]) -> None:
    assert adopt_claimed(observe(a, [pool()], [member("m1", ephemeral=True, annotations=annotations)])) is None


def test_route_allocation_routes_only_waiting_allocations() -> None:
    routed = route_allocation(observe(alloc(), [pool()], [member("m2"), member("m1")]))
    assert routed.pool is not None
    assert routed.member is not None
    assert (routed.pool.metadata.name, routed.member.metadata.name) == ("demo-pool", "m1")
    assert route_allocation(observe(alloc(status=BOUND_STATUS), [pool()], [member("m2")])) == Routed()
    assert route_allocation(observe(alloc(deleting=True), [pool()], [member("m2")])) == Routed()


def test_allocation_context_reads_the_status_and_the_route() -> None:
    a = alloc(status={**BOUND_STATUS, "expiresAt": NOW.isoformat()})
    c = allocation_context(observe(a, [pool()], []), Routed(pool(), member("m9")))
    assert c == AllocationContext(phase=PH.BOUND, being_deleted=False, expires_at=NOW, assigned_process="m1",
                                  bound_pool=DEMO, now=NOW, matched_pool=DEMO, free_member="m9")


def test_bind_to_a_member_already_ours_writes_only_the_status() -> None:
    d = bind(observe(alloc(), [pool()], []), pool(), member("m1", ephemeral=True, annotations=CLAIMED))
    assert d.claim is None
    assert d.status is not None
    assert without_conditions(d.status.to_json()) == {
        "phase": "Bound",
        "phaseSince": "2025-06-01T12:00:00Z",
        "message": "bound to m1 of pool demo-pool until 2025-06-01T13:00:00Z",
        "boundPool": {"name": "demo-pool", "namespace": "pools"},
        "assignedProcess": {"name": "m1", "namespace": "pools"},
        "allocatedAt": "2025-06-01T12:00:00Z",
        "expiresAt": "2025-06-01T13:00:00Z",
    }
    assert d.requeue_after == 30.0


def test_a_claim_with_an_unparsable_ttl_binds_for_an_hour_and_warns() -> None:
    d = bind(observe(alloc(ttl="soon"), [pool()], []), pool(), member("m1"))
    assert d.claim is not None
    assert [(e.type.value, e.reason) for e in d.events] == [("Normal", "Bound"), ("Warning", "InvalidTtl")]
    assert d.events[1].message == "ttl 'soon' does not parse; using 1h"


EXPIRY_ROWS = [
    ("the allocation's ttl", "30m", "4h", "2025-06-01T12:30:00Z", None),
    ("the template's ttl when the allocation has none", None, "4h", "2025-06-01T13:00:00Z", None),
    ("capped by maxAllocationTtl", "10h", "2h", "2025-06-01T14:00:00Z", None),
    ("a zero cap is no cap", "10h", "0s", "2025-06-01T22:00:00Z", None),
    ("an unparsable ttl is an hour, with a warning", "bogus", "4h", "2025-06-01T13:00:00Z",
     "ttl 'bogus' does not parse; using 1h"),
]


@pytest.mark.parametrize(("ttl", "cap", "expires", "warning"), [r[1:] for r in EXPIRY_ROWS],
                         ids=[r[0] for r in EXPIRY_ROWS])
def test_resolve_expiry(ttl: str | None, cap: str, expires: str, warning: str | None) -> None:
    at, said = resolve_expiry(alloc(ttl=ttl), pool(max_ttl=cap), NOW)
    assert (format_timestamp(at), said) == (expires, warning)


def test_heartbeat_looks_again_at_expiry_when_it_comes_before_the_heartbeat() -> None:
    def ctx_expiring(seconds: float | None) -> AllocationContext:
        return AllocationContext(phase=PH.BOUND, being_deleted=False, now=NOW,
                                 expires_at=None if seconds is None else NOW + timedelta(seconds=seconds))

    obs = observe(alloc(), [], [])
    assert [heartbeat(obs, ctx_expiring(s)).requeue_after for s in (None, 600, 12, 0.2)] == [30.0, 30.0, 12.0, 1.0]


def test_release_stamps_the_return_trigger_once() -> None:
    action = AllocationAction("Release", DEMO, "m1")
    a = alloc(status=BOUND_STATUS)
    first = release(observe(a, [pool()], [member("m1", ephemeral=True, annotations=CLAIMED)]), action)
    assert first.member_patch is not None
    stamped = member("m1", ephemeral=True, annotations={**CLAIMED, ann.RETURN_TRIGGER: "true"})
    again = release(observe(a, [pool()], [stamped]), action)
    assert again.member_patch is None
    assert (again.action, again.released) == ("Release", False)


def test_release_of_a_member_that_is_gone_is_released_at_once() -> None:
    obs = observe(alloc(status=BOUND_STATUS, deleting=True), [pool()], [])
    d = release(obs, AllocationAction("Release", DEMO, "m1"))
    assert d.status is not None
    assert without_conditions(d.status.to_json()) == {"phase": "Released", "phaseSince": "2025-06-01T12:00:00Z",
                                  "message": "released; member returned to its pool",
                                  "boundPool": {"name": "demo-pool", "namespace": "pools"}}
    assert (d.released, d.requeue_after, d.member_patch) == (True, None, None)


def test_no_matching_pool_says_whether_a_pool_ref_named_nothing() -> None:
    by_selector = no_matching_pool(observe(alloc(), [], []))
    by_ref = no_matching_pool(observe(alloc(pool_ref={"name": "x", "namespace": "pools"}), [], []))
    assert [e for d in (by_selector, by_ref) for e in d.events] == [
        Event.warning("NoMatchingPool", "no pool matches this requestor"),
        Event.warning("NoMatchingPool", "poolRef names no pool here"),
    ]


def test_wait_queues_on_the_pool_until_the_spawn_timeout() -> None:
    queued = wait(observe(alloc(created=10), [pool()], []), pool())
    assert queued.status is not None
    assert without_conditions(queued.status.to_json()) == {"phase": "Queued", "phaseSince": "2025-06-01T12:00:00Z",
                                       "message": "waiting for a free member of pool demo-pool",
                                       "boundPool": {"name": "demo-pool", "namespace": "pools"}}
    failed = wait(observe(alloc(created=600), [pool()], []), pool())
    assert failed.events == (Event.warning(
        "SpawnTimeout", "no free member in pool demo-pool within the spawn timeout (600s)"),)
    assert failed.requeue_after is None


def test_phase_change_writes_only_when_the_phase_or_the_message_differ() -> None:
    obs = observe(alloc(status={"phase": "Queued", "message": "m"}), [], [])
    assert phase_change(obs, PH.QUEUED, "m", requeue=5.0) == AllocationDecision("Queued", requeue_after=5.0)
    assert phase_change(obs, PH.QUEUED, "n", requeue=5.0).events == (Event.normal("Queued", "n"),)
    assert phase_change(obs, PH.NO_MATCHING_POOL, "m", requeue=5.0).status is not None


# ── a Bound allocation whose member is gone (issue 13) ───────────────────────

UNEXPIRED = {**BOUND_STATUS, "expiresAt": "2025-06-01T12:30:00Z", "message": "bound to m1 of pool demo-pool"}


def test_CORRECTED_a_bound_allocation_whose_member_is_gone_fails_with_a_warning() -> None:
    d = allocation_decide(observe(alloc(status=UNEXPIRED), [pool()], [member("other")]))
    message = "member m1 of pool demo-pool is gone; this allocation holds nothing"
    assert d.status is not None
    assert (d.status.phase, d.status.message) == (PH.FAILED, message)
    assert d.events == (Event.warning("MemberLost", message),)
    assert d.claim is None
    assert d.member_patch is None


def test_a_bound_allocation_whose_member_is_there_only_waits() -> None:
    d = allocation_decide(observe(alloc(status=UNEXPIRED), [pool()], [member("m1", ephemeral=True,
                                                                              annotations=CLAIMED)]))
    assert (d.action, d.status, d.events) == ("HeartbeatBound", None, ())


def test_a_deleted_allocation_whose_member_is_gone_is_released() -> None:
    d = allocation_decide(observe(alloc(status=UNEXPIRED, deleting=True), [pool()], []))
    assert d.status is not None
    assert d.status.phase is PH.RELEASED
    assert d.released


def test_CORRECTED_a_fresh_member_on_the_lost_members_slot_is_not_taken_for_it() -> None:
    status = {**UNEXPIRED, "allocatedAt": "2025-06-01T11:00:00Z"}
    fresh = member("m1", created=60)  # created 11:59, after the bind, and not claimed for alloc-1
    d = allocation_decide(observe(alloc(status=status), [pool()], [fresh]))
    assert d.status is not None
    assert d.status.phase is PH.FAILED
    old = member("m1", created=7200)  # created 10:00, before the bind: the cache may lag its claim
    assert allocation_decide(observe(alloc(status=status), [pool()], [old])).status is None


# ── kstatus conditions (issue 13) ────────────────────────────────────────────


def truths(d: AllocationDecision) -> dict[str, str]:
    assert d.status is not None
    status = d.status.to_json()
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_CORRECTED_a_bound_allocation_is_ready_with_its_generation() -> None:
    a = alloc()
    a = msgspec.structs.replace(a, metadata=msgspec.structs.replace(a.metadata, generation=3))
    d = bind(observe(a, [pool()], []), pool(), member("m1", ephemeral=True, annotations=CLAIMED))
    assert truths(d) == {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
    assert d.status is not None
    status = d.status.to_json()
    assert status["observedGeneration"] == 3
    assert {c["observedGeneration"] for c in status["conditions"]} == {3}
    assert {c["reason"] for c in status["conditions"]} == {"Bound"}


def test_CORRECTED_a_queued_allocation_is_reconciling_never_current() -> None:
    d = wait(observe(alloc(created=10), [pool()], []), pool())
    assert truths(d) == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}


def test_CORRECTED_a_failed_allocation_is_stalled_with_its_reason() -> None:
    d = wait(observe(alloc(created=600), [pool()], []), pool())
    assert truths(d) == {"Ready": "False", "Reconciling": "False", "Stalled": "True"}
    assert d.status is not None
    assert {c["reason"] for c in d.status.to_json()["conditions"]} == {"SpawnTimeout"}


def test_a_no_matching_pool_allocation_is_reconciling() -> None:
    d = no_matching_pool(observe(alloc(), [], []))
    assert truths(d) == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
