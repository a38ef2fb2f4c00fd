"""Pool benchmark (issue 6 "Speed"): 500 allocations in a burst against a pool of 50 warm members.

Against a private local control plane (etcd + kube-apiserver), with the Process reconciler, the
pool reconciler and the Flux stand-in running in this process (as the integration tests run them):

1. a pool of 50 members fills; the clock starts when all 50 are free (Attested, permanent);
2. 500 allocations are created in a burst (32 in flight);
3. measured: seconds until every allocation is Bound or Queued; p50/p99 of (``status.allocatedAt``
   − create request sent) for those that bound; and double binds — checked: two Bound allocations
   naming one member, or a member whose ``allocation`` annotation names another allocation.

Usage: ``.venv/bin/python -m bench.pool_bench [--members 50] [--allocations 500]``. Prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec
from prometheus_client import CollectorRegistry

from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared import annotations as ann
from shared.controlplane import LocalControlPlane
from shared.kube.client import NAMESPACES, KubeClient, Resource
from shared.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from tests.support.flux_standin import FluxStandIn
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds

ROOT = Path(__file__).resolve().parents[1]
NS = "pool-bench"


async def list_all(client: KubeClient, resource: Resource) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = msgspec.json.decode(await client.list(resource, NS, limit=1000, continue_=token))
        items += page["items"]
        token = page["metadata"].get("continue") or None
        if not token:
            return items


def is_free(member: dict[str, Any]) -> bool:
    annotations = member["metadata"].get("annotations", {})
    return (member.get("status", {}).get("phase") == "Attested" and "permanent" in member["spec"].get("lifetime", {})
            and ann.ALLOCATION not in annotations)


async def run(members: int, allocations: int) -> None:
    with LocalControlPlane(controller_manager=False) as plane:
        docs = [d for p in sorted((ROOT / "charts").glob("*/crds/*.yaml")) for d in load_yaml_docs(p)]
        install_crds(plane.kubeconfig, [*docs, *third_party_crds()])
        client = await KubeClient.from_kubeconfig(plane.kubeconfig)
        await client.create(NAMESPACES, {"metadata": {"name": NS}})
        process_config = ReconcilerConfig(watch_namespace=NS, leader_elect=False, health_host="127.0.0.1",
                                          health_port=0, table_status_interval=2.0)
        pool_config = PoolReconcilerConfig(watch_namespace=NS, leader_elect=False, health_host="127.0.0.1",
                                           health_port=0)
        process = build_process(client, process_config, registry=CollectorRegistry(), handle_signals=False)
        pool = build_pool(client, pool_config, registry=CollectorRegistry(), handle_signals=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(process.run)
            tg.start_soon(pool.run)
            tg.start_soon(FluxStandIn(client, namespace=NS).run)
            fill_started = time.monotonic()
            await client.create(EPHEMERAL_POOLS, {
                "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "EphemeralPool", "metadata": {"name": "warm"},
                "spec": {"desiredSize": members, "desired": members, "returnPolicy": "Keep",
                         "maxAllocationTtl": "4h",
                         "template": {"aplicacao": {"chartRef": "demo", "version": "1.0.0"}, "ttl": "1h"}},
            }, NS)
            while sum(is_free(m) for m in await list_all(client, PROCESSES)) < members:  # noqa: ASYNC110
                await asyncio.sleep(0.5)
            fill_seconds = time.monotonic() - fill_started

            sent: dict[str, float] = {}
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                async with sem:
                    name = f"a-{i:04d}"
                    sent[name] = time.time()
                    await client.create(EPHEMERAL_ALLOCATIONS, {
                        "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "EphemeralAllocation",
                        "metadata": {"name": name},
                        "spec": {"poolRef": {"name": "warm", "namespace": NS}, "requestor": {"kind": "manual"},
                                 "ttl": "30m"},
                    }, NS)

            burst_started = time.monotonic()
            await asyncio.gather(*(create(i) for i in range(allocations)))
            while True:
                items = await list_all(client, EPHEMERAL_ALLOCATIONS)
                phases = Counter(a.get("status", {}).get("phase") for a in items)
                if phases["Bound"] + phases["Queued"] == allocations:
                    break
                await asyncio.sleep(0.25)
            settle_seconds = time.monotonic() - burst_started

            bound = [a for a in items if a["status"]["phase"] == "Bound"]
            waits = sorted(
                (datetime.fromisoformat(a["status"]["allocatedAt"].replace("Z", "+00:00")).timestamp()
                 - sent[a["metadata"]["name"]]) * 1000 for a in bound)
            assigned = Counter(a["status"]["assignedProcess"]["name"] for a in bound)
            member_owner = {m["metadata"]["name"]: m["metadata"].get("annotations", {}).get(ann.ALLOCATION)
                            for m in await list_all(client, PROCESSES)}
            double = sum(n - 1 for n in assigned.values() if n > 1) + sum(
                1 for a in bound
                if (member_owner.get(a["status"]["assignedProcess"]["name"]) or "").rpartition("/")[2]
                != a["metadata"]["name"])
            pool.stop()
            process.stop()
            tg.cancel_scope.cancel()
        await client.close()

    print(f"pool of {members} filled in {fill_seconds:.1f} s")
    print(f"{'allocations':>11} {'bound':>6} {'queued':>7} {'settle s':>9} {'wait p50 ms':>12} {'wait p99 ms':>12} "
          f"{'double binds':>13}")
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))] if waits else 0.0
    print(f"{allocations:11d} {len(bound):6d} {phases['Queued']:7d} {settle_seconds:9.1f} "
          f"{statistics.median(waits) if waits else 0.0:12.0f} {p99:12.0f} {double:13d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--allocations", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(run(args.members, args.allocations))


if __name__ == "__main__":
    main()
