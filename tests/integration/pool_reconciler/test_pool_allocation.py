"""The pool reconciler against the real API server, with the Process reconciler and a Flux stand-in
driving members to Attested (docs/behaviour.md#pools, docs/behaviour.md#allocations)."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import EVENTS, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.integration.pool_reconciler.conftest import Running, both_running
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

TIMEOUT = 90.0


def pool_doc(name: str, desired: int) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1",
        "kind": "EphemeralPool",
        "metadata": {"name": name},
        "spec": {
            "desiredSize": desired,
            "desired": desired,
            "returnPolicy": "Keep",
            "maxAllocationTtl": "4h",
            "template": {"aplicacao": {"chartRef": "demo", "version": "1.0.0"}, "ttl": "1h"},
        },
    }


def allocation_doc(name: str, pool: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1",
        "kind": "EphemeralAllocation",
        "metadata": {"name": name},
        "spec": {"poolRef": {"name": pool, "namespace": ns}, "requestor": {"kind": "manual"}, "ttl": "30m"},
    }


async def read(kc: KubeClient, resource: Resource, name: str, ns: str) -> dict[str, Any]:
    result: dict[str, Any] = msgspec.json.decode(await kc.get(resource, name, ns))
    return result


async def read_or_none(kc: KubeClient, resource: Resource, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return await read(kc, resource, name, ns)
    except NotFound:
        return None


async def members(kc: KubeClient, ns: str, pool: str) -> list[dict[str, Any]]:
    listed = msgspec.json.decode(await kc.list(PROCESSES, ns))
    out = [p for p in listed["items"] if p["metadata"].get("annotations", {}).get(ann.POOL) == pool]
    return sorted(out, key=lambda p: p["metadata"]["name"])


def free(member: dict[str, Any]) -> bool:
    annotations = member["metadata"].get("annotations", {})
    return (member.get("status", {}).get("phase") == "Attested" and "permanent" in member["spec"]["lifetime"]
            and ann.ALLOCATION not in annotations and ann.RETURN_TRIGGER not in annotations)


async def wait_free(kc: KubeClient, ns: str, pool: str, count: int) -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        found = [m for m in await members(kc, ns, pool) if free(m)]
        return found if len(found) == count else None

    return await wait_for(probe, timeout=TIMEOUT, what=f"{count} free members of {pool}")


async def wait_phase(kc: KubeClient, ns: str, name: str, phase: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        alloc = await read_or_none(kc, EPHEMERAL_ALLOCATIONS, name, ns)
        return alloc if alloc is not None and alloc.get("status", {}).get("phase") == phase else None

    return await wait_for(probe, timeout=TIMEOUT, what=f"allocation {name} {phase}")


async def wait_pool_counts(kc: KubeClient, ns: str, pool: str, **counts: object) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await read(kc, EPHEMERAL_POOLS, pool, ns)
        status = obj.get("status", {})
        return obj if all(status.get(k) == v for k, v in counts.items()) else None

    return await wait_for(probe, timeout=TIMEOUT, what=f"pool {pool} counts {counts}")


async def settle(running: Running) -> None:
    async def idle() -> bool:
        return running.idle()

    await wait_for(idle, timeout=TIMEOUT, what="both reconcilers idle")


def bound_to(member: dict[str, Any], ns: str, alloc: str) -> bool:
    annotations: dict[str, str] = member["metadata"].get("annotations", {})
    return annotations.get(ann.ALLOCATION) == alloc and annotations.get(ann.REQUESTOR) == f"{ns}/{alloc}"


async def test_a_pool_fills_binds_releases_and_keeps_its_status_quiet(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, pool_doc("warm", 2), namespace)
        ready = await wait_free(kc, namespace, "warm", 2)
        pool = await read(kc, EPHEMERAL_POOLS, "warm", namespace)
        assert fin.POOL in pool["metadata"]["finalizers"]
        slots = set()
        for member in ready:
            annotations = member["metadata"]["annotations"]
            assert annotations[ann.POOL] == "warm"
            slots.add(annotations[ann.POOL_SLOT])
            (owner,) = member["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
                "EphemeralPool", "warm", pool["metadata"]["uid"], True)
        assert slots == {"0", "1"}
        await wait_pool_counts(kc, namespace, "warm", phase="Steady", readyCount=2, allocatedCount=0,
                               spawningCount=0, returningCount=0)

        # Bind: one member stamped for the allocation, its lifetime ephemeral only, never torn down early.
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a1", "warm", namespace), namespace)
        alloc = await wait_phase(kc, namespace, "a1", "Bound")
        assert fin.ALLOCATION in alloc["metadata"]["finalizers"]
        assigned = alloc["status"]["assignedProcess"]["name"]
        member = await read(kc, PROCESSES, assigned, namespace)
        assert bound_to(member, namespace, "a1")
        assert member["metadata"]["annotations"][ann.REQUESTOR_KIND] == "manual"
        lifetime = member["spec"]["lifetime"]
        assert set(lifetime) == {"ephemeral"}
        assert lifetime["ephemeral"]["teardownPolicy"] == "Never"
        assert alloc["status"]["expiresAt"]
        await wait_pool_counts(kc, namespace, "warm", readyCount=1, allocatedCount=1)
        await settle(running)
        sample = running.pool_registry.get_sample_value
        assert sample("tatara_pool_binds_total", {"outcome": "bound"}) == 1
        assert sample("tatara_pool_members", {"pool": f"{namespace}/warm", "state": "Allocated"}) == 1
        assert sample("tatara_pool_members", {"pool": f"{namespace}/warm", "state": "Free"}) == 1
        assert sample("tatara_allocations", {"phase": "Bound"}) == 1
        assert sample("tatara_allocation_bind_seconds_count") == 1
        bound_events = [e for e in msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
                        if e.get("reason") == "Bound"
                        and (e.get("regarding") or e.get("involvedObject") or {}).get("name") == "a1"]
        assert len(bound_events) == 1, bound_events
        assert (await read(kc, EPHEMERAL_ALLOCATIONS, "a1", namespace))["status"] == alloc["status"]

        # Release (Keep): the member is Free again, the allocation and its finalizer are gone.
        await kc.delete(EPHEMERAL_ALLOCATIONS, "a1", namespace)

        async def released() -> bool:
            return await read_or_none(kc, EPHEMERAL_ALLOCATIONS, "a1", namespace) is None

        await wait_for(released, timeout=TIMEOUT, what="a1 deleted")
        back = await read(kc, PROCESSES, assigned, namespace)
        annotations = back["metadata"].get("annotations", {})
        for key in (ann.REQUESTOR, ann.REQUESTOR_KIND, ann.ALLOCATION, ann.RETURN_TRIGGER):
            assert key not in annotations
        assert set(back["spec"]["lifetime"]) == {"permanent"}
        await wait_free(kc, namespace, "warm", 2)
        pool = await wait_pool_counts(kc, namespace, "warm", phase="Steady", readyCount=2, allocatedCount=0,
                                      spawningCount=0, returningCount=0)
        assert len(pool["status"]["members"]) == 2
        await settle(running)
        assert sample("tatara_pool_releases_total", {"outcome": "keep"}) == 1

        # Quiet: a pass over an unchanged pool (forced by a metadata write) rewrites nothing.
        await settle(running)
        before = (await read(kc, EPHEMERAL_POOLS, "warm", namespace))["metadata"]["resourceVersion"]
        touched = msgspec.json.decode(await kc.merge_patch(
            EPHEMERAL_POOLS, "warm", {"metadata": {"labels": {"poke": "1"}}}, namespace))
        assert touched["metadata"]["resourceVersion"] != before
        await settle(running)
        after = await read(kc, EPHEMERAL_POOLS, "warm", namespace)
        assert after["metadata"]["resourceVersion"] == touched["metadata"]["resourceVersion"]
        assert after["status"] == pool["status"]


async def test_two_allocations_race_for_one_member(kc: KubeClient, namespace: str) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, pool_doc("one", 1), namespace)
        await wait_free(kc, namespace, "one", 1)
        await settle(running)

        async with anyio.create_task_group() as tg:
            for name in ("r1", "r2"):
                tg.start_soon(kc.create, EPHEMERAL_ALLOCATIONS, allocation_doc(name, "one", namespace), namespace)

        async def one_bound_one_queued() -> tuple[dict[str, Any], dict[str, Any]] | None:
            a = await read(kc, EPHEMERAL_ALLOCATIONS, "r1", namespace)
            b = await read(kc, EPHEMERAL_ALLOCATIONS, "r2", namespace)
            phases = {a.get("status", {}).get("phase"), b.get("status", {}).get("phase")}
            if phases != {"Bound", "Queued"}:
                return None
            return (a, b) if a["status"]["phase"] == "Bound" else (b, a)

        winner, loser = await wait_for(one_bound_one_queued, timeout=TIMEOUT, what="one Bound, one Queued")
        await settle(running)
        (only,) = await members(kc, namespace, "one")
        win_name, lose_name = winner["metadata"]["name"], loser["metadata"]["name"]
        assert bound_to(only, namespace, win_name)
        assert winner["status"]["assignedProcess"]["name"] == only["metadata"]["name"]
        assert (await read(kc, EPHEMERAL_ALLOCATIONS, lose_name, namespace))["status"]["phase"] == "Queued"

        # A second member: the queued allocation binds to it, not to the first one.
        await kc.merge_patch(EPHEMERAL_POOLS, "one", {"spec": {"desired": 2, "desiredSize": 2}}, namespace)
        late = await wait_phase(kc, namespace, lose_name, "Bound")
        second = late["status"]["assignedProcess"]["name"]
        assert second != only["metadata"]["name"]
        assert bound_to(await read(kc, PROCESSES, second, namespace), namespace, lose_name)
        assert bound_to(await read(kc, PROCESSES, only["metadata"]["name"], namespace), namespace, win_name)
        await wait_pool_counts(kc, namespace, "one", readyCount=0, allocatedCount=2)
