"""The remaining scenarios of issue 6 against the real API server, both reconcilers and the Flux
stand-in running: FIFO queueing, the Replace and Reset return policies, pool deletion, scaling
down past bound members, a restart mid-bind, the spawn timeout and one Bound transition per bind."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from pool_reconciler.executor import JOBS
from shared import annotations as ann
from shared.api.codec import format_timestamp
from shared.kube.client import EVENTS, KubeClient
from shared.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from tests.integration.pool_reconciler.conftest import both_running
from tests.integration.pool_reconciler.test_pool_allocation import (
    allocation_doc,
    bound_to,
    members,
    pool_doc,
    read,
    read_or_none,
    settle,
    wait_free,
    wait_phase,
    wait_pool_counts,
)
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

TIMEOUT = 45.0


def policy_pool(name: str, desired: int, policy: str) -> dict[str, Any]:
    doc = pool_doc(name, desired)
    doc["spec"]["returnPolicy"] = policy
    return doc


async def phases(kc: KubeClient, ns: str, names: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        obj = await read_or_none(kc, EPHEMERAL_ALLOCATIONS, name, ns)
        out[name] = None if obj is None else obj.get("status", {}).get("phase")
    return out


async def gone(kc: KubeClient, ns: str, name: str) -> None:
    async def probe() -> bool:
        return await read_or_none(kc, EPHEMERAL_ALLOCATIONS, name, ns) is None

    await wait_for(probe, timeout=TIMEOUT, what=f"allocation {name} deleted")


def allocated(all_members: list[dict[str, Any]]) -> dict[str, list[str]]:
    """allocation name → the members carrying its ``allocation`` annotation."""
    out: dict[str, list[str]] = {}
    for m in all_members:
        owner = m["metadata"].get("annotations", {}).get(ann.ALLOCATION)
        if owner:
            out.setdefault(owner, []).append(m["metadata"]["name"])
    return out


async def bound_events(kc: KubeClient, ns: str) -> Counter[str]:
    items = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return Counter((e.get("regarding") or e.get("involvedObject") or {}).get("name") for e in items
                   if e.get("reason") == "Bound")


# ── 1. FIFO ──────────────────────────────────────────────────────────────────


async def test_five_allocations_on_three_members_bind_in_fifo_order(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, pool_doc("fifo", 3), namespace)
        await wait_free(kc, namespace, "fifo", 3)
        await settle(running)
        names = [f"q{i}" for i in range(1, 6)]  # created in this order; a same-second tie breaks by name
        for name in names:
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "fifo", namespace), namespace)

        async def three_bound_two_queued() -> dict[str, str | None] | None:
            seen = await phases(kc, namespace, names)
            return seen if list(seen.values()) == ["Bound"] * 3 + ["Queued"] * 2 else None

        await wait_for(three_bound_two_queued, timeout=TIMEOUT, what="q1-q3 Bound, q4-q5 Queued")
        await settle(running)
        owners = allocated(await members(kc, namespace, "fifo"))
        assert sorted(owners) == ["q1", "q2", "q3"]
        assert all(len(v) == 1 for v in owners.values())
        assert len({v[0] for v in owners.values()}) == 3

        for released, next_up, waiting in (("q1", "q4", "q5"), ("q2", "q5", None)):
            await kc.delete(EPHEMERAL_ALLOCATIONS, released, namespace)
            alloc = await wait_phase(kc, namespace, next_up, "Bound")
            assert alloc["status"]["assignedProcess"]["name"] == owners[released][0]
            if waiting is not None:
                assert (await phases(kc, namespace, [waiting]))[waiting] == "Queued"
            await gone(kc, namespace, released)
        await settle(running)
        final = allocated(await members(kc, namespace, "fifo"))
        assert sorted(final) == ["q3", "q4", "q5"]
        assert all(len(v) == 1 for v in final.values())


# ── 2. Replace and Reset ────────────────────────────────────────────────────


async def test_replace_terminates_the_member_and_a_fresh_one_takes_its_place(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, policy_pool("rep", 1, "Replace"), namespace)
        (first,) = await wait_free(kc, namespace, "rep", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("r1", "rep", namespace), namespace)
        alloc = await wait_phase(kc, namespace, "r1", "Bound")
        assert alloc["status"]["assignedProcess"]["name"] == first["metadata"]["name"]

        await kc.delete(EPHEMERAL_ALLOCATIONS, "r1", namespace)
        await gone(kc, namespace, "r1")
        (fresh,) = await wait_free(kc, namespace, "rep", 1)
        assert fresh["metadata"]["uid"] != first["metadata"]["uid"]
        assert await read_or_none(kc, PROCESSES, first["metadata"]["name"], namespace) is None or (
            (await read(kc, PROCESSES, first["metadata"]["name"], namespace))["metadata"]["uid"]
            != first["metadata"]["uid"])
        await wait_pool_counts(kc, namespace, "rep", readyCount=1, allocatedCount=0, returningCount=0)
        await settle(running)
        assert running.pool_registry.get_sample_value("tatara_pool_releases_total", {"outcome": "replace"}) == 1


async def test_reset_runs_a_job_and_frees_the_member_once_it_completes(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, policy_pool("rst", 1, "Reset"), namespace)
        (first,) = await wait_free(kc, namespace, "rst", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("s1", "rst", namespace), namespace)
        await wait_phase(kc, namespace, "s1", "Bound")
        await kc.delete(EPHEMERAL_ALLOCATIONS, "s1", namespace)

        async def reset_job() -> dict[str, Any] | None:
            jobs = msgspec.json.decode(await kc.list(JOBS, namespace))["items"]
            mine = [j for j in jobs if j["metadata"].get("annotations", {}).get(ann.POOL) == "rst"]
            return mine[0] if len(mine) == 1 else None

        job = await wait_for(reset_job, timeout=TIMEOUT, what="the reset Job")
        # No kube-controller-manager here: the Job never runs, so its status is written by hand, in the
        # order the API server validates (startTime, SuccessCriteriaMet, then Complete).
        stamp = format_timestamp(datetime.now(UTC))
        met = {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp,
               "lastProbeTime": stamp, "reason": "CompletionsReached", "message": "simulated"}
        await kc.merge_patch(JOBS, job["metadata"]["name"], {"status": {"startTime": stamp, "conditions": [met]}},
                             namespace, subresource="status")
        # The member is not free while the Job has not completed.
        member = await read(kc, PROCESSES, first["metadata"]["name"], namespace)
        assert ann.RETURN_TRIGGER in member["metadata"]["annotations"]
        complete = {**met, "type": "Complete"}
        await kc.merge_patch(JOBS, job["metadata"]["name"], {"status": {
            "conditions": [met, complete], "completionTime": stamp, "succeeded": 1}}, namespace,
            subresource="status")
        (back,) = await wait_free(kc, namespace, "rst", 1)
        assert back["metadata"]["uid"] == first["metadata"]["uid"]
        await gone(kc, namespace, "s1")
        await settle(running)
        assert running.pool_registry.get_sample_value("tatara_pool_releases_total", {"outcome": "reset"}) == 1


# ── 3. pool deletion ─────────────────────────────────────────────────────────


async def test_deleting_a_pool_reaps_its_members_before_its_finalizer_goes(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, pool_doc("doomed", 2), namespace)
        await wait_free(kc, namespace, "doomed", 2)
        await settle(running)
        await kc.delete(EPHEMERAL_POOLS, "doomed", namespace)

        async def pool_gone() -> bool:
            if await read_or_none(kc, EPHEMERAL_POOLS, "doomed", namespace) is not None:
                return False
            left = await members(kc, namespace, "doomed")
            assert left == [], f"pool released with members left: {[m['metadata']['name'] for m in left]}"
            return True

        await wait_for(pool_gone, timeout=TIMEOUT, what="pool doomed deleted")
        await settle(running)
        for resource in (EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS, PROCESSES):
            for item in msgspec.json.decode(await kc.list(resource, namespace))["items"]:
                ours = [f for f in item["metadata"].get("finalizers", []) if "tatara.pleme.io" in f]
                assert not ours, (item["metadata"]["name"], ours)


# ── 4. scale down ────────────────────────────────────────────────────────────


async def test_scaling_down_never_removes_a_bound_member(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, pool_doc("shrink", 3), namespace)
        await wait_free(kc, namespace, "shrink", 3)
        await settle(running)
        for name in ("b1", "b2"):
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "shrink", namespace), namespace)
        held = {(await wait_phase(kc, namespace, n, "Bound"))["status"]["assignedProcess"]["name"]
                for n in ("b1", "b2")}
        await kc.merge_patch(EPHEMERAL_POOLS, "shrink", {"spec": {"desired": 1, "desiredSize": 1}}, namespace)

        async def only_bound_left() -> bool:
            now = await members(kc, namespace, "shrink")
            for m in now:
                if m["metadata"]["name"] in held:
                    assert m["metadata"].get("deletionTimestamp") is None, "a bound member is being deleted"
            return {m["metadata"]["name"] for m in now} == held

        await wait_for(only_bound_left, timeout=TIMEOUT, what="the free member reaped, the bound ones kept")
        await settle(running)
        assert await only_bound_left()
        for n in ("b1", "b2"):
            assert (await phases(kc, namespace, [n]))[n] == "Bound"

        # Once one is released, the pool settles at its desired count of one.
        await kc.delete(EPHEMERAL_ALLOCATIONS, "b1", namespace)
        await gone(kc, namespace, "b1")

        async def one_left() -> bool:
            return len(await members(kc, namespace, "shrink")) == 1

        await wait_for(one_left, timeout=TIMEOUT, what="one member left")
        (last,) = await members(kc, namespace, "shrink")
        assert bound_to(last, namespace, "b2")
