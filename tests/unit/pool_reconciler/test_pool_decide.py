"""pool_reconciler.pool_decide: one pool pass, and each of its steps. CORRECTED tests differ from the
reference on purpose (docs/divergences.md)."""

from __future__ import annotations

import pytest

from pool_reconciler.decision import MemberDelete, MemberWrite
from pool_reconciler.pool_decide import (
    Sizing,
    desired_count_step,
    drain,
    ledger_state,
    legacy_step,
    pool_decide,
    return_members,
    size_pool,
    sizing_events,
    snapshot,
    spawn_members,
    stall_events,
)
from pool_reconciler.returns import reset_job_name
from shared.domain import annotations as ann
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import MemberState
from shared.domain.api.process import Process
from shared.kube.events import Event
from tests.unit.pool_reconciler.builders import ago, observe_pool, pool, process

# slot names of the builders' pool uid (docs/wire-format.md#test-vectors)
SLOT_0, SLOT_1, SLOT_2 = "test-pool-7737df3b", "test-pool-0200ebd9", "test-pool-558f400a"
BOUND = {ann.ALLOCATION: "x", ann.REQUESTOR: "pools/x"}


# ── the pass ─────────────────────────────────────────────────────────────────


def test_a_new_pool_gets_its_members_on_distinct_slots() -> None:
    d = pool_decide(observe_pool(pool(3, finalizer=False)))
    assert [(c.slot, c.name) for c in d.create] == [(0, SLOT_0), (1, SLOT_1), (2, SLOT_2)]
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Initializing"
    assert not d.released
    assert d.requeue_after == 30.0


def test_creates_skip_slots_held_by_current_members() -> None:
    d = pool_decide(observe_pool(pool(2), process(SLOT_0, phase="Attested")))
    assert [(c.slot, c.name) for c in d.create] == [(1, SLOT_1)]


def test_CORRECTED_desired_mode_does_not_overshoot_while_members_start() -> None:
    p = pool(0, desired=3)
    members = [process(f"m{i}", phase="Forking") for i in range(3)]
    assert pool_decide(observe_pool(p, *members)).create == ()


def test_scaling_down_deletes_free_members_never_bound_ones() -> None:
    p = pool(0, desired=1)
    bound = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x"}, created=900)
    d = pool_decide(observe_pool(p, bound, process("b", created=500), process("c", created=100)))
    assert [x.name for x in d.delete] == ["b", "c"]


def test_a_deleting_pool_deletes_its_members_and_is_released_once_they_are_gone() -> None:
    d = pool_decide(observe_pool(pool(deleting=True), process("a"), process("b", deleting=True)))
    assert [x.name for x in d.delete] == ["a"]
    assert not d.released
    done = pool_decide(observe_pool(pool(deleting=True)))
    assert done.released
    assert done.delete == ()
    assert done.create == ()


def test_keep_returns_a_member_to_free_with_a_guarded_patch() -> None:
    m = process("a", ephemeral=True, annotations={**BOUND, ann.RETURN_TRIGGER: "true"}, rv="42")
    d = pool_decide(observe_pool(pool(1, return_policy="Keep"), m))
    (patch,) = d.patch
    wire = patch.patch.to_json()
    assert patch.resource_version == "42"
    assert wire["metadata"]["resourceVersion"] == "42"
    assert wire["spec"] == {"lifetime": {"permanent": {}, "ephemeral": None}}
    assert wire["metadata"]["annotations"] == dict.fromkeys(
        (ann.REQUESTOR, ann.REQUESTOR_KIND, ann.ALLOCATION, ann.RETURN_TRIGGER)
    )
    assert d.create == ()


def test_replace_sends_sigterm_through_the_signal_annotation() -> None:
    m = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    d = pool_decide(observe_pool(pool(0, desired=1, return_policy="Replace"), m))
    (patch,) = d.patch
    assert patch.patch.to_json() == {"metadata": {"annotations": {ann.SIGNAL: "SIGTERM"}}}
    assert len(d.create) == 1


def test_reset_runs_a_job_then_frees_the_member() -> None:
    m = process("a", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    p = pool(1, return_policy="Reset")
    started = pool_decide(observe_pool(p, m))
    (job,) = started.apply
    assert job.to_json()["kind"] == "Job"
    assert job.metadata.name == reset_job_name("a", "x")
    assert started.patch == ()
    done = pool_decide(observe_pool(p, m, reset_jobs={reset_job_name("a", "x"): True}))
    assert [x.reason for x in done.patch] == [MemberWrite.RETURN_RESET]
    assert done.apply == ()


def test_an_unchanged_status_is_not_written_again() -> None:
    p = pool(1)
    m = process("a")
    first = pool_decide(observe_pool(p, m))
    assert first.status is not None
    again = pool_decide(observe_pool(pool(1, status=first.status.to_json()), m))
    assert again.status is None


def test_an_invalid_template_creates_nothing_and_says_why() -> None:
    bad = {
        "aplicacao": {"chartRef": "c", "version": "1"},
        "exports": [{"name": "e", "source": {}, "channel": {}, "when": "OnAttested"}],
    }
    d = pool_decide(observe_pool(pool(2, template=bad)))
    assert d.create == ()
    assert d.status is not None
    message = d.status.to_json()["message"]
    assert message.startswith("invalid template: spec.lifetime.ephemeral.exports[0].source: ")
    assert [(e.type.value, e.reason, e.message) for e in d.events] == [("Warning", "InvalidTemplate", message)]


def test_a_member_that_sizing_deletes_gets_no_return_patch_in_the_same_pass() -> None:
    failed = process("a", "Failed", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    d = pool_decide(observe_pool(pool(1, return_policy="Keep"), failed))
    assert d.delete == (MemberDelete("a", "Replace", "7"),)
    assert d.patch == ()  # the Keep patch of a member about to be deleted is dropped


def test_a_member_both_returned_and_replaced_is_deleted_once() -> None:
    failed = process("a", "Failed", ephemeral=True, annotations={ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"})
    d = pool_decide(observe_pool(pool(1, return_policy="Replace"), failed))
    assert d.delete == (MemberDelete("a", "Replace", "7"),)


# ── the steps ────────────────────────────────────────────────────────────────


def test_drain_skips_members_already_being_deleted_and_says_how_many_it_deletes() -> None:
    members = [process("a"), process("b", deleting=True)]
    d = drain(observe_pool(pool(deleting=True), *members), members, [MemberState.FREE, MemberState.RETURNING])
    assert d.delete == (MemberDelete("a", "Drain"),)
    assert d.events == (Event.normal("Draining", "deleting 1 member(s)"),)
    assert d.status is not None
    assert d.status.to_json()["phase"] == "Draining"
    assert (d.released, d.requeue_after) == (False, 30.0)


def test_return_members_acts_only_on_returned_members_not_being_deleted() -> None:
    returned = {ann.ALLOCATION: "x", ann.RETURN_TRIGGER: "true"}
    members = [process("a", annotations=returned), process("b", annotations=returned, deleting=True), process("c")]
    writes = return_members(observe_pool(pool(return_policy="Keep"), *members), members)
    assert [p.name for p in writes.patch] == ["a"]


SNAPSHOT_ROWS = [
    ("a free member is neither bound nor leaving", process("a"), "Keep", (ProcessPhase.ATTESTED, False, False)),
    ("an ephemeral member is bound", process("a", ephemeral=True), "Keep", (ProcessPhase.ATTESTED, True, False)),
    ("a member with an allocation annotation is bound", process("a", annotations={ann.ALLOCATION: "x"}), "Keep",
     (ProcessPhase.ATTESTED, True, False)),
    ("a deleting member is leaving", process("a", deleting=True), "Keep", (ProcessPhase.ATTESTED, False, True)),
    ("a member returned under Replace is leaving", process("a", annotations={ann.RETURN_TRIGGER: "true"}), "Replace",
     (ProcessPhase.ATTESTED, False, True)),
    ("a member returned under Keep stays", process("a", annotations={ann.RETURN_TRIGGER: "true"}), "Keep",
     (ProcessPhase.ATTESTED, False, False)),
    ("a member without status is Pending", process("a", phase=None), "Keep", (ProcessPhase.PENDING, False, False)),
]


@pytest.mark.parametrize(("m", "policy", "expected"), [r[1:] for r in SNAPSHOT_ROWS], ids=[r[0] for r in SNAPSHOT_ROWS])
def test_snapshot(m: Process, policy: str, expected: tuple[ProcessPhase, bool, bool]) -> None:
    s = snapshot(observe_pool(pool(return_policy=policy)), m)
    assert (s.phase, s.bound, s.leaving) == expected
    assert s.created_at == ago(600)


def test_desired_count_step_turns_actions_into_a_count_deletes_and_a_pause() -> None:
    p = pool(0, desired=2)
    members = [process("a", "Failed"), process("b")]
    assert desired_count_step(observe_pool(p), members) == Sizing(
        spawn=1, delete=(MemberDelete("a", "ReplaceFailed", "7"),))
    too_many = [process("a", created=900), process("b", created=500), process("c", created=100)]
    assert desired_count_step(observe_pool(p), too_many) == Sizing(delete=(MemberDelete("a", "ScaleDown", "7"),))
    paused = desired_count_step(observe_pool(pool(0, desired=2, policy="PausePool")), members)
    assert paused == Sizing(pause="1 member(s) reached Failed/Zombie/Reaped; policy=PausePool")


def test_size_pool_takes_desired_count_sizing_when_desired_is_set() -> None:
    members = [process("a"), process("b")]
    states = [MemberState.FREE, MemberState.FREE]
    assert size_pool(observe_pool(pool(1, desired=3)), members, states) == Sizing(spawn=1)
    assert size_pool(observe_pool(pool(1)), members, states) == Sizing(delete=(MemberDelete("a", "ScaleDown", "7"),))


LEDGER_STATE_ROWS = [
    ("a member returned under Keep counts as Spawning", "Keep", {ann.RETURN_TRIGGER: "true"}, False,
     MemberState.SPAWNING),
    ("a member returned under Reset counts as Spawning", "Reset", {ann.RETURN_TRIGGER: "true"}, False,
     MemberState.SPAWNING),
    ("a member returned under Replace stays Returning", "Replace", {ann.RETURN_TRIGGER: "true"}, False,
     MemberState.RETURNING),
    ("a deleting returned member stays Returning", "Keep", {ann.RETURN_TRIGGER: "true"}, True, MemberState.RETURNING),
]


@pytest.mark.parametrize(("policy", "annotations", "deleting", "expected"), [r[1:] for r in LEDGER_STATE_ROWS],
                         ids=[r[0] for r in LEDGER_STATE_ROWS])
def test_ledger_state(policy: str, annotations: dict[str, str], deleting: bool, expected: MemberState) -> None:
    m = process("a", annotations=annotations, deleting=deleting)
    assert ledger_state(observe_pool(pool(return_policy=policy)), m, MemberState.RETURNING) is expected


def test_legacy_step_replaces_only_members_not_already_being_deleted() -> None:
    members = [process("a", "Failed"), process("b", "Failed", deleting=True), process("c")]
    states = [MemberState.FAILED, MemberState.FAILED, MemberState.FREE]
    assert legacy_step(observe_pool(pool(1), *members), members, states) == Sizing(
        delete=(MemberDelete("a", "Replace", "7"),))


def test_legacy_step_reaps_the_first_free_members_by_name() -> None:
    members = [process("a"), process("b"), process("c")]
    states = [MemberState.FREE] * 3
    assert legacy_step(observe_pool(pool(1), *members), members, states) == Sizing(
        delete=(MemberDelete("a", "ScaleDown", "7"), MemberDelete("b", "ScaleDown", "7")))


def test_legacy_step_counts_a_member_returning_to_free_as_supply() -> None:
    m = process("a", annotations={ann.RETURN_TRIGGER: "true"})
    assert legacy_step(observe_pool(pool(1, return_policy="Keep"), m), [m], [MemberState.RETURNING]) == Sizing()
    assert legacy_step(observe_pool(pool(1, return_policy="Replace"), m), [m], [MemberState.RETURNING]) == Sizing(
        spawn=1)


def test_sizing_events() -> None:
    assert sizing_events(Sizing(spawn=2)) == ()
    sizing = Sizing(pause="why", delete=(MemberDelete("a", "ScaleDown"), MemberDelete("b", "Replace")))
    assert sizing_events(sizing) == (Event.warning("Paused", "why"), Event.normal("MembersDeleted", "deleting a, b"))


def test_spawn_members() -> None:
    assert spawn_members(pool(), [], 0).create == ()
    spawned = spawn_members(pool(), [process(SLOT_1)], 2)
    assert [(c.slot, c.name) for c in spawned.create] == [(0, SLOT_0), (2, SLOT_2)]
    assert spawned.events == (Event.normal("MembersCreated", "creating 2 member(s)"),)
    assert spawned.message is None
    assert spawned.create[0].process.metadata.annotations == {ann.POOL: "test-pool", ann.POOL_SLOT: "0"}


# ── a pool at its cap (issue 13) ─────────────────────────────────────────────


def _settle(p_desired: int, p_max: int, allocations: int, passes: int = 8) -> tuple[int, int, int]:
    """Drive legacy passes by hand: each create becomes an Attested Free member before the next pass,
    and each Free member is then claimed by the next waiting allocation (after the pass, as a claim races
    a pass). Returns (most members ever present, members deleted, allocations bound)."""
    members: dict[str, Process] = {}
    waiting, most, deleted = allocations, 0, 0
    p = pool(p_desired, max_size=p_max)
    for _ in range(passes):
        d = pool_decide(observe_pool(p, *sorted(members.values(), key=lambda m: m.metadata.name or "")))
        for c in d.create:
            members[c.name] = process(c.name)
        for gone in d.delete:
            deleted += 1
            members.pop(gone.name, None)
        most = max(most, len(members))
        for name in sorted(members):
            m = members[name]
            if waiting and not m.spec.lifetime.is_ephemeral:
                members[name] = process(name, ephemeral=True, annotations={ann.ALLOCATION: f"a{waiting}"})
                waiting -= 1
    return most, deleted, allocations - waiting


@pytest.mark.parametrize(
    ("desired_size", "max_size", "allocations", "bound"),
    [(3, 3, 3, 3), (1, 2, 3, 2), (10, 10, 30, 10)],
    ids=["3/3 with 3 allocations", "1/2 with 3 allocations", "10/10 with 30 allocations"],
)
def test_CORRECTED_a_pool_at_its_cap_never_creates_then_deletes(
    desired_size: int, max_size: int, allocations: int, bound: int
) -> None:
    most, deleted, got = _settle(desired_size, max_size, allocations)
    assert (most, deleted, got) == (max_size, 0, bound)


def test_a_member_claimed_but_still_free_in_the_cache_is_never_reaped() -> None:
    claimed = process("a", annotations={ann.ALLOCATION: "x"})
    members = [claimed, process("b"), process("c")]
    d = pool_decide(observe_pool(pool(1), *members))
    assert [x.name for x in d.delete] == ["b"]


def test_sizing_deletes_are_guarded_by_the_observed_resource_version() -> None:
    members = [process("a", rv="11"), process("b", rv="12")]
    d = pool_decide(observe_pool(pool(1), *members))
    assert d.delete == (MemberDelete("a", "ScaleDown", resource_version="11"),)


# ── creates in bounded batches (issue 13) ────────────────────────────────────


@pytest.mark.parametrize("sized", [{"desired_size": 1000}, {"desired_size": 0, "desired": 1000}],
                         ids=["legacy", "desired-count"])
def test_a_huge_pool_creates_one_batch_per_pass_writes_its_status_and_comes_back_soon(sized: dict[str, int]) -> None:
    d = pool_decide(observe_pool(pool(**sized)))
    assert len(d.create) == 16
    assert [c.slot for c in d.create] == list(range(16))
    assert d.events[0] == Event.normal("MembersCreated", "creating 16 member(s)")
    assert d.status is not None
    assert d.requeue_after == 0.1


def test_the_last_batch_waits_for_the_heartbeat() -> None:
    members = [process(f"m{i:02}") for i in range(10)]
    d = pool_decide(observe_pool(pool(12), *members))
    assert len(d.create) == 2
    assert d.requeue_after == 30.0


def test_a_huge_pool_deleted_between_batches_creates_nothing_more() -> None:
    members = [process(f"m{i:02}", phase=None) for i in range(16)]
    d = pool_decide(observe_pool(pool(1000, deleting=True), *members))
    assert d.create == ()
    assert len(d.delete) == 16


def test_CORRECTED_a_pool_of_desired_size_zero_is_ready() -> None:
    d = pool_decide(observe_pool(pool(0)))
    assert d.create == ()
    assert d.status is not None
    status = d.status.to_json()
    assert status["phase"] == "Steady"
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Ready", "True"), ("Reconciling", "False"), ("Stalled", "False")]


# ── a target maxSize keeps out of reach (issue 28) ───────────────────────────


def test_a_pool_at_its_cap_warns_once_when_the_stall_begins() -> None:
    members = [process("a", ephemeral=True, annotations=BOUND)]
    first = pool_decide(observe_pool(pool(1, max_size=1), *members))
    assert first.create == ()
    assert first.status is not None
    message = first.status.to_json()["message"]
    assert message.startswith("at maxSize 1: 1 active member(s), 1 allocated")
    assert [e for e in first.events if e.reason == "MaxSizeReached"] == [Event.warning("MaxSizeReached", message)]
    stored = pool(1, max_size=1, status=first.status.to_json())
    again = pool_decide(observe_pool(stored, *members))
    assert again.status is None  # nothing changed: no write
    assert [e for e in again.events if e.reason == "MaxSizeReached"] == []


def test_stall_events_say_nothing_for_other_stalls_or_none() -> None:
    bad = {"aplicacao": {"chartRef": "c", "version": "1"},
           "exports": [{"name": "e", "source": {}, "channel": {}, "when": "OnAttested"}]}
    invalid = pool_decide(observe_pool(pool(5, max_size=2, template=bad)))
    assert stall_events(observe_pool(pool()), None) == ()
    assert [e.reason for e in invalid.events] == ["InvalidTemplate"]
