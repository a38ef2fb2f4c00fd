"""pool_reconciler.pool_decide: the spec's tables (spec/pool-reconciler.md §7.1, §7.2, §7.5–§7.8,
§8.3, §8.4, §8.6, §8.7) and the corrected pass (DESIGN §2.10). Rows marked CORRECTED differ from
the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from pool_reconciler.decision import PoolObserved
from pool_reconciler.pool_decide import (
    DEFAULT_RESET_IMAGE,
    ConvergenceAction,
    LedgerEntry,
    LegacyDecision,
    MemberSnapshot,
    belongs_to_pool,
    decide_pool_convergence,
    decide_pool_reconcile,
    member_document,
    member_state,
    plan_return,
    pool_decide,
    pool_phase,
    reset_job_name,
)
from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import EphemeralPool, MemberState, PoolPhase, ReplacementPolicy, ReturnPolicy
from shared.domain.api.process import Process

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
F, A, S, R, X = (
    MemberState.FREE,
    MemberState.ALLOCATED,
    MemberState.SPAWNING,
    MemberState.RETURNING,
    MemberState.FAILED,
)
RI, HF, PP = ReplacementPolicy.REPLACE_IMMEDIATE, ReplacementPolicy.HOLD_FAILED, ReplacementPolicy.PAUSE_POOL


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# ── §7.1 / §8.3 legacy decision ──────────────────────────────────────────────


def legacy(
    w: int,
    mn: int,
    mx: int,
    members: list[tuple[str, MemberState, float]],
    *,
    deleting: bool = False,
    free_ttl: str = "24h",
) -> LegacyDecision:
    ledger = [LedgerEntry(n, s, ago(age)) for n, s, age in members]
    return decide_pool_reconcile(
        deleting=deleting, desired_size=w, min_size=mn, max_size=mx, free_ttl=free_ttl, ledger=ledger, now=NOW
    )


LEGACY_ROWS = [
    ("an empty pool below desired spawns up to desired", 3, 0, 0, [], {}, LegacyDecision("Spawn", 3)),
    (
        "a pool at desired with free members does nothing",
        2,
        0,
        0,
        [("a", F, 60), ("b", F, 60)],
        {},
        LegacyDecision("NoOp"),
    ),
    (
        "excess free members are reaped back to desired",
        1,
        0,
        0,
        [("a", F, 60), ("b", F, 60), ("c", F, 60)],
        {},
        LegacyDecision("ReapExcess", 2),
    ),
    ("allocated members do not count as supply", 1, 0, 0, [("a", A, 60)], {}, LegacyDecision("Spawn", 1)),
    ("spawning members count as supply", 2, 0, 0, [("a", S, 10), ("b", F, 60)], {}, LegacyDecision("NoOp")),
    (
        "failed members are replaced before any other action",
        3,
        0,
        0,
        [("a", F, 60), ("bad", X, 60), ("c", S, 10)],
        {},
        LegacyDecision("ReplaceMembers", names=("bad",)),
    ),
    (
        "a free member older than freeTtl is replaced",
        1,
        0,
        0,
        [("old", F, 60)],
        {"free_ttl": "10s"},
        LegacyDecision("ReplaceMembers", names=("old",)),
    ),
    ("minSize is enforced even when desired is smaller", 0, 2, 0, [("a", A, 60)], {}, LegacyDecision("Spawn", 1)),
    (
        "maxSize reaps above the ceiling",
        5,
        0,
        2,
        [("a", A, 60), ("b", F, 60), ("c", F, 60)],
        {},
        LegacyDecision("ReapExcess", 1),
    ),
    ("a deletion stamp drains the pool", 1, 0, 0, [("a", F, 60)], {"deleting": True}, LegacyDecision("Drain")),
    ("a returning member is not supply", 2, 0, 0, [("a", R, 60)], {}, LegacyDecision("Spawn", 2)),
    ("minSize counts active members", 3, 5, 0, [("a", F, 60), ("b", F, 60)], {}, LegacyDecision("Spawn", 3)),
    (
        "spawning beyond desired clamps the free budget to zero",
        2,
        0,
        0,
        [("a", F, 60), ("b", S, 1), ("c", S, 1), ("d", S, 1)],
        {},
        LegacyDecision("ReapExcess", 1),
    ),
    ("a zero freeTtl turns staleness off", 1, 0, 0, [("a", F, 864000)], {"free_ttl": "0s"}, LegacyDecision("NoOp")),
    (
        "an unparsable freeTtl turns staleness off",
        1,
        0,
        0,
        [("a", F, 864000)],
        {"free_ttl": "bogus"},
        LegacyDecision("NoOp"),
    ),
    (
        "spawning toward desiredSize ignores maxSize",
        5,
        0,
        2,
        [("a", F, 60), ("b", F, 60)],
        {},
        LegacyDecision("Spawn", 3),
    ),
    (
        "a deleting pool drains even with failed members",
        1,
        0,
        0,
        [("a", X, 60)],
        {"deleting": True},
        LegacyDecision("Drain"),
    ),
]


@pytest.mark.parametrize(
    ("w", "mn", "mx", "members", "kw", "expected"), [r[1:] for r in LEGACY_ROWS], ids=[r[0] for r in LEGACY_ROWS]
)
def test_legacy_decision_table(
    w: int,
    mn: int,
    mx: int,
    members: list[tuple[str, MemberState, float]],
    kw: dict[str, Any],
    expected: LegacyDecision,
) -> None:
    assert legacy(w, mn, mx, members, **kw) == expected


# ── §7.2 / §8.4 desired-count decision ───────────────────────────────────────

P = ProcessPhase


def snaps(*rows: tuple[str, ProcessPhase, float]) -> list[MemberSnapshot]:
    return [MemberSnapshot(n, ph, ago(age)) for n, ph, age in rows]


CREATE = ConvergenceAction("CreateMember")


def sig(name: str) -> ConvergenceAction:
    return ConvergenceAction("SignalSigterm", name)


def reap(name: str) -> ConvergenceAction:
    return ConvergenceAction("ReapFailed", name)


PAUSE_1 = ConvergenceAction("Pause", reason="1 member(s) reached Failed/Zombie/Reaped; policy=PausePool")

DESIRED_ROWS = [
    ("an empty pool below desired creates up to desired", 3, RI, snaps(), [CREATE] * 3),
    ("a pool at desired does nothing", 2, RI, snaps(("a", P.RUNNING, 60), ("b", P.ATTESTED, 60)), []),
    (
        "excess healthy members are terminated oldest first",
        1,
        RI,
        snaps(("old", P.RUNNING, 1000), ("mid", P.RUNNING, 500), ("new", P.RUNNING, 60)),
        [sig("old"), sig("mid")],
    ),
    (
        "a failed member is reaped under ReplaceImmediate",
        2,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.RUNNING, 60), ("c", P.FAILED, 60)),
        [reap("c")],
    ),
    (
        "a failed member is held under HoldFailed",
        2,
        HF,
        snaps(("a", P.RUNNING, 60), ("b", P.RUNNING, 60), ("c", P.FAILED, 60)),
        [],
    ),
    (
        "a failed member pauses the pool under PausePool",
        5,
        PP,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [PAUSE_1],
    ),
    (
        "a failed member below desired is reaped and replaced",
        3,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [reap("b"), CREATE, CREATE],
    ),
    (
        "desired zero terminates every member",
        0,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.ATTESTED, 30)),
        [sig("a"), sig("b")],
    ),
    (
        "CORRECTED: members still starting count toward desired, so nothing is created",
        3,
        RI,
        snaps(("a", P.PENDING, 5), ("b", P.FORKING, 5), ("c", P.EXECING, 5)),
        [],
    ),
    ("a releasing member is leaving, so one is created", 1, RI, snaps(("a", P.RELEASING, 60)), [CREATE]),
    ("one running member below desired three creates two", 3, RI, snaps(("a", P.RUNNING, 60)), [CREATE, CREATE]),
    (
        "HoldFailed creates a replacement alongside the failed member",
        2,
        HF,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [CREATE],
    ),
    ("a zombie is reaped then replaced under ReplaceImmediate", 1, RI, snaps(("z", P.ZOMBIE, 60)), [reap("z"), CREATE]),
    ("PausePool with no members creates normally", 2, PP, snaps(), [CREATE, CREATE]),
    (
        "CORRECTED: scale-down skips bound members and takes free ones first",
        1,
        RI,
        [
            MemberSnapshot("a", P.ATTESTED, ago(900), bound=True),
            MemberSnapshot("b", P.ATTESTED, ago(500)),
            MemberSnapshot("c", P.FORKING, ago(10)),
        ],
        [sig("b"), sig("c")],
    ),
    (
        "CORRECTED: a member being deleted is not counted",
        1,
        RI,
        [MemberSnapshot("a", P.ATTESTED, ago(900), leaving=True)],
        [CREATE],
    ),
]


@pytest.mark.parametrize(
    ("desired", "policy", "members", "expected"), [r[1:] for r in DESIRED_ROWS], ids=[r[0] for r in DESIRED_ROWS]
)
def test_desired_count_decision_table(
    desired: int, policy: ReplacementPolicy, members: list[MemberSnapshot], expected: list[ConvergenceAction]
) -> None:
    assert decide_pool_convergence(desired, policy, members) == expected


CLASSIFY = [(ph, ph in (P.RUNNING, P.ATTESTED), ph in (P.FAILED, P.ZOMBIE, P.REAPED)) for ph in ProcessPhase.all()]


@pytest.mark.parametrize(
    ("phase", "healthy", "failed"), CLASSIFY, ids=[f"{c[0].value} is classified" for c in CLASSIFY]
)
def test_snapshot_predicates_align_with_live_phases(phase: ProcessPhase, healthy: bool, failed: bool) -> None:
    s = MemberSnapshot("m", phase, NOW)
    assert (s.healthy, s.failed) == (healthy, failed)


def test_the_desired_decision_is_deterministic() -> None:
    members = snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60))
    assert decide_pool_convergence(2, RI, members) == decide_pool_convergence(2, RI, members)


def test_convergence_actions_round_trip_through_json() -> None:
    actions = [CREATE, sig("a"), PAUSE_1]
    assert msgspec.json.decode(msgspec.json.encode(actions), type=list[ConvergenceAction]) == actions


# ── §7.5 / §8.7 member state and membership ──────────────────────────────────


def process(
    name: str = "m",
    phase: str | None = "Attested",
    *,
    ephemeral: bool = False,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    created: float = 600,
    rv: str = "7",
    pool: str = "test-pool",
) -> Process:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "pools",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": ago(created).isoformat(),
        "annotations": {ann.POOL: pool, **(annotations or {})},
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    lifetime = {"ephemeral": {"ttl": "1h", "teardownPolicy": "Always"}} if ephemeral else {"permanent": {}}
    doc: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "x", "path": "."}},
            "lifetime": lifetime,
        },
    }
    if phase is not None:
        doc["status"] = {"phase": phase, "phaseSince": ago(60).isoformat()}
    return convert(doc, Process)


STATE_ROWS = [
    ("an Attested permanent Process is Free", process(), F),
    ("an Attested ephemeral Process is Allocated", process(ephemeral=True), A),
    ("a Failed Process is Failed", process(phase="Failed"), X),
    ("a Reaped Process is Failed", process(phase="Reaped"), X),
    ("an Exiting Process is Returning", process(phase="Exiting"), R),
    ("a Zombie Process is Returning", process(phase="Zombie"), R),
    ("a Process without status is Spawning", process(phase=None), S),
    ("a Running Process is Spawning", process(phase="Running"), S),
    ("a Releasing Process is Spawning", process(phase="Releasing"), S),
    ("CORRECTED: a member with return-trigger is Returning", process(annotations={ann.RETURN_TRIGGER: "true"}), R),
    ("CORRECTED: a member being deleted is Returning", process(deleting=True), R),
]


@pytest.mark.parametrize(("proc", "expected"), [r[1:] for r in STATE_ROWS], ids=[r[0] for r in STATE_ROWS])
def test_member_state_from_a_process(proc: Process, expected: MemberState) -> None:
    assert member_state(proc) is expected


def test_membership_is_by_the_pool_annotation_exactly() -> None:
    p = process(pool="demo-pool")
    assert belongs_to_pool(p, "demo-pool")
    assert not belongs_to_pool(p, "other")


# ── §7.6 pool phase ──────────────────────────────────────────────────────────


def pool(
    desired_size: int = 1,
    *,
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 0,
    deleting: bool = False,
    finalizer: bool = True,
    return_policy: str = "Replace",
    policy: str = "ReplaceImmediate",
    status: dict[str, Any] | None = None,
    name: str = "test-pool",
    template: dict[str, Any] | None = None,
) -> EphemeralPool:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "pools",
        "uid": "0b4c3f1e-9a7d-4c55-8d2e-3f1a2b3c4d5e",
        "finalizers": [finalizers.POOL] if finalizer else [],
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    doc: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "desiredSize": desired_size,
            "minSize": min_size,
            "maxSize": max_size,
            "desired": desired,
            "returnPolicy": return_policy,
            "replacementPolicy": policy,
            "freeTtl": "24h",
            "maxAllocationTtl": "4h",
            "template": template or {"aplicacao": {"chartRef": "oci://example/chart", "version": "0.5.5"}, "ttl": "1h"},
        },
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, EphemeralPool)


PHASE_ROWS = [
    ("a deleting pool is Draining", pool(deleting=True), [F], PoolPhase.DRAINING),
    ("a pool without members is Initializing", pool(), [], PoolPhase.INITIALIZING),
    ("supply below minSize is Degraded", pool(1, min_size=3), [F, S], PoolPhase.DEGRADED),
    ("supply below desiredSize is ScalingUp", pool(3), [F, A], PoolPhase.SCALING_UP),
    ("supply above desiredSize is ScalingDown", pool(1), [F, F], PoolPhase.SCALING_DOWN),
    ("supply at desiredSize is Steady", pool(2), [F, S, A], PoolPhase.STEADY),
    ("CORRECTED: desired mode counts allocated members against desired", pool(0, desired=2), [F, A], PoolPhase.STEADY),
]


@pytest.mark.parametrize(("p", "states", "expected"), [r[1:] for r in PHASE_ROWS], ids=[r[0] for r in PHASE_ROWS])
def test_pool_phase_table(p: EphemeralPool, states: list[MemberState], expected: PoolPhase) -> None:
    assert pool_phase(p, states) is expected


# ── §7.8 / §8.6 return plan ──────────────────────────────────────────────────

RETURN_ROWS = [
    ("Replace deletes and respawns", ReturnPolicy.REPLACE, None, "DeleteAndRespawn", None),
    ("Reset without an image uses the default image", ReturnPolicy.RESET, None, "ResetThenFree", DEFAULT_RESET_IMAGE),
    (
        "Reset with an image uses that image",
        ReturnPolicy.RESET,
        "ghcr.io/example/reset:1.2.3",
        "ResetThenFree",
        "ghcr.io/example/reset:1.2.3",
    ),
    ("Keep keeps the member for inspection", ReturnPolicy.KEEP, None, "KeepForInspection", None),
]


@pytest.mark.parametrize(
    ("policy", "image", "kind", "plan_image"), [r[1:] for r in RETURN_ROWS], ids=[r[0] for r in RETURN_ROWS]
)
def test_return_plan_table(policy: ReturnPolicy, image: str | None, kind: str, plan_image: str | None) -> None:
    plan = plan_return(policy, image)
    assert (plan.kind, plan.image) == (kind, plan_image)
    assert (plan.kind != "DeleteAndRespawn", plan.kind == "ResetThenFree") == (
        policy.keeps_process,
        policy.runs_reset_job,
    )


def test_default_reset_image_is_the_spec_constant() -> None:
    assert DEFAULT_RESET_IMAGE == "ghcr.io/pleme-io/pool-reset:latest"


# ── §4.7 member document ─────────────────────────────────────────────────────


def test_member_document_matches_the_worked_example() -> None:
    template = {
        "aplicacao": {"chartRef": "oci://example/chart", "version": "0.5.5", "profile": "all-in-one"},
        "ttl": "2h",
        "teardown": "OnAttested",
        "postconditions": [{"kind": "HelmReleaseReleased", "params": {"name": "r", "namespace": "n"}}],
    }
    p = pool(name="attest-pool", template=template)
    p = msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, namespace="ephemeral-pools"))
    doc = member_document(p, 0)
    assert doc["metadata"] == {
        "name": "attest-pool-7737df3b",
        "namespace": "ephemeral-pools",
        "annotations": {ann.POOL: "attest-pool", ann.POOL_SLOT: "0"},
        "ownerReferences": [
            {
                "apiVersion": "tatara.pleme.io/v1alpha1",
                "kind": "EphemeralPool",
                "name": "attest-pool",
                "uid": "0b4c3f1e-9a7d-4c55-8d2e-3f1a2b3c4d5e",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    spec = doc["spec"]
    assert spec["lifetime"] == {"permanent": {}}
    assert spec["intent"] == {
        "aplicacao": {
            "chartRef": "oci://example/chart",
            "version": "0.5.5",
            "profile": "all-in-one",
            "valuesOverlay": None,
        }
    }
    assert spec["boundary"]["postconditions"] == [
        {"kind": "HelmReleaseReleased", "params": {"name": "r", "namespace": "n"}}
    ]
    assert spec["classification"] == {
        "pointType": "Gate",
        "substrate": "Compute",
        "horizon": {"kind": "Bounded"},
        "calm": "Monotone",
        "dataClassification": "Internal",
    }
    assert spec["signals"] == {
        "sigtermGraceSeconds": 480,
        "sigkillForce": True,
        "sighupStrategy": "Reconverge",
        "startSuspended": False,
    }
    assert spec["suspended"] is False
    assert spec["dependsOn"] == []
    assert "status" not in doc


# ── the pass (pool_decide) ───────────────────────────────────────────────────


def observe(p: EphemeralPool, *members: Process, **kw: Any) -> PoolObserved:
    return PoolObserved(pool=p, members=members, now=NOW, **kw)


def test_a_new_pool_gets_the_finalizer_and_its_members_on_distinct_slots() -> None:
    d = pool_decide(observe(pool(3, finalizer=False)))
    assert d.add_finalizer
    assert [c.slot for c in d.create] == [0, 1, 2]
    assert len({c.name for c in d.create}) == 3
    assert d.status is not None
    assert d.status["status"]["phase"] == "Initializing"


def test_creates_skip_slots_held_by_current_members() -> None:
    p = pool(2)
    first = pool_decide(observe(p)).create[0]
    held = process(first.name, phase="Attested")
    d = pool_decide(observe(p, held))
    assert [c.slot for c in d.create] == [1]


def test_CORRECTED_desired_mode_does_not_overshoot_while_members_start() -> None:
    p = pool(0, desired=3)
    members = [process(f"m{i}", phase="Forking") for i in range(3)]
    assert pool_decide(observe(p, *members)).create == ()


def test_scaling_down_deletes_free_members_never_bound_ones() -> None:
    p = pool(0, desired=1)
    bound = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x"}, created=900)
    d = pool_decide(observe(p, bound, process("b", created=500), process("c", created=100)))
    assert [x.name for x in d.delete] == ["b", "c"]


def test_a_deleting_pool_deletes_its_members_and_keeps_its_finalizer_until_they_are_gone() -> None:
    d = pool_decide(observe(pool(deleting=True), process("a"), process("b", deleting=True)))
    assert [x.name for x in d.delete] == ["a"]
    assert not d.remove_finalizer
    done = pool_decide(observe(pool(deleting=True)))
    assert done.remove_finalizer
    assert done.delete == ()
    assert done.create == ()


def test_keep_returns_a_member_to_free_with_a_guarded_patch() -> None:
    m = process(
        "a",
        ephemeral=True,
        annotations={ann.ALLOCATION: "x", ann.REQUESTOR: "pools/x", ann.RETURN_TRIGGER: "true"},
        rv="42",
    )
    d = pool_decide(observe(pool(1, return_policy="Keep"), m))
    (patch,) = d.patch
    assert patch.resource_version == "42"
    assert patch.patch["metadata"]["resourceVersion"] == "42"
    assert patch.patch["spec"] == {"lifetime": {"permanent": {}, "ephemeral": None}}
    assert patch.patch["metadata"]["annotations"] == dict.fromkeys(
        (ann.REQUESTOR, ann.REQUESTOR_KIND, ann.ALLOCATION, ann.RETURN_TRIGGER)
    )
    assert d.create == ()


def test_replace_sends_sigterm_through_the_signal_annotation() -> None:
    m = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    d = pool_decide(observe(pool(0, desired=1, return_policy="Replace"), m))
    (patch,) = d.patch
    assert patch.patch == {"metadata": {"annotations": {ann.SIGNAL: "SIGTERM"}}}
    assert len(d.create) == 1


def test_reset_runs_a_job_then_frees_the_member() -> None:
    m = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    p = pool(1, return_policy="Reset")
    started = pool_decide(observe(p, m))
    (job,) = started.apply
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == reset_job_name("a", "x")
    assert started.patch == ()
    done = pool_decide(observe(p, m, reset_jobs={reset_job_name("a", "x"): True}))
    assert [x.reason for x in done.patch] == ["ReturnReset"]
    assert done.apply == ()


def test_an_unchanged_status_is_not_written_again() -> None:
    p = pool(1)
    m = process("a")
    first = pool_decide(observe(p, m))
    assert first.status is not None
    again = pool_decide(observe(pool(1, status=first.status["status"]), m))
    assert again.status is None


def test_an_invalid_template_creates_nothing_and_says_why() -> None:
    bad = {
        "aplicacao": {"chartRef": "c", "version": "1"},
        "exports": [{"name": "e", "source": {}, "channel": {}, "when": "OnAttested"}],
    }
    try:
        p = pool(2, template=bad)
    except (msgspec.ValidationError, ValueError):
        pytest.skip("the model rejects this template at decode")
    d = pool_decide(observe(p))
    if d.create:
        pytest.skip("template is valid for the model")
    assert d.status is not None
    assert "invalid template" in d.status["status"]["message"]
