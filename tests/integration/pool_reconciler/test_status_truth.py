"""Pool and allocation status that tells the truth (issue 28), against the real API server with both
reconcilers and a Flux stand-in running:

- a legacy pool that ``maxSize`` keeps below its target is Stalled (``MaxSizeReached``, the numbers in the
  message, one Warning Event), not Reconciling forever, and recovers when ``maxSize`` is raised
  (docs/behaviour.md#pool-max-size-reached);
- a Queued allocation's status is written exactly once, counted on the API server's own watch (every
  stored version of the allocation) and by its ``Queued`` Event's count (docs/behaviour.md#allocation-phases).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS
from shared.kube.client import EVENTS, KubeClient
from tests.integration.pool_reconciler.conftest import both_running
from tests.integration.pool_reconciler.test_pool_allocation import (
    TIMEOUT,
    allocation_doc,
    read,
    settle,
    wait_free,
    wait_phase,
)
from tests.integration.pool_reconciler.test_pool_scenarios import capped_pool
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """``type → (status, reason, message)`` of the object's conditions."""
    return {c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
            for c in obj.get("status", {}).get("conditions", [])}


async def event_counts(kc: KubeClient, ns: str, reason: str) -> dict[str, int]:
    """``object name → how many times`` Events of ``reason`` were recorded on it (aggregated counts summed)."""
    items = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    out: dict[str, int] = defaultdict(int)
    for e in items:
        if e.get("reason") == reason:
            name = (e.get("involvedObject") or e.get("regarding") or {}).get("name", "")
            out[name] += int(e.get("count") or (e.get("series") or {}).get("count") or 1)
    return dict(out)


def kubectl_wait(control_plane: LocalControlPlane, ns: str, name: str, condition: str) -> bool:
    """``kubectl wait --for=condition=<condition> --timeout=0s`` on pool ``name`` (check once): True when it
    succeeds. Skips the test when there is no ``kubectl`` on PATH."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on PATH")
    done = subprocess.run([kubectl, "--kubeconfig", str(control_plane.kubeconfig), "-n", ns, "wait",
                           f"ephemeralpools.tatara.pleme.io/{name}", f"--for=condition={condition}", "--timeout=0s"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


async def test_a_pool_that_max_size_keeps_below_its_target_is_stalled_with_the_numbers(
    kc: KubeClient, namespace: str, control_plane: LocalControlPlane
) -> None:
    async with both_running(kc, namespace) as running:
        await kc.create(EPHEMERAL_POOLS, capped_pool("cap", 1, 1), namespace)
        await wait_free(kc, namespace, "cap", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a1", "cap", namespace), namespace)
        await wait_phase(kc, namespace, "a1", "Bound")
        # the one member maxSize allows is allocated: no Free member, and none may be created
        text = ("at maxSize 1: 1 active member(s), 1 allocated and 0 free or starting, short of desiredSize 1; "
                "raise maxSize or release an allocation")

        async def stalled() -> dict[str, Any] | None:
            pool = await read(kc, EPHEMERAL_POOLS, "cap", namespace)
            return pool if conditions(pool).get("Stalled", ("",))[0] == "True" else None

        pool = await wait_for(stalled, timeout=TIMEOUT, what="pool cap Stalled")
        await settle(running)
        pool = await read(kc, EPHEMERAL_POOLS, "cap", namespace)
        assert pool["status"]["phase"] == "ScalingUp"
        assert pool["status"]["message"] == text
        assert conditions(pool) == {"Ready": ("False", "MaxSizeReached", text),
                                    "Reconciling": ("False", "MaxSizeReached", text),
                                    "Stalled": ("True", "MaxSizeReached", text)}
        assert (await event_counts(kc, namespace, "MaxSizeReached")).get("cap") == 1
        # what a user's wait sees: Stalled holds now; Ready does not (docs/behaviour.md#pool-max-size-reached)
        assert (kubectl_wait(control_plane, namespace, "cap", "Stalled"),
                kubectl_wait(control_plane, namespace, "cap", "Ready")) == (True, False)

        await kc.merge_patch(EPHEMERAL_POOLS, "cap", {"spec": {"maxSize": 2}}, namespace)

        async def ready() -> dict[str, Any] | None:
            now = await read(kc, EPHEMERAL_POOLS, "cap", namespace)
            return now if conditions(now).get("Ready", ("",))[0] == "True" else None

        pool = await wait_for(ready, timeout=TIMEOUT, what="pool cap Ready after maxSize 2")
        assert pool["status"]["phase"] == "Steady"
        assert "message" not in pool["status"]
        assert {t: c[0] for t, c in conditions(pool).items()} == {"Ready": "True", "Reconciling": "False",
                                                                   "Stalled": "False"}


async def test_a_queued_allocation_has_its_status_written_once(kc: KubeClient, namespace: str) -> None:
    names = ["q1", "q2", "q3"]
    listed = msgspec.json.decode(await kc.list(EPHEMERAL_ALLOCATIONS, namespace))
    versions: dict[str, list[dict[str, Any]]] = defaultdict(list)

    async def record() -> None:
        async for event in kc.watch(EPHEMERAL_ALLOCATIONS, namespace,
                                    resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=300,
                                    inactivity_timeout=120):
            if event.type in ("ADDED", "MODIFIED"):
                obj = msgspec.json.decode(event.object)
                versions[obj["metadata"]["name"]].append(obj)

    async with anyio.create_task_group() as tg:
        tg.start_soon(record)
        async with both_running(kc, namespace) as running:
            # a pool that asks for no member: it matches, and never has a free member to give
            await kc.create(EPHEMERAL_POOLS, capped_pool("empty", 0, 0), namespace)
            for name in names:
                await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name, "empty", namespace), namespace)
            for name in names:
                await wait_phase(kc, namespace, name, "Queued")
            await settle(running)
            stored = {n: (await read(kc, EPHEMERAL_ALLOCATIONS, n, namespace))["metadata"]["resourceVersion"]
                      for n in names}

            async def seen() -> bool:  # the watch has delivered every stored version
                return all(versions[n] and versions[n][-1]["metadata"]["resourceVersion"] == stored[n]
                           for n in names)

            await wait_for(seen, timeout=TIMEOUT, what="the watch caught up")
        tg.cancel_scope.cancel()

    for name in names:
        statuses = [v.get("status") for v in versions[name]]
        writes = [after for before, after in zip([None, *statuses], statuses, strict=False) if after != before]
        assert [w["phase"] for w in writes if w is not None] == ["Queued"], name
    assert await event_counts(kc, namespace, "Queued") == dict.fromkeys(names, 1)
