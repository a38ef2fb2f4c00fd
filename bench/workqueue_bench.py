"""WorkQueue throughput: adds, duplicate adds and get+done per second for 100k keys with 8 workers.

    .venv/bin/python -m bench.workqueue_bench [--keys 100000] [--workers 8] [--repeat 3]

Each phase runs with and without the Prometheus metrics hook; figures are the best of ``--repeat`` runs
(ops per second, wall clock, asyncio backend). Handlers do nothing but one checkpoint, so this measures the
queue itself, not reconciles.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
from prometheus_client import CollectorRegistry

from shared.kube.metrics import RuntimeMetrics
from shared.kube.workqueue import WorkQueue
from tests.unit.kube.test_workqueue import worker


def new_queue(with_metrics: bool) -> WorkQueue[str]:
    if not with_metrics:
        return WorkQueue()
    return WorkQueue(metrics=RuntimeMetrics(CollectorRegistry()).workqueue("bench"))


async def noop(key: str) -> None:
    await anyio.lowlevel.checkpoint()


async def run_workers(q: WorkQueue[str], workers: int, handler: Callable[[str], Awaitable[None]]) -> None:
    """``workers`` loops of get → handler → done until the queue shuts down (what a Controller runs)."""
    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker, q, handler)


async def until_idle(q: WorkQueue[str]) -> None:
    """Return once every worker is blocked in ``get`` on an empty queue (no polling sleep)."""
    await anyio.wait_all_tasks_blocked()
    if len(q) or q.processing:
        raise RuntimeError(f"queue not idle: {len(q)} ready, {q.processing} processing")


async def drain(q: WorkQueue[str], workers: int) -> None:
    """Run ``workers`` workers until the queue is empty and idle, then shut it down."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_workers, q, workers, noop)
        await until_idle(q)
        await q.shutdown(drain=True)


async def phases(keys: list[str], workers: int, with_metrics: bool) -> dict[str, float]:
    rates: dict[str, float] = {}
    q = new_queue(with_metrics)
    t = time.perf_counter()
    for k in keys:
        q.add(k)
    rates["add (new key)"] = len(keys) / (time.perf_counter() - t)
    t = time.perf_counter()
    for k in keys:
        q.add(k)
    rates["add (already queued)"] = len(keys) / (time.perf_counter() - t)
    t = time.perf_counter()
    await drain(q, workers)
    rates[f"get+done ({workers} workers)"] = len(keys) / (time.perf_counter() - t)

    # Producer and workers together: every key added three times while workers consume.
    q = new_queue(with_metrics)
    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_workers, q, workers, noop)
        for _ in range(3):
            for i, k in enumerate(keys):
                q.add(k)
                if i % 64 == 0:
                    await anyio.lowlevel.checkpoint()
        await until_idle(q)
        await q.shutdown(drain=True)
    rates["mixed: 3 adds/key + get+done, per add"] = 3 * len(keys) / (time.perf_counter() - t)

    q = new_queue(with_metrics)
    t = time.perf_counter()
    for k in keys:
        q.add_rate_limited(k)
    rates["add_rate_limited"] = len(keys) / (time.perf_counter() - t)
    return rates


def best_of(repeat: int, run: Callable[[], dict[str, float]]) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, rate in run().items():
            best[name] = max(best.get(name, 0.0), rate)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    keys = [f"ns-{i % 100}/obj-{i}" for i in range(args.keys)]
    print(f"WorkQueue, {args.keys} keys, {args.workers} workers, best of {args.repeat} (ops/s)")

    def run(with_metrics: bool) -> dict[str, float]:
        return anyio.run(phases, keys, args.workers, with_metrics, backend="asyncio")

    results = {m: best_of(args.repeat, functools.partial(run, m)) for m in (False, True)}
    # the limit of each phase is the queue without the metrics hook; the last column is the share kept
    print(f"{'phase':42} {'no metrics':>12} {'metrics':>12} {'of limit':>9}")
    for name in results[False]:
        limit, hooked = results[False][name], results[True][name]
        print(f"{name:42} {limit:12,.0f} {hooked:12,.0f} {hooked / limit:9.2f}")


if __name__ == "__main__":
    main()
