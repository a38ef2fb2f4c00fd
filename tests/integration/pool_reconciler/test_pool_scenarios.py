"""Pool scenarios against the real API server, both reconcilers and the Flux stand-in running: FIFO
queueing, the Replace and Reset return policies, pool deletion, scaling down past bound members, a
restart mid-bind, the spawn timeout and one Bound transition per bind."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.allocation_decide import bind_patch
from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared.domain import annotations as ann
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.codec import convert, format_timestamp
from shared.domain.api.process import Process
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.client import EVENTS, KubeClient, Resource, WatchEvent
from shared.kube.errors import Invalid
from shared.kube.manager import Manager
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
from tools.standins.flux import FluxStandIn

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
    return Counter(str((e.get("regarding") or e.get("involvedObject") or {}).get("name")) for e in items
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


# ── 5. restart mid-bind ──────────────────────────────────────────────────────


@asynccontextmanager
async def process_side(kc: KubeClient, ns: str) -> AsyncIterator[None]:
    """The Process reconciler and the Flux stand-in alone (the pool reconciler is started separately)."""
    config = ReconcilerConfig(watch_namespace=ns, leader_elect=False, health_host="127.0.0.1", health_port=0,
                              table_status_interval=0.2)
    process = build_process(kc, config, registry=CollectorRegistry(), handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(process.run)
        tg.start_soon(FluxStandIn(kc, namespace=ns).run)
        try:
            yield
        finally:
            process.stop()
            tg.cancel_scope.cancel()


@asynccontextmanager
async def pool_side(kc: KubeClient, ns: str) -> AsyncIterator[tuple[Manager, CollectorRegistry]]:
    """One run of the pool reconciler (a fresh manager: a restart is leaving this and entering it again)."""
    config = PoolReconcilerConfig(watch_namespace=ns, leader_elect=False, health_host="127.0.0.1", health_port=0)
    registry = CollectorRegistry()
    pool = build_pool(kc, config, registry=registry, handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.run)
        try:
            yield pool, registry
        finally:
            pool.stop()
            tg.cancel_scope.cancel()


async def test_a_restart_mid_bind_loses_nothing_and_binds_once(kc: KubeClient, namespace: str) -> None:
    async with process_side(kc, namespace):
        async with pool_side(kc, namespace):
            await kc.create(EPHEMERAL_POOLS, pool_doc("rs", 3), namespace)
            await wait_free(kc, namespace, "rs", 3)

        # Down: the claim of a bind was written, its status write was not (the crash point in between).
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("m1", "rs", namespace), namespace)
        alloc = convert(await read(kc, EPHEMERAL_ALLOCATIONS, "m1", namespace), EphemeralAllocation)
        target = convert((await members(kc, namespace, "rs"))[1], Process)
        now = datetime.now(UTC)
        claim = bind_patch(alloc, target, now + timedelta(minutes=30), now)
        await kc.merge_patch(PROCESSES, claim.name, claim.patch.to_json(), namespace)

        # Up again, with more allocations arriving while it binds; then down and up once more mid-burst.
        async with pool_side(kc, namespace):
            bound = await wait_phase(kc, namespace, "m1", "Bound")
            assert bound["status"]["assignedProcess"]["name"] == claim.name
            for name in ("m2", "m3"):
                await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "rs", namespace), namespace)
        async with pool_side(kc, namespace):
            for name in ("m2", "m3"):
                await wait_phase(kc, namespace, name, "Bound")
            owners = allocated(await members(kc, namespace, "rs"))
            assert owners == {n: owners[n] for n in ("m1", "m2", "m3")}
            assert all(len(v) == 1 for v in owners.values()), owners
            assert len({v[0] for v in owners.values()}) == 3
            assert owners["m1"] == [claim.name]
            for name in ("m1", "m2", "m3"):
                got = await read(kc, EPHEMERAL_ALLOCATIONS, name, namespace)
                assert got["status"]["assignedProcess"]["name"] == owners[name][0]


# ── 6. spawn timeout ─────────────────────────────────────────────────────────


async def test_an_allocation_that_cannot_bind_in_time_fails_with_a_reason(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace, spawn_timeout=timedelta(seconds=3)):
        await kc.create(EPHEMERAL_POOLS, pool_doc("tiny", 1), namespace)
        await wait_free(kc, namespace, "tiny", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("t1", "tiny", namespace), namespace)
        await wait_phase(kc, namespace, "t1", "Bound")
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("t2", "tiny", namespace), namespace)
        await wait_phase(kc, namespace, "t2", "Queued")
        failed = await wait_phase(kc, namespace, "t2", "Failed")
        assert "spawn timeout" in failed["status"]["message"]

        async def timeout_event() -> bool:
            items = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
            return any(e.get("reason") == "SpawnTimeout"
                       and (e.get("regarding") or e.get("involvedObject") or {}).get("name") == "t2" for e in items)

        await wait_for(timeout_event, timeout=TIMEOUT, what="a SpawnTimeout Event on t2")
        # The bound one is untouched by the timeout.
        assert (await phases(kc, namespace, ["t1"]))["t1"] == "Bound"


# ── 7. one Bound transition per bind, under load ────────────────────────────


class LaggingAllocationWatch(KubeClient):
    """A client whose EphemeralAllocation watch delivers each event :data:`ALLOCATION_LAG` seconds late,
    so the allocation cache still shows a just-bound allocation unbound while the member's claim is
    already seen (the window of a second Bound write)."""

    async def watch(self, resource: Resource, namespace: str | None = None, **options: Any
                    ) -> AsyncIterator[WatchEvent]:
        async for event in super().watch(resource, namespace, **options):
            if resource == EPHEMERAL_ALLOCATIONS:
                await anyio.sleep(ALLOCATION_LAG)  # simulated watch latency, not synchronisation
            yield event


ALLOCATION_LAG = 0.3


def lagging(kc: KubeClient) -> KubeClient:
    """``kc``'s session and credentials behind :class:`LaggingAllocationWatch` (closed with ``kc``)."""
    client = LaggingAllocationWatch.__new__(LaggingAllocationWatch)
    client.__dict__.update(kc.__dict__)
    return client


async def test_each_allocation_of_a_burst_is_written_bound_exactly_once(kc: KubeClient, namespace: str) -> None:
    async with process_side(kc, namespace), pool_side(lagging(kc), namespace) as (manager, registry):
        await kc.create(EPHEMERAL_POOLS, pool_doc("burst", 6), namespace)
        await wait_free(kc, namespace, "burst", 6)
        names = [f"x{i}" for i in range(6)]
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(kc.create, EPHEMERAL_ALLOCATIONS, allocation_doc(name, "burst", namespace), namespace)
        for name in names:
            await wait_phase(kc, namespace, name, "Bound")

        async def idle() -> bool:
            return manager.idle()

        await wait_for(idle, timeout=TIMEOUT, what="the pool reconciler idle")
        owners = allocated(await members(kc, namespace, "burst"))
        assert sorted(owners) == names
        assert len({v[0] for v in owners.values()}) == 6
        assert all(len(v) == 1 for v in owners.values())
        events = await bound_events(kc, namespace)
        assert {n: events[n] for n in names} == dict.fromkeys(names, 1)
        assert registry.get_sample_value("tatara_pool_binds_total", {"outcome": "bound"}) == 6
        assert registry.get_sample_value("tatara_allocation_bind_seconds_count") == 6


# ── a pool at its cap (issue 13) ─────────────────────────────────────────────


def capped_pool(name: str, desired_size: int, max_size: int) -> dict[str, Any]:
    """A legacy-sized pool (``desired`` 0) with ``desiredSize`` and ``maxSize``."""
    doc = pool_doc(name, 0)
    doc["spec"].update(desiredSize=desired_size, maxSize=max_size)
    return doc


async def reasons(kc: KubeClient, ns: str, reason: str) -> int:
    items = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return sum(int(e.get("count") or (e.get("series") or {}).get("count") or 1) for e in items
               if e.get("reason") == reason)


@pytest.mark.parametrize(
    ("desired_size", "max_size", "bound", "queued"), [(3, 3, 3, 0), (1, 2, 2, 1)], ids=["3/3", "1/2"]
)
async def test_a_pool_at_its_cap_with_its_allocations_settles(
    kc: KubeClient, namespace: str, desired_size: int, max_size: int, bound: int, queued: int
) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, capped_pool("cap", desired_size, max_size), namespace)
        await wait_free(kc, namespace, "cap", desired_size)
        names = [f"c{i}" for i in range(1, 4)]
        for name in names:
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "cap", namespace), namespace)

        async def settled_phases() -> dict[str, str | None] | None:
            seen = await phases(kc, namespace, names)
            return seen if sorted(str(p) for p in seen.values()) == sorted(
                ["Bound"] * bound + ["Queued"] * queued) else None

        await wait_for(settled_phases, timeout=TIMEOUT, what=f"{bound} Bound, {queued} Queued")
        await settle(running)
        present = {m["metadata"]["name"] for m in await members(kc, namespace, "cap")}
        assert len(present) == max_size
        for name in names:
            alloc = await read(kc, EPHEMERAL_ALLOCATIONS, name, namespace)
            if alloc["status"]["phase"] == "Bound":
                assert alloc["status"]["assignedProcess"]["name"] in present
        assert await reasons(kc, namespace, "MembersDeleted") == 0


# ── bounded batches and the size cap (issue 13) ──────────────────────────────


async def test_an_absurd_pool_size_is_refused_at_admission_with_a_clear_message(kc: KubeClient, namespace: str) -> None:
    for field in ("desiredSize", "minSize", "maxSize", "desired"):
        doc = capped_pool(f"huge-{field.lower()}", 1, 0)
        doc["spec"][field] = 10000
        with pytest.raises(Invalid) as refused:
            await kc.create(EPHEMERAL_POOLS, doc, namespace)
        assert f"spec.{field}: Invalid value" in refused.value.message
        assert "must be at most 1000: a pool keeps at most 1000 members" in refused.value.message
    doc = capped_pool("largest", 0, 1000)
    doc["spec"]["desiredSize"] = 0
    await kc.create(EPHEMERAL_POOLS, doc, namespace)  # the cap itself is admitted


async def created_counts(kc: KubeClient, ns: str) -> list[int]:
    """The counts of the ``MembersCreated`` Events (``creating <n> member(s)``), one per distinct Event."""
    items = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return [int(str(e.get("note") or e.get("message")).split()[1]) for e in items
            if e.get("reason") == "MembersCreated"]


async def test_a_large_pool_creates_in_batches_and_stops_when_deleted(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, capped_pool("big", 1000, 0), namespace)

        async def first_members() -> list[dict[str, Any]] | None:
            found = await members(kc, namespace, "big")
            return found or None

        await wait_for(first_members, timeout=TIMEOUT, what="the first members of big")
        await kc.delete(EPHEMERAL_POOLS, "big", namespace)

        async def pool_gone() -> bool:
            return await read_or_none(kc, EPHEMERAL_POOLS, "big", namespace) is None

        await wait_for(pool_gone, timeout=TIMEOUT * 4, what="pool big drained and gone")
        await settle(running)
        assert await members(kc, namespace, "big") == []
        counts = await created_counts(kc, namespace)
        assert counts
        assert max(counts) <= 16


# ── a bound member deleted by hand (issue 13) ────────────────────────────────


async def test_a_bound_allocation_whose_member_is_deleted_by_hand_fails_with_a_warning(
    kc: KubeClient, namespace: str
) -> None:
    async with both_running(kc, namespace):
        await kc.create(EPHEMERAL_POOLS, capped_pool("lost", 1, 1), namespace)
        (first,) = await wait_free(kc, namespace, "lost", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("l1", "lost", namespace), namespace)
        await wait_phase(kc, namespace, "l1", "Bound")
        name = first["metadata"]["name"]
        await kc.delete(PROCESSES, name, namespace)
        failed = await wait_phase(kc, namespace, "l1", "Failed")
        assert failed["status"]["message"] == f"member {name} of pool lost is gone; this allocation holds nothing"

        async def told() -> int | None:  # the Event comes after the status write it tells of
            return await reasons(kc, namespace, "MemberLost") or None

        assert await wait_for(told, timeout=TIMEOUT, what="the MemberLost Event") == 1


# ── an empty pool is Ready (issue 13) ────────────────────────────────────────


async def test_a_pool_of_desired_size_zero_is_ready(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, capped_pool("empty", 0, 0), namespace)

        async def ready() -> dict[str, Any] | None:
            obj = await read(kc, EPHEMERAL_POOLS, "empty", namespace)
            conditions = obj.get("status", {}).get("conditions", [])
            return obj if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

        obj = await wait_for(ready, timeout=TIMEOUT, what="pool empty Ready")
        await settle(running)
        assert obj["status"]["phase"] == "Steady"
        assert await members(kc, namespace, "empty") == []


# ── kstatus conditions on allocations (issue 13) ─────────────────────────────


def condition_truths(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


async def test_a_bound_allocation_is_ready_and_a_queued_one_reconciling(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, capped_pool("ks", 1, 1), namespace)
        await wait_free(kc, namespace, "ks", 1)
        for name in ("k1", "k2"):
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "ks", namespace), namespace)

        async def ready(name: str) -> dict[str, Any] | None:  # kubectl wait --for=condition=Ready
            obj = await read(kc, EPHEMERAL_ALLOCATIONS, name, namespace)
            return obj if condition_truths(obj).get("Ready") == "True" else None

        bound = await wait_for(lambda: ready("k1"), timeout=TIMEOUT, what="k1 Ready")
        assert bound["status"]["phase"] == "Bound"
        assert bound["status"]["observedGeneration"] == bound["metadata"]["generation"]
        queued = await wait_phase(kc, namespace, "k2", "Queued")
        await settle(running)
        queued = await read(kc, EPHEMERAL_ALLOCATIONS, "k2", namespace)
        assert condition_truths(queued) == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
        assert queued["status"]["observedGeneration"] == queued["metadata"]["generation"]
