"""An informer's initial sync of 10,000 ConfigMaps: the paginated LIST against the watch-list, side by side.

Against a private local control plane (etcd + kube-apiserver): ``--objects`` ConfigMaps (``--bytes`` of data
each) are created once; then, in ``--rounds`` alternating rounds, the API server is restarted (a fresh process:
its memory holds only the watch cache it rebuilds from etcd), left to settle, and one informer
(shared/kube/informer.py, ``watch_list=False`` or ``True``, a fresh client) syncs the namespace. Measured:

- **time to synced**: from ``Informer.run`` to ``has_synced`` (every object decoded and stored);
- **API server peak RSS**: VmRSS of kube-apiserver sampled every 2 ms from just before the sync until it is
  synced, minus the value just before (the memory the sync made it take).

Usage: ``.venv/bin/python -m bench.watch_list_bench [--objects 10000] [--bytes 1024] [--rounds 3]``. Prints a
table (medians over the rounds); nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec

from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from tools.controlplane import LocalControlPlane

NAMESPACE = "watch-list-bench"
PATHS = {"LIST": False, "watch-list": True}


class ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class PeakSampler:
    """VmRSS of ``pid`` every ``interval`` seconds in a thread, until stopped; the largest value seen."""

    def __init__(self, pid: int, interval: float = 0.002) -> None:
        self.pid, self.interval = pid, interval
        self.before = rss_kib(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_kib(self.pid))

    def stop(self) -> float:
        """Stop; the peak over the value at start, in MiB."""
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kib(self.pid))
        return (self.peak - self.before) / 1024


@dataclass
class Figures:
    seconds: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    before_mib: list[float] = field(default_factory=list)


async def create_many(client: KubeClient, count: int, size: int) -> None:
    sem = asyncio.Semaphore(32)
    blob = "x" * size

    async def one(i: int) -> None:
        async with sem:
            await client.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"blob": blob}}, NAMESPACE)

    await asyncio.gather(*(one(i) for i in range(count)))


async def sync_once(plane: LocalControlPlane, watch_list: bool, objects: int) -> tuple[float, float, float]:
    """(seconds to synced, API server RSS growth MiB, its RSS before MiB) of one informer's initial sync."""
    await anyio.to_thread.run_sync(plane.restart_apiserver)
    apiserver = plane._component("kube-apiserver").process
    assert apiserver is not None
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
        await client.request("GET", "/readyz")
        await client.list(CONFIG_MAPS, NAMESPACE, limit=1)  # the watch cache of ConfigMaps is built ...
        await asyncio.sleep(2.0)  # ... and the restart's garbage settles (a measurement pause, not a sync)
        informer = Informer(client, CONFIG_MAPS, ConfigMap, namespace=NAMESPACE, watch_list=watch_list)
        sampler = PeakSampler(apiserver.pid)
        async with anyio.create_task_group() as tg:
            start = time.perf_counter()
            tg.start_soon(informer.run)
            await informer.wait_synced()
            seconds = time.perf_counter() - start
            grown = sampler.stop()
            tg.cancel_scope.cancel()
        assert len(informer) == objects, (len(informer), objects)
        assert informer.synced_by == ("watch-list" if watch_list else "list"), informer.synced_by
    return seconds, grown, sampler.before / 1024


async def main_async(args: argparse.Namespace) -> None:
    figures = {name: Figures() for name in PATHS}
    with LocalControlPlane(controller_manager=False) as plane:
        async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await create_many(client, args.objects, args.bytes)
        for round_ in range(args.rounds):
            order = list(PATHS.items()) if round_ % 2 == 0 else list(reversed(PATHS.items()))
            for name, watch_list in order:
                seconds, grown, before = await sync_once(plane, watch_list, args.objects)
                figures[name].seconds.append(seconds)
                figures[name].rss_mib.append(grown)
                figures[name].before_mib.append(before)
                print(f"round {round_ + 1} {name:10} synced in {seconds:.3f} s, API server RSS "
                      f"{before:.1f} MiB +{grown:.1f} MiB", file=sys.stderr)
    print(f"{args.objects} ConfigMaps of {args.bytes} bytes, {args.rounds} rounds alternating (medians)")
    print(f"{'initial sync':12} {'to synced s':>12} {'API server RSS before MiB':>26} {'peak growth MiB':>16}")
    for name, f in figures.items():
        print(f"{name:12} {statistics.median(f.seconds):12.3f} {statistics.median(f.before_mib):26.1f} "
              f"{statistics.median(f.rss_mib):16.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--bytes", type=int, default=1024, help="data bytes per ConfigMap")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main_async(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
