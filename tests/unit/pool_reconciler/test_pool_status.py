"""pool_reconciler.pool_status: the pool phase table and the ``/status`` a pass writes (only when it
changes). CORRECTED rows differ from the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

import msgspec
import pytest

from pool_reconciler.pool_status import ledger, pool_conditions, pool_phase, pool_status_patch
from shared.domain import annotations as ann
from shared.domain.api.pool import EphemeralPool, MemberState, PoolPhase
from tests.unit.pool_reconciler.builders import NOW, A, F, R, S, ago, observe_pool, pool, process

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
