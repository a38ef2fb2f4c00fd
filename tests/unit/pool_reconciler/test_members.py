"""pool_reconciler.members: membership, the member state of a Process, the member Process a slot gets.
Rows marked CORRECTED differ from the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

import msgspec
import pytest

from pool_reconciler.members import (
    belongs_to_pool,
    entered_state_at,
    free_slots,
    member_process,
    member_state,
    pool_members,
)
from shared.domain import annotations as ann
from shared.domain.api.pool import MemberState
from shared.domain.api.process import Process
from tests.unit.pool_reconciler.builders import NOW, A, F, R, S, X, ago, pool, process

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


# ── the member Process ───────────────────────────────────────────────────────


def test_the_member_process_matches_the_worked_example() -> None:
    template = {
        "aplicacao": {"chartRef": "oci://example/chart", "version": "0.5.5", "profile": "all-in-one"},
        "ttl": "2h",
        "teardown": "OnAttested",
        "postconditions": [{"kind": "HelmReleaseReleased", "params": {"name": "r", "namespace": "n"}}],
    }
    p = pool(name="attest-pool", template=template)
    p = msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, namespace="ephemeral-pools"))
    doc = member_process(p, 0).to_json()
    assert (doc["apiVersion"], doc["kind"]) == ("tatara.pleme.io/v1alpha1", "Process")
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



def test_the_members_of_a_pool_are_its_annotated_processes_by_name() -> None:
    found = pool_members(pool(), [process("b"), process("x", pool="other"), process("a")])
    assert [m.metadata.name for m in found] == ["a", "b"]


def test_a_member_entered_its_state_at_its_phase_since_else_its_creation() -> None:
    assert entered_state_at(process(), NOW) == ago(60)
    assert entered_state_at(process(phase=None, created=900), NOW) == ago(900)


def test_free_slots_skip_the_names_current_members_hold() -> None:
    # slot names of the pool uid (docs/wire-format.md#test-vectors)
    assert free_slots(pool(name="attest-pool"), {"attest-pool-7737df3b", "attest-pool-558f400a"}, 2) == [
        (1, "attest-pool-0200ebd9"),
        (3, "attest-pool-061e5e0e"),
    ]
