"""Pool reconciler benchmark: a pool of M warm members, N allocations in a burst.

Against a private local control plane (etcd + kube-apiserver, no controller-manager) with the
tatara and Flux CRDs installed; the Process reconciler, the pool reconciler and the Flux stand-in
run in this process (as in the integration tests), so figures include their shared CPU. Measured:

- **fill**: pool created → M members Free (Attested, permanent, unbound);
- **burst**: first allocation create sent → every allocation ``Bound`` or ``Queued`` (seen by a
  watch here);
- **bind wait**: for each allocation that binds, create sent → first watch event showing
  ``Bound``; p50/p99;
- **double binds, checked**: after the burst settles, every Bound allocation names a distinct
  member, that member carries exactly that allocation's annotation, no member carries the
  annotation of an allocation that is not Bound to it, and each allocation has at most one
  ``Bound`` Event.

Usage: ``.venv/bin/python -m bench.pool_bench [--members 50] [--allocations 500] [--workers 4]``. Prints a
table; the goals (bind wait p99 <= 2 s for allocations that can bind at once, burst settled <= 5 s) beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from typing import Any

import anyio
import msgspec
from prometheus_client import CollectorRegistry

from bench.reconciler_bench import percentile, print_rows
from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared.domain import annotations as ann
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import EVENTS, NAMESPACES, KubeClient
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from tests.support.kube import install_crds, wait_for
from tools.controlplane import LocalControlPlane
from tools.crds import all_crds
from tools.standins.flux import FluxStandIn

NAMESPACE = "poolbench"
POOL = "warm"


class _Obj(msgspec.Struct):
    metadata: ObjectMeta
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}


def pool_doc(members: int) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "EphemeralPool", "metadata": {"name": POOL},
        "spec": {"desired": members, "desiredSize": members, "returnPolicy": "Keep", "maxAllocationTtl": "4h",
                 "template": {"aplicacao": {"chartRef": "demo", "version": "1.0.0"}, "ttl": "1h"}},
    }


def allocation_doc(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "EphemeralAllocation", "metadata": {"name": name},
        "spec": {"poolRef": {"name": POOL, "namespace": NAMESPACE}, "requestor": {"kind": "manual"}, "ttl": "30m"},
    }


def _free(m: _Obj) -> bool:
    return (m.status.get("phase") == "Attested" and "permanent" in (m.spec.get("lifetime") or {})
            and ann.ALLOCATION not in m.metadata.annotations)


def double_binds(allocations: list[_Obj], members: list[_Obj], events: Counter[str]) -> list[str]:
    """Every violation of exclusive binding found (empty: none)."""
    problems: list[str] = []
    by_member = {m.metadata.name: m for m in members}
    holders: Counter[str] = Counter()
    for a in allocations:
        name = a.metadata.name or ""
        if a.status.get("phase") != "Bound":
            continue
        member = (a.status.get("assignedProcess") or {}).get("name", "")
        holders[member] += 1
        held = by_member.get(member)
        if held is None or held.metadata.annotations.get(ann.ALLOCATION) != name:
            problems.append(f"{name} Bound to {member}, which does not carry its annotation")
    problems += [f"{m} assigned to {c} allocations" for m, c in holders.items() if c > 1]
    bound = {a.metadata.name for a in allocations if a.status.get("phase") == "Bound"}
    for m in members:
        owner = m.metadata.annotations.get(ann.ALLOCATION)
        if owner and owner not in bound:
            problems.append(f"{m.metadata.name} carries {owner}, which is not Bound")
    problems += [f"{a}: {c} Bound Events" for a, c in events.items() if c > 1]
    return problems


async def bench(control_plane: LocalControlPlane, members: int, n: int, workers: int = 4) -> dict[str, Any]:
    client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    process_config = ReconcilerConfig(watch_namespace=NAMESPACE, leader_elect=False, health_host="127.0.0.1",
                                      health_port=0)
    pool_config = PoolReconcilerConfig(watch_namespace=NAMESPACE, leader_elect=False, health_host="127.0.0.1",
                                       health_port=0, workers=workers)
    process = build_process(client, process_config, registry=CollectorRegistry(), handle_signals=False)
    registry = CollectorRegistry()
    pool = build_pool(client, pool_config, registry=registry, handle_signals=False)
    sent: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    settled: set[str] = set()
    all_settled = anyio.Event()
    filled = anyio.Event()

    def on_allocation(_type: Any, _old: _Obj | None, new: _Obj) -> None:
        name = new.metadata.name or ""
        phase = new.status.get("phase")
        if phase == "Bound" and name not in bound_at:
            bound_at[name] = time.monotonic()
        if phase in ("Bound", "Queued"):
            settled.add(name)
            if len(settled) >= n:
                all_settled.set()

    allocations: Informer[_Obj] = Informer(client, EPHEMERAL_ALLOCATIONS, _Obj, namespace=NAMESPACE)
    processes: Informer[_Obj] = Informer(client, PROCESSES, _Obj, namespace=NAMESPACE)
    allocations.add_handler(on_allocation)

    def on_member(_type: Any, _old: _Obj | None, _new: _Obj) -> None:
        if sum(1 for m in processes.objects() if _free(m)) >= members:
            filled.set()

    processes.add_handler(on_member)
    try:
        async with anyio.create_task_group() as tg:
            for run in (process.run, pool.run, allocations.run, processes.run,
                        FluxStandIn(client, namespace=NAMESPACE).run):
                tg.start_soon(run)
            t0 = time.monotonic()
            await client.create(EPHEMERAL_POOLS, pool_doc(members), NAMESPACE)
            await filled.wait()
            fill = time.monotonic() - t0
            limiter = anyio.CapacityLimiter(16)

            async def create(i: int) -> None:
                name = f"a{i:05d}"
                async with limiter:
                    sent[name] = time.monotonic()
                    await client.create(EPHEMERAL_ALLOCATIONS, allocation_doc(name), NAMESPACE)

            start = time.monotonic()
            async with anyio.create_task_group() as creators:
                for i in range(n):
                    creators.start_soon(create, i)
            created = time.monotonic() - start
            await all_settled.wait()
            burst = time.monotonic() - start

            async def idle() -> bool:
                return process.idle() and pool.idle()

            await wait_for(idle, timeout=120.0, what="both reconcilers idle")  # settle before the check
            listed_a = msgspec.json.decode(await client.list(EPHEMERAL_ALLOCATIONS, NAMESPACE), type=_List)
            listed_m = msgspec.json.decode(await client.list(PROCESSES, NAMESPACE), type=_List)
            items = msgspec.json.decode(await client.list(EVENTS, NAMESPACE))["items"]
            events = Counter(str((e.get("regarding") or e.get("involvedObject") or {}).get("name"))
                             for e in items if e.get("reason") == "Bound")
            problems = double_binds(listed_a.items, listed_m.items, events)
            pool.stop()
            process.stop()
            tg.cancel_scope.cancel()
    finally:
        await client.close()
    slowest = [(a, bound_at[a] - sent[a]) for a in bound_at if a in sent]
    waits = [w for _, w in slowest]
    return {"members": members, "n": n, "fill": fill, "created": created, "burst": burst, "waits": waits,
            "bound": len(bound_at), "problems": problems, "slowest": slowest,
            "conflicts": registry.get_sample_value("tatara_pool_binds_total", {"outcome": "conflict"}) or 0}


class _List(msgspec.Struct):
    items: list[_Obj]


def report(r: dict[str, Any]) -> None:
    rows = [
        ("members / allocations", f"{r['members']} / {r['n']}"),
        ("pool fill to all Free (s)", f"{r['fill']:.1f}"),
        ("creates sent (s)", f"{r['created']:.1f}"),
        ("burst: all Bound or Queued (s)", f"{r['burst']:.1f}  (goal ≤ 5 for 500 on 50)"),
        ("allocations Bound", f"{r['bound']}"),
        ("bind wait p50 (ms)", f"{1000 * statistics.median(r['waits'] or [0]):.0f}"),
        ("bind wait p99 (ms)", f"{1000 * percentile(r['waits'], 0.99):.0f}  (goal ≤ 2000)"),
        ("claims lost to a conflict (409)", f"{r['conflicts']:.0f}"),
        ("double binds (checked)", f"{len(r['problems'])}  (must be 0)"),
    ]
    print_rows(rows)
    slowest = sorted(r["slowest"], key=lambda x: -x[1])[:5]
    print("slowest binds:", ", ".join(f"{name} {1000 * wait:.0f} ms" for name, wait in slowest))
    for problem in r["problems"][:20]:
        print("  !", problem)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--allocations", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4, help="the pool reconciler's --workers (default 4)")
    args = parser.parse_args()
    with LocalControlPlane(controller_manager=False) as control_plane:
        install_crds(control_plane.kubeconfig, all_crds())
        result = asyncio.run(bench(control_plane, args.members, args.allocations, args.workers))
    report(result)


if __name__ == "__main__":
    main()
