"""pool_reconciler.pool_status: the pool phase table and the ``/status`` a pass writes (only when it
changes). CORRECTED rows differ from the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

import msgspec
import pytest

from pool_reconciler.pool_status import ledger, max_size_stall, pool_conditions, pool_phase, pool_status_patch
from shared.domain import annotations as ann
from shared.domain.api.pool import EphemeralPool, MemberState, PoolPhase
from tests.unit.pool_reconciler.builders import NOW, A, F, R, S, X, ago, observe_pool, pool, process

PHASE_ROWS = [
    ("a deleting pool is Draining", pool(deleting=True), [F], PoolPhase.DRAINING),
    ("a pool without members is Initializing", pool(), [], PoolPhase.INITIALIZING),
    ("CORRECTED a pool that asks for no member is Steady without one", pool(0), [], PoolPhase.STEADY),
    ("a pool with only minSize is Initializing without members", pool(0, min_size=1), [], PoolPhase.INITIALIZING),
    ("a desired-count pool is Initializing without members", pool(0, desired=2), [], PoolPhase.INITIALIZING),
    ("supply below minSize is Degraded", pool(1, min_size=3), [F, S], PoolPhase.DEGRADED),
    ("supply below desiredSize is ScalingUp", pool(3), [F, A], PoolPhase.SCALING_UP),
    ("supply above desiredSize is ScalingDown", pool(1), [F, F], PoolPhase.SCALING_DOWN),
    ("supply at desiredSize is Steady", pool(2), [F, S, A], PoolPhase.STEADY),
    ("CORRECTED: desired mode counts allocated members against desired", pool(0, desired=2), [F, A], PoolPhase.STEADY),
]


@pytest.mark.parametrize(("p", "states", "expected"), [r[1:] for r in PHASE_ROWS], ids=[r[0] for r in PHASE_ROWS])
def test_pool_phase_table(p: EphemeralPool, states: list[MemberState], expected: PoolPhase) -> None:
    assert pool_phase(p, states) is expected



def test_the_status_of_a_pass() -> None:
    a = process("a")
    b = process("b", ephemeral=True, annotations={ann.ALLOCATION: "x"})
    obs = observe_pool(pool(2), a, b)
    patch = pool_status_patch(obs, [a, b], [F, A], None)
    assert patch is not None
    assert patch.to_json() == {
        "phase": "ScalingUp",
        "readyCount": 1,
        "allocatedCount": 1,
        "spawningCount": 0,
        "returningCount": 0,
        "members": [
            {"processName": "a", "state": "Free", "enteredStateAt": "2025-06-01T11:59:00Z"},
            {"processName": "b", "state": "Allocated", "enteredStateAt": "2025-06-01T11:59:00Z",
             "allocationRef": {"name": "x", "namespace": "pools"}},
        ],
        "message": None,
        "conditions": [{"type": t, "status": v, "reason": "ScalingUp", "message": "pool is ScalingUp",
                        "lastTransitionTime": "2025-06-01T12:00:00Z"}
                       for t, v in (("Ready", "False"), ("Reconciling", "True"), ("Stalled", "False"))],
        "phaseSince": "2025-06-01T12:00:00Z",
    }


def test_an_unchanged_status_is_not_written_again() -> None:
    m = process("a")
    first = pool_status_patch(observe_pool(pool(1), m), [m], [F], None)
    assert first is not None
    stored = pool(1, status=first.to_json())
    assert pool_status_patch(observe_pool(stored, m), [m], [F], None) is None


def test_phase_since_and_the_condition_transition_stay_while_the_phase_does() -> None:
    m = process("a")
    stored = pool(1, status={"phase": "Steady", "phaseSince": ago(900).isoformat(), "message": "old",
                             "conditions": [{"type": "Ready", "status": "True", "reason": "Steady",
                                             "message": "pool is Steady", "lastTransitionTime": ago(800).isoformat()}]})
    patch = pool_status_patch(observe_pool(stored, m), [m], [F], None)
    assert patch is not None
    assert patch.to_json()["message"] is None  # cleared
    assert patch.to_json()["phaseSince"] == "2025-06-01T11:45:00Z"
    assert patch.to_json()["conditions"][0]["lastTransitionTime"] == "2025-06-01T11:46:40Z"
    moved = pool_status_patch(observe_pool(stored, m), [m, process("b")], [F, F], None)
    assert moved is not None
    assert moved.to_json()["phaseSince"] == "2025-06-01T12:00:00Z"
    assert moved.to_json()["conditions"][0]["lastTransitionTime"] == "2025-06-01T12:00:00Z"


def test_the_ready_condition_carries_the_status_message() -> None:
    cond = pool_conditions(observe_pool(pool()), PoolPhase.DEGRADED, "invalid template: x")[0]
    assert (cond.type_, cond.status, cond.reason, cond.message, cond.last_transition_time) == (
        "Ready", "False", "Degraded", "invalid template: x", NOW)


# kstatus: Ready → Current, Reconciling → InProgress, Stalled → Failed (docs/behaviour.md#pool-status)
@pytest.mark.parametrize(("phase", "message", "expected"), [
    (PoolPhase.STEADY, None, ("True", "False", "False")),
    (PoolPhase.STEADY, "2 member(s) reached Failed/Zombie/Reaped; policy=PausePool", ("True", "False", "False")),
    (PoolPhase.SCALING_UP, None, ("False", "True", "False")),
    (PoolPhase.INITIALIZING, None, ("False", "True", "False")),
    (PoolPhase.DRAINING, None, ("False", "True", "False")),
    (PoolPhase.DEGRADED, "invalid template: x", ("False", "False", "True")),
    (PoolPhase.SCALING_UP, "1 member(s) reached Failed/Zombie/Reaped; policy=PausePool", ("False", "False", "True")),
], ids=["steady-is-ready", "steady-with-a-pause-is-still-ready", "scaling-up-reconciles", "initializing-reconciles",
        "draining-reconciles", "an-invalid-template-stalls", "a-pause-below-target-stalls"])
def test_the_pool_conditions_follow_its_phase(phase: PoolPhase, message: str | None,
                                              expected: tuple[str, str, str]) -> None:
    conds = pool_conditions(observe_pool(pool()), phase, message)
    assert [c.type_ for c in conds] == ["Ready", "Reconciling", "Stalled"]
    assert tuple(c.status for c in conds) == expected


def test_the_pool_status_carries_its_generation() -> None:
    stored = pool(1)
    stored = msgspec.structs.replace(stored, metadata=msgspec.structs.replace(stored.metadata, generation=4))
    patch = pool_status_patch(observe_pool(stored), [], [], None)
    assert patch is not None
    wire = patch.to_json()
    assert wire["observedGeneration"] == 4
    assert [c["observedGeneration"] for c in wire["conditions"]] == [4, 4, 4]


def test_the_ledger_names_the_allocation_of_allocated_and_returning_members_only() -> None:
    held = {ann.ALLOCATION: "x"}
    members = [process("a", annotations=held), process("b", annotations=held), process("c", annotations=held)]
    rows = ledger(observe_pool(pool()), members, [F, A, R])
    assert [r.allocation_ref.name if r.allocation_ref else None for r in rows] == [None, "x", "x"]


# ── a target maxSize keeps out of reach (issue 28) ───────────────────────────
# The legacy sizing rules (docs/behaviour.md#legacy-sizing) create at most maxSize − active members, so once
# the active members (all but Failed) fill maxSize and the phase is below target, nothing the reconciler does
# reaches the target; minSize or desiredSize above maxSize never can. A Returning member is Free again or
# replaced soon, so the pool is still moving then.

ABOVE = "above maxSize 2: the pool never holds more than 2 member(s)"
STALL_ROWS = [
    ("issue 28: minSize 4, desiredSize 5, maxSize 2 never fits", pool(5, min_size=4, max_size=2), [F, F],
     "minSize 4 and desiredSize 5 " + ABOVE),
    ("desiredSize above maxSize stalls before any member exists", pool(5, max_size=2), [], "desiredSize 5 " + ABOVE),
    ("minSize above maxSize alone", pool(1, min_size=3, max_size=2), [F], "minSize 3 " + ABOVE),
    ("every member allocated at the cap", pool(3, max_size=3), [A, A, A],
     "at maxSize 3: 3 active member(s), 3 allocated and 0 free or starting, short of desiredSize 3; "
     "raise maxSize or release an allocation"),
    ("allocations beyond the cap, one member still starting", pool(2, max_size=2), [A, S],
     "at maxSize 2: 2 active member(s), 1 allocated and 1 free or starting, short of desiredSize 2; "
     "raise maxSize or release an allocation"),
    ("minSize is named when it is set", pool(2, min_size=2, max_size=2), [A, A],
     "at maxSize 2: 2 active member(s), 2 allocated and 0 free or starting, short of desiredSize 2, minSize 2; "
     "raise maxSize or release an allocation"),
    ("a Returning member is still on its way back", pool(2, max_size=2), [A, R], None),
    ("room left under the cap: sizing creates", pool(3, max_size=3), [A, A], None),
    ("a Failed member is not active: it is replaced", pool(2, max_size=2), [A, X], None),
    ("at the cap and at the target is Steady", pool(1, max_size=2), [A, F], None),
    ("maxSize 0 means no cap", pool(5), [A, A, A], None),
    ("desiredSize equal to maxSize is reachable", pool(2, max_size=2), [], None),
    ("desired-count pools ignore maxSize", pool(0, desired=5, max_size=2), [F, F], None),
    ("a deleting pool is Draining, never stalled", pool(5, max_size=2, deleting=True), [F], None),
]


@pytest.mark.parametrize(("p", "states", "expected"), [r[1:] for r in STALL_ROWS], ids=[r[0] for r in STALL_ROWS])
def test_max_size_stall_table(p: EphemeralPool, states: list[MemberState], expected: str | None) -> None:
    assert max_size_stall(p, states) == expected


def test_a_pool_held_below_target_by_max_size_is_stalled_not_reconciling() -> None:
    members = [process("a", ephemeral=True, annotations={ann.ALLOCATION: "x"}),
               process("b", ephemeral=True, annotations={ann.ALLOCATION: "y"})]
    patch = pool_status_patch(observe_pool(pool(1, max_size=2), *members), members, [A, A], None)
    assert patch is not None
    wire = patch.to_json()
    assert wire["phase"] == "ScalingUp"
    assert wire["message"] == ("at maxSize 2: 2 active member(s), 2 allocated and 0 free or starting, short of "
                               "desiredSize 1; raise maxSize or release an allocation")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in wire["conditions"]] == [
        (t, v, "MaxSizeReached", wire["message"])
        for t, v in (("Ready", "False"), ("Reconciling", "False"), ("Stalled", "True"))]


def test_a_pause_or_template_message_wins_over_the_cap() -> None:
    patch = pool_status_patch(observe_pool(pool(5, max_size=2)), [], [], "invalid template: x")
    assert patch is not None
    wire = patch.to_json()
    assert wire["message"] == "invalid template: x"
    assert {c["reason"] for c in wire["conditions"]} == {"Initializing"}
