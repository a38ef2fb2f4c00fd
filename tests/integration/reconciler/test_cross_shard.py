"""Cross-shard reads against the real API server (docs/architecture.md#cross-shard-reads): two sharded
reconcilers in one namespace (``--watch-label-selector=sharding.fluxcd.io/key=a`` and ``=b``), a Flux
stand-in judging the children. A Process of shard ``a`` may name one of shard ``b``:

- its ``dependsOn`` is met once the other shard's Process reaches the stage it asks for, woken by the other
  shard's change (HEARTBEAT is far beyond the waits);
- a child of shard ``a`` whose parent PID is held by a Process of shard ``b`` gets its PID under it, where a
  lookup in its own shard alone would stall it ``ParentNotFound``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from shared.domain.resources import PROCESSES
from shared.domain.sharding import SHARD_KEY
from shared.kube.client import KubeClient
from tests.integration.reconciler.conftest import NO_HEARTBEAT
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.support.kube import wait_for
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
SHARDS = ("a", "b")


@asynccontextmanager
async def two_shards(client: KubeClient, namespace: str) -> AsyncIterator[None]:
    """A reconciler per shard of :data:`SHARDS` (own Lease-free instance, one shared table Lease in
    ``namespace``) and one Flux stand-in."""
    async with anyio.create_task_group() as tg:
        managers = []
        for shard in SHARDS:
            config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                                      health_port=0, table_status_interval=0.2, heartbeat_seconds=NO_HEARTBEAT,
                                      watch_label_selector=f"{SHARD_KEY}={shard}",
                                      leader_election_namespace=namespace)
            manager = build(client, config, identity=f"shard-{shard}", registry=CollectorRegistry(),
                            handle_signals=False)
            managers.append(manager)
            tg.start_soon(manager.run)
        tg.start_soon(FluxStandIn(client, namespace=namespace).run)
        try:
            yield
        finally:
            for manager in managers:
                manager.stop()
            tg.cancel_scope.cancel()


def on_shard(doc: dict[str, Any], shard: str) -> dict[str, Any]:
    doc["metadata"].setdefault("labels", {})[SHARD_KEY] = shard
    return doc


async def status(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = (await read(kc, PROCESSES, name, ns)).get("status") or {}
    return found


async def test_a_dependency_on_another_shard_is_met_when_it_attests(kc: KubeClient, namespace: str) -> None:
    async with two_shards(kc, namespace):
        waiting = on_shard(flux_process("waiting"), "a")
        waiting["spec"]["dependsOn"] = [{"name": "needed", "mustReach": "Attested"}]
        await kc.create(PROCESSES, waiting, namespace)
        needed = on_shard(flux_process("needed"), "b")
        needed["spec"]["suspended"] = True  # held back until "waiting" is seen waiting for it
        await kc.create(PROCESSES, needed, namespace)

        async def forking_without_pid() -> bool:
            found = await status(kc, namespace, "waiting")
            return found.get("phase") == "Forking" and "pid" not in found

        await wait_for(forking_without_pid, timeout=TIMEOUT, what="waiting held in Forking by its dependency")
        await kc.merge_patch(PROCESSES, "needed", {"spec": {"suspended": False}}, namespace)

        async def both_attested() -> bool:
            phases = [(await status(kc, namespace, n)).get("phase") for n in ("needed", "waiting")]
            return phases == ["Attested", "Attested"]

        await wait_for(both_attested, timeout=TIMEOUT, what="needed (shard b), then waiting (shard a), Attested")


async def test_a_child_gets_its_pid_under_a_parent_on_another_shard(kc: KubeClient, namespace: str) -> None:
    async with two_shards(kc, namespace):
        await kc.create(PROCESSES, on_shard(flux_process("parent"), "b"), namespace)

        async def parent_pid() -> str | None:
            found = await status(kc, namespace, "parent")
            pid = found.get("pid")
            return str(pid) if pid and found.get("phase") == "Attested" else None

        pid = await wait_for(parent_pid, timeout=TIMEOUT, what="parent (shard b) Attested with a PID")
        child = on_shard(flux_process("child"), "a")
        child["spec"]["identity"] = {"parent": pid}
        await kc.create(PROCESSES, child, namespace)

        async def child_pid() -> str | None:
            found = await status(kc, namespace, "child")
            child_pid = found.get("pid")
            return str(child_pid) if child_pid and found.get("phase") == "Attested" else None

        got = await wait_for(child_pid, timeout=TIMEOUT, what="child (shard a) Attested with a PID")
        assert got.startswith(f"{pid}."), (got, pid)
        conditions = {c["type"]: c for c in (await status(kc, namespace, "child")).get("conditions") or []}
        assert conditions.get("Stalled", {}).get("reason") != "ParentNotFound"
