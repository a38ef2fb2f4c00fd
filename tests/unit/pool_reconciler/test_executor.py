"""pool_reconciler.executor: the one write order, a lost guarded write, and a member return counted once
however often a lagging pass repeats its patch."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.decision import (
    AllocationDecision,
    MemberCreate,
    MemberDelete,
    MemberPatch,
    MemberWrite,
    PoolDecision,
)
from pool_reconciler.executor import RETRY_AFTER_CONFLICT, Executor
from pool_reconciler.members import member_process
from pool_reconciler.metrics import PoolMetrics
from pool_reconciler.patches import AllocationStatusPatch, PoolStatusPatch, annotate
from pool_reconciler.returns import keep_patch, reset_job
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationPhase
from shared.domain.api.pool import PoolPhase
from shared.domain.resources import PROCESSES
from shared.kube.errors import Conflict, Forbidden, Invalid, ServerError
from shared.kube.events import Event, EventRecorder
from tests.unit.pool_reconciler.builders import NOW, alloc, pool, process
from tests.unit.pool_reconciler.fake_client import FakeClient

pytestmark = pytest.mark.anyio


def executor(client: Any) -> tuple[Executor, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry, list, list, list)
    return Executor(client, EventRecorder(client, "test", "test"), metrics), registry


def conflict() -> Conflict:
    return Conflict(409, "Conflict", "the object has been modified")


async def test_a_pool_decision_is_written_in_the_documented_order() -> None:
    p, m = pool(), process("a", annotations={ann.RETURN_TRIGGER: "true"})
    client = FakeClient(stored=(p, m, process("b")))
    run, _ = executor(client)
    decision = PoolDecision(
        create=(MemberCreate(0, member_process(p, 0)),),
        patch=(keep_patch(m, MemberWrite.RETURN_KEEP),),
        delete=(MemberDelete("b", "ScaleDown"),),
        apply=(reset_job(p, m, "img"),),
        status=PoolStatusPatch(phase=PoolPhase.STEADY),
        events=(Event.normal("MembersCreated", "creating 1 member(s)"),),
        requeue_after=30.0,
    )
    result = await run.execute_pool(p, decision)
    assert [verb for verb, _ in client.writes] == ["create", "merge_patch", "delete", "apply", "merge_patch", "create"]
    assert client.writes[4] == ("merge_patch", "ephemeralpools/test-pool/status")
    assert client.calls[-1].path.startswith("events/test-pool.")
    assert client.calls[0].body == member_process(p, 0).to_json()
    assert result.requeue_after == 30.0


async def test_a_lost_guarded_member_patch_still_writes_the_rest_and_comes_back_soon() -> None:
    client = FakeClient(fail={("merge_patch", "processes/a"): conflict()})
    run, registry = executor(client)
    m = process("a", annotations={ann.RETURN_TRIGGER: "true"})
    decision = PoolDecision(patch=(keep_patch(m, MemberWrite.RETURN_KEEP),), delete=(MemberDelete("b", "ScaleDown"),),
                            requeue_after=30.0)
    result = await run.execute_pool(pool(), decision)
    assert ("delete", "processes/b") in client.writes
    assert result.requeue_after == RETRY_AFTER_CONFLICT
    assert registry.get_sample_value("tatara_pool_releases_total", {"outcome": "keep"}) is None


@pytest.mark.parametrize("refusal", [
    Forbidden(403, "Forbidden", 'jobs.batch "r" is forbidden: User "system:serviceaccount:t:p" cannot patch'),
    Invalid(422, "Invalid", 'Job.batch "r" is invalid: spec.template.spec.containers[0].image: Required value'),
], ids=["RBAC", "validation"])
async def test_a_refused_reset_job_says_why_on_the_pool_and_the_pass_backs_off(refusal: Exception) -> None:
    p, m = pool(), process("a", annotations={ann.RETURN_TRIGGER: "true"})
    job = reset_job(p, m, "img")
    client = FakeClient(stored=(p, m), fail={("apply", f"jobs/{job.metadata.name}"): refusal})
    run, _ = executor(client)
    decision = PoolDecision(apply=(job,), status=PoolStatusPatch(phase=PoolPhase.STEADY))
    with pytest.raises(type(refusal)):
        await run.execute_pool(p, decision)
    (event,) = [c.body for c in client.calls if c.path.startswith("events/")]
    assert (event["type"], event["reason"]) == ("Warning", "ResetRefused")
    assert str(job.metadata.name) in event["message"]
    assert str(refusal) in event["message"]
    assert ("merge_patch", "ephemeralpools/test-pool/status") not in client.writes  # decided again after backoff


async def test_a_reset_job_that_fails_for_a_passing_reason_is_only_retried() -> None:
    p, m = pool(), process("a", annotations={ann.RETURN_TRIGGER: "true"})
    job = reset_job(p, m, "img")
    client = FakeClient(stored=(p, m), fail={("apply", f"jobs/{job.metadata.name}"): ServerError(
        503, "ServiceUnavailable", "the server is currently unable to handle the request")})
    run, _ = executor(client)
    with pytest.raises(ServerError):
        await run.execute_pool(p, PoolDecision(apply=(job,)))
    assert not [c for c in client.calls if c.path.startswith("events/")]


def _bind() -> AllocationDecision:
    claim = MemberPatch("m1", annotate({ann.ALLOCATION: "alloc-1"}, resource_version="5"), MemberWrite.BIND)
    return AllocationDecision("Bind", claim=claim, status=AllocationStatusPatch(phase=AllocationPhase.BOUND),
                              events=(Event.normal("Bound", "bound"),), requeue_after=30.0)


async def test_a_won_claim_is_followed_by_the_status_and_counted() -> None:
    client = FakeClient(stored=(process("m1", rv="5"), alloc(rv="9")))
    run, registry = executor(client)
    result = await run.execute_allocation(alloc(created=2), _bind(), NOW, resource_version="9")
    assert client.writes[:2] == [("merge_patch", "processes/m1"),
                                 ("merge_patch", "ephemeralallocations/alloc-1/status")]
    assert client.calls[0].body["metadata"]["resourceVersion"] == "5"
    assert client.calls[1].body["metadata"] == {"resourceVersion": "9"}
    assert result.requeue_after == 30.0
    assert registry.get_sample_value("tatara_pool_binds_total", {"outcome": "bound"}) == 1
    assert registry.get_sample_value("tatara_allocation_bind_seconds_sum") == 2.0


async def test_a_lost_claim_writes_nothing_else() -> None:
    client = FakeClient(fail={("merge_patch", "processes/m1"): conflict()})
    run, registry = executor(client)
    result = await run.execute_allocation(alloc(), _bind(), NOW)
    assert client.writes == [("merge_patch", "processes/m1")]
    assert result.requeue_after == RETRY_AFTER_CONFLICT
    assert registry.get_sample_value("tatara_pool_binds_total", {"outcome": "conflict"}) == 1


async def test_a_status_guard_that_loses_makes_the_allocation_decide_again() -> None:
    client = FakeClient(fail={("merge_patch", "ephemeralallocations/alloc-1/status"): conflict()})
    run, _ = executor(client)
    decision = AllocationDecision("Queued", status=AllocationStatusPatch(phase=AllocationPhase.QUEUED),
                                  events=(Event.normal("Queued", "waiting"),), requeue_after=30.0)
    result = await run.execute_allocation(alloc(), decision, NOW, resource_version="9")
    assert result.requeue_after == RETRY_AFTER_CONFLICT
    assert [verb for verb, _ in client.writes] == ["merge_patch"]  # no Event for a write that did not happen


async def test_reaching_released_is_counted() -> None:
    client = FakeClient(stored=(alloc(),))
    run, registry = executor(client)
    decision = AllocationDecision("Release", status=AllocationStatusPatch(phase=AllocationPhase.RELEASED))
    await run.execute_allocation(alloc(), decision, NOW)
    assert registry.get_sample_value("tatara_pool_releases_total", {"outcome": "released"}) == 1


@pytest.mark.parametrize(
    ("patch", "strip_between", "outcome"),
    [
        (MemberPatch("m-0", annotate({ann.SIGNAL: "SIGTERM"}), MemberWrite.RETURN_REPLACE), True, "replace"),
        (MemberPatch("m-0", annotate({ann.RETURN_TRIGGER: None}), MemberWrite.RETURN_KEEP), False, "keep"),
    ],
    ids=[
        "a Replace SIGTERM re-sent after the signal was stripped is the same return (counted once)",
        "a Keep patch repeated without any change stores nothing (not counted again)",
    ],
)
async def test_a_repeated_return_patch_is_counted_once(patch: MemberPatch, strip_between: bool, outcome: str) -> None:
    client = FakeClient(stored=(process("m-0", annotations={ann.RETURN_TRIGGER: "true"}),))
    run, registry = executor(client)
    decision = PoolDecision(patch=(patch,))
    assert (await run.execute_pool(pool(), decision)).requeue_after is None
    assert registry.get_sample_value("tatara_pool_releases_total", {"outcome": outcome}) == 1
    if strip_between:  # the Process reconciler took the one-shot signal
        taken = client.object(PROCESSES, "m-0", "pools")
        assert taken is not None
        client.seed(PROCESSES, {**taken, "metadata": {**taken["metadata"], "annotations": {}, "resourceVersion": None}})
    assert (await run.execute_pool(pool(), decision)).requeue_after is None
    assert registry.get_sample_value("tatara_pool_releases_total", {"outcome": outcome}) == 1


async def test_a_guarded_member_delete_carries_its_precondition_and_a_lost_one_comes_back_soon() -> None:
    client = FakeClient(stored=(process("a", rv="12"), process("b")))
    run, _ = executor(client)
    decision = PoolDecision(delete=(MemberDelete("a", "ScaleDown", "11"), MemberDelete("b", "Drain")),
                            requeue_after=30.0)
    result = await run.execute_pool(pool(), decision)
    assert [(c.verb, c.path, dict(c.options)) for c in client.calls] == [
        ("delete", "processes/a", {"resource_version": "11"}), ("delete", "processes/b", {})]
    assert client.object(PROCESSES, "a", "pools") is not None  # the stale precondition kept it
    assert result.requeue_after == RETRY_AFTER_CONFLICT
