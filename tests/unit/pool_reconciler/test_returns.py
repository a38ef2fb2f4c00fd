"""pool_reconciler.returns: the return plan, each policy's writes for one returned member, the reset Job,
and counting a return once from what the API server returned."""

from __future__ import annotations

from typing import Any

import pytest

from pool_reconciler.decision import MemberPatch, MemberWrite
from pool_reconciler.patches import annotate
from pool_reconciler.returns import (
    DEFAULT_RESET_IMAGE,
    ReturnMark,
    SeenReturns,
    keep_patch,
    plan_return,
    reset_job,
    reset_job_name,
    return_mark,
    return_member,
)
from shared.domain import annotations as ann
from shared.domain.api.pool import ReturnPolicy
from shared.kube.meta import ObjectMeta
from tests.unit.pool_reconciler.builders import observe_pool, pool, process

RESET_IMAGE = "ghcr.io/pleme-io/pool-reset:latest"
BOUND = {ann.ALLOCATION: "x", ann.REQUESTOR: "pools/x", ann.RETURN_TRIGGER: "true"}

# ── the plan ─────────────────────────────────────────────────────────────────

RETURN_ROWS = [
    ("Replace deletes and respawns", ReturnPolicy.REPLACE, None, "DeleteAndRespawn", None),
    ("Reset without an image uses the default image", ReturnPolicy.RESET, None, "ResetThenFree", RESET_IMAGE),
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


def test_the_default_reset_image_is_the_reference_image() -> None:
    assert DEFAULT_RESET_IMAGE == RESET_IMAGE




# ── one member's return, per policy ──────────────────────────────────────────


def test_keep_frees_the_member_with_one_guarded_patch() -> None:
    m = process("a", ephemeral=True, annotations=BOUND, rv="42")
    writes = return_member(observe_pool(pool(return_policy="Keep")), m)
    (patch,) = writes.patch
    assert (patch.name, patch.reason, patch.resource_version) == ("a", MemberWrite.RETURN_KEEP, "42")
    assert patch.patch.to_json() == {
        "metadata": {
            "annotations": dict.fromkeys((ann.ALLOCATION, ann.REQUESTOR, ann.REQUESTOR_KIND, ann.RETURN_TRIGGER)),
            "resourceVersion": "42",
        },
        "spec": {"lifetime": {"permanent": {}, "ephemeral": None}},
    }
    assert [(e.type.value, e.reason) for e in writes.events] == [("Normal", "MemberReturned")]
    assert (writes.delete, writes.apply) == ((), ())


def test_a_keep_patch_of_a_member_without_a_resource_version_is_unguarded() -> None:
    m = process("a", ephemeral=True, annotations=BOUND, rv="")
    patch = keep_patch(m, MemberWrite.RETURN_KEEP)
    assert patch.resource_version is None
    assert "resourceVersion" not in patch.patch.to_json()["metadata"]


REPLACE_ROWS: list[tuple[str, str, dict[str, str], Any, tuple[str, ...]]] = [
    ("an Attested member gets SIGTERM", "Attested", {}, {"metadata": {"annotations": {ann.SIGNAL: "SIGTERM"}}}, ()),
    ("a member with a signal pending gets nothing more", "Attested", {ann.SIGNAL: "SIGTERM"}, None, ()),
    ("a Releasing member is already on its way", "Releasing", {}, None, ()),
    ("an Exiting member is already on its way", "Exiting", {}, None, ()),
    ("a Failed member is deleted", "Failed", {}, None, ("a",)),
    ("a Zombie member is deleted", "Zombie", {}, None, ("a",)),
    ("a Reaped member is deleted", "Reaped", {}, None, ("a",)),
]


@pytest.mark.parametrize(("phase", "extra", "patch", "deleted"), [r[1:] for r in REPLACE_ROWS],
                         ids=[r[0] for r in REPLACE_ROWS])
def test_replace_sends_sigterm_once_and_deletes_when_done(
    phase: str, extra: dict[str, str], patch: Any, deleted: tuple[str, ...]
) -> None:
    m = process("a", phase, ephemeral=True, annotations={**BOUND, **extra})
    writes = return_member(observe_pool(pool(return_policy="Replace")), m)
    assert [p.patch.to_json() for p in writes.patch] == ([patch] if patch else [])
    assert all(p.reason is MemberWrite.RETURN_REPLACE for p in writes.patch)
    assert tuple(d.name for d in writes.delete) == deleted
    assert all(d.reason == "ReturnReplace" for d in writes.delete)


def test_reset_starts_a_job_waits_for_it_and_frees_the_member_once_it_succeeded() -> None:
    m = process("a", ephemeral=True, annotations=BOUND)
    p = pool(return_policy="Reset")
    job = reset_job_name("a", "x")
    started = return_member(observe_pool(p, m), m)
    assert [j.metadata.name for j in started.apply] == [job]
    assert [e.reason for e in started.events] == ["ResetStarted"]
    assert started.patch == ()
    running = return_member(observe_pool(p, m, reset_jobs={job: None}), m)
    assert (running.patch, running.apply, running.delete, running.events) == ((), (), (), ())
    done = return_member(observe_pool(p, m, reset_jobs={job: True}), m)
    assert [x.reason for x in done.patch] == [MemberWrite.RETURN_RESET]
    assert done.apply == ()


def test_a_failed_reset_replaces_the_member() -> None:
    m = process("a", ephemeral=True, annotations=BOUND)
    obs = observe_pool(pool(return_policy="Reset"), m, reset_jobs={reset_job_name("a", "x"): False})
    writes = return_member(obs, m)
    assert [(e.type.value, e.reason) for e in writes.events] == [("Warning", "ResetFailed"),
                                                                  ("Normal", "MemberReplacing")]
    assert [p.reason for p in writes.patch] == [MemberWrite.RETURN_REPLACE]


def test_the_reset_job_manifest() -> None:
    m = process("a", ephemeral=True, annotations=BOUND)
    job = reset_job(pool(), m, "img:1")
    assert job.to_json() == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": reset_job_name("a", "x"),
            "namespace": "pools",
            "annotations": {ann.ALLOCATION: "x", ann.POOL: "test-pool", ann.PROCESS: "a"},
            "ownerReferences": [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "name": "a",
                                 "uid": "uid-a", "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "template": {"spec": {
                "containers": [{"name": "reset", "image": "img:1", "env": [
                    {"name": "POOL", "value": "test-pool"}, {"name": "MEMBER", "value": "a"},
                    {"name": "NAMESPACE", "value": "pools"}, {"name": "ALLOCATION", "value": "x"}]}],
                "restartPolicy": "Never",
            }},
            "backoffLimit": 2,
            "ttlSecondsAfterFinished": 3600,
        },
    }


def test_a_reset_job_is_named_by_member_and_allocation() -> None:
    # SHA-256("a/x") and SHA-256("a/y"), first 16 hex digits
    assert reset_job_name("a", "x") == "reset-1653a06856ec14bc"
    assert reset_job_name("a", "y") == "reset-cd06f2411168826a"


# ── counting a return once ───────────────────────────────────────────────────

SIGTERM = MemberPatch("m-0", annotate({ann.SIGNAL: "SIGTERM"}), MemberWrite.RETURN_REPLACE)
KEEP = MemberPatch("m-0", annotate({ann.RETURN_TRIGGER: None}), MemberWrite.RETURN_KEEP)


def stored(uid: str, rv: str) -> ObjectMeta:
    return ObjectMeta(name="m-0", uid=uid, resource_version=rv)


MARK_ROWS = [
    ("a Replace is marked by the member's uid, whatever its version", SIGTERM, stored("u1", "9"),
     ReturnMark(("replaced", "u1"), "")),
    ("a Keep is marked by the member's stored version", KEEP, stored("u1", "9"),
     ReturnMark(("ns", "m-0", "ReturnKeep"), "9")),
    ("a bind is not a return", MemberPatch("m-0", annotate({}), MemberWrite.BIND), stored("u1", "9"), None),
    ("a release stamp is not a return", MemberPatch("m-0", annotate({}), MemberWrite.RELEASE), stored("u1", "9"),
     None),
]


@pytest.mark.parametrize(("patch", "meta", "expected"), [r[1:] for r in MARK_ROWS], ids=[r[0] for r in MARK_ROWS])
def test_return_mark(patch: MemberPatch, meta: ObjectMeta, expected: ReturnMark | None) -> None:
    assert return_mark("ns", patch, meta) == expected


COUNT_ROWS = [
    ("a Replace SIGTERM re-sent after the signal was stripped is the same return (counted once)",
     SIGTERM, [stored("u1", "2"), stored("u1", "4")], [True, False]),
    ("a replaced member's successor (new uid) is a new return", SIGTERM, [stored("u1", "2"), stored("u2", "2")],
     [True, True]),
    ("a Keep patch repeated without any change stores nothing (not counted again)",
     KEEP, [stored("u1", "2"), stored("u1", "2")], [True, False]),
    ("a later Keep return of the same member moves its version on (counted again)",
     KEEP, [stored("u1", "2"), stored("u1", "2"), stored("u1", "7")], [True, False, True]),
]


@pytest.mark.parametrize(("patch", "answers", "counted"), [r[1:] for r in COUNT_ROWS], ids=[r[0] for r in COUNT_ROWS])
def test_a_return_is_counted_once(patch: MemberPatch, answers: list[ObjectMeta], counted: list[bool]) -> None:
    seen = SeenReturns()
    marks = [return_mark("ns", patch, meta) for meta in answers]
    assert [seen.first_time(mark) for mark in marks if mark is not None] == counted


def test_seen_returns_forget_the_least_recent_beyond_their_capacity() -> None:
    seen = SeenReturns(capacity=2)
    a, b, c = (ReturnMark((k,), "1") for k in "abc")
    assert [seen.first_time(m) for m in (a, b, a, c)] == [True, True, False, True]
    assert seen.first_time(b)  # b was the least recently seen: forgotten when c came
    assert not seen.first_time(c)
