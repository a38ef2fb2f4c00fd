"""Controller-runtime benchmark: our toy operator against the bare client (the limit) and kopf.

Against a private local control plane (etcd + kube-apiserver), for each contender in turn:

1. **throughput** — 5,000 ConfigMaps exist before the operator starts; seconds from
   process start until every one carries the annotation, as a watch in this process sees it
   (:class:`AnnotationWatch`) → objects reconciled per second;
   CPU seconds of the operator process (user+system, from /proc) per 1,000 reconciles;
2. **latency** — with the operator idle, 200 ConfigMaps are created 10 ms apart; the
   operator prints the wall time each reconcile starts → p50/p99 of
   (reconcile start − create request sent), i.e. API write + watch delivery + queueing;
3. **memory** — 5,000 more ConfigMaps (10,000 in all) are created and reconciled; RSS of
   the operator process with 10,000 objects cached.

The **inproc** contender is the limit: :func:`bench.bare_client.annotate_all` (one paginated LIST, then
``--workers`` concurrent merge patches, no watch/queue/cache) inside this process, so it pays no
interpreter start and no imports; it is timed to its last patch's answer. The **bare** contender is the
same code as a subprocess (``python -m bench.bare_client``), timed as the operators are, start included:
a second line. Both run the throughput phase only. For ours the table also gives the time from exec to
its first reconcile and the rate after it (objects / (all annotated − first reconcile)), and each
operator's RSS with one object (started, nothing else cached). The table ends with ``ours / inproc``,
``ours / bare`` and ``ours / kopf``.

Usage: ``.venv/bin/python -m bench.controller_bench [--objects 5000] [--workers 32] [--only inproc,bare,ours,kopf]
[--rounds 3]`` (on a shared machine, several alternating rounds keep a change of load from favouring one)
(kopf: ``pip install -e '.[bench]'``). Prints a table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient, WatchBroken, WatchStalled
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all
from tools.controlplane import LocalControlPlane

ROOT = Path(__file__).resolve().parents[1]
SEEN = "toy.tatara.test/seen"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class _CM(msgspec.Struct):
    metadata: ObjectMeta


_cm_decoder = msgspec.json.Decoder(_CM)


@dataclass
class Figures:
    name: str
    objects_per_second: float = 0.0
    cpu_per_1000: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    rss_mib: float = 0.0
    rss_before_mib: float = 0.0
    first_reconcile_s: float = 0.0
    """ours: seconds from exec to the first reconcile's start."""
    steady_per_second: float = 0.0
    """ours: objects per second from the first reconcile's start until every object is annotated."""
    starts: dict[str, float] = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def annotated_count(client: KubeClient, namespace: str) -> int:
    listing = await list_all(client, CONFIG_MAPS, _cm_decoder.decode, namespace, page_size=2000)
    return sum(1 for cm in listing.items if SEEN in cm.metadata.annotations)


async def create_many(client: KubeClient, namespace: str, start: int, count: int) -> None:
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            await client.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"value": str(i)}}, namespace)

    await asyncio.gather(*(one(i) for i in range(start, start + count)))


class AnnotationWatch:
    """The names of a namespace's ConfigMaps that carry the annotation, kept by one watch-list (the state, then
    every change) in this process: how the subprocess contenders are timed.

    It replaced a LIST of every object four times a second, which at 10,000 objects cost the API server, on
    the same two cores, a share the in-process limit (timed by its own last answer) never paid; a watch
    costs it one more receiver of events it encodes anyway. Use as an async context manager: entered once
    the initial state is in."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client, self.namespace = client, namespace
        self.annotated: set[str] = set()
        self._changed = asyncio.Event()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AnnotationWatch:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._synced.wait(), 120)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        version = ""
        while True:
            with contextlib.suppress(WatchBroken, WatchStalled):
                async for event in self.client.watch(CONFIG_MAPS, self.namespace, resource_version=version,
                                                     timeout_seconds=3600, inactivity_timeout=120,
                                                     send_initial_events=not version):
                    meta = _cm_decoder.decode(event.object).metadata
                    version = meta.resource_version or version
                    if event.type == "BOOKMARK":
                        if meta.annotations.get("k8s.io/initial-events-end") == "true":
                            self._synced.set()
                    elif event.type != "DELETED" and SEEN in meta.annotations:
                        self.annotated.add(meta.name or "")
                        self._changed.set()

    async def wait_for(self, total: int, timeout: float = 900) -> None:
        """Return once ``total`` objects carry the annotation. Raises TimeoutError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while len(self.annotated) < total:
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.namespace}: {len(self.annotated)} of {total} annotated after {timeout} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


async def wait_for_starts(figures: Figures, keys: list[str], timeout: float = 30) -> None:
    """Return once ``figures`` holds a START line of every key (the operator writes them every 50 ms)."""
    deadline = time.monotonic() + timeout
    while not all(key in figures.starts for key in keys):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no START line for {sum(k not in figures.starts for k in keys)} keys")
        await asyncio.sleep(0.05)  # polls a dict the reader thread fills


PROFILE: Path | None = None
"""``--profile DIR``: run our operator under py-spy, collapsed stacks to ``DIR/ours.txt``."""


def start_operator(kind: str, plane: LocalControlPlane, namespace: str, workers: int) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
    profiler: list[str] = []
    if PROFILE is not None and kind in ("ours", "bare"):
        PROFILE.mkdir(parents=True, exist_ok=True)
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        profiler = [py_spy, "record", "--format", "raw", "--rate", "250", "-o", str(PROFILE / f"{kind}.txt"), "--"]
    if kind == "ours":
        cmd = [sys.executable, "-m", "tests.support.toy_operator", "--kubeconfig", str(plane.kubeconfig),
               "--namespace", namespace, "--workers", str(workers), "--print-starts"]
    elif kind == "bare":
        cmd = [sys.executable, "-m", "bench.bare_client", "--kubeconfig", str(plane.kubeconfig),
               "--namespace", namespace, "--concurrency", str(workers)]
    else:
        cmd = [sys.executable, "-m", "kopf", "run", "--standalone", "--quiet", "--namespace", namespace,
               str(ROOT / "bench" / "kopf_toy.py")]
    return subprocess.Popen(profiler + cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def collect_starts(proc: subprocess.Popen[str], figures: Figures) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "START":
                figures.starts.setdefault(parts[1], float(parts[2]))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


async def run_bare_inproc(plane: LocalControlPlane, client: KubeClient, objects: int, workers: int,
                          round_: int = 0) -> Figures:
    """Throughput only, the limit: the bare client's work inside this process (no interpreter start, no
    imports, no watch, no cache), with a fresh client on this loop and nothing else running in the
    process. Timed to its last patch's answer, when every object carries the annotation (one LIST checks
    it afterwards): the polling the operators are timed by would share this interpreter, and its LISTs of
    every object cost the contender as much as a quarter of its CPU."""
    from bench.bare_client import annotate_all

    namespace = f"bench-inproc-{round_}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await create_many(client, namespace, 0, objects)
    figures = Figures("inproc")
    cpu = time.process_time()
    started = time.monotonic()
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as bare:
        await annotate_all(bare, namespace, workers)
    elapsed = time.monotonic() - started
    figures.cpu_per_1000 = (time.process_time() - cpu) / objects * 1000
    annotated = await annotated_count(client, namespace)
    if annotated != objects:
        raise RuntimeError(f"the in-process bare client left {objects - annotated} objects unannotated")
    figures.objects_per_second = objects / elapsed
    return figures


async def run_bare(plane: LocalControlPlane, client: KubeClient, objects: int, workers: int,
                   round_: int = 0) -> Figures:
    """Throughput only: the bare client exits when it has patched every object."""
    namespace = f"bench-bare-{round_}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await create_many(client, namespace, 0, objects)
    figures = Figures("bare")
    async with AnnotationWatch(client, namespace) as watch:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = start_operator("bare", plane, namespace, workers)
        await watch.wait_for(objects)  # measured as the operators are, by the same watch
        elapsed = time.monotonic() - started
    code = await asyncio.to_thread(proc.wait)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise RuntimeError(f"bare client exited with {code}")
    figures.objects_per_second = objects / elapsed
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures.cpu_per_1000 = cpu / objects * 1000
    return figures


async def rss_with_one_object(kind: str, plane: LocalControlPlane, client: KubeClient, workers: int) -> float:
    """RSS of a freshly started operator that has cached and reconciled one object (the "before objects"
    figure: what its start, imports and runtime cost)."""
    namespace = f"bench-{kind}-one"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await create_many(client, namespace, 0, 1)
    async with AnnotationWatch(client, namespace) as watch:
        proc = start_operator(kind, plane, namespace, workers)
        try:
            await watch.wait_for(1)
            return rss_mib(proc.pid)
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """End a contender: SIGINT under py-spy (it writes its profile on SIGINT, not on SIGTERM), else SIGTERM."""
    proc.send_signal(signal.SIGINT) if PROFILE is not None else proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run_one(kind: str, plane: LocalControlPlane, client: KubeClient, objects: int, workers: int,
                  round_: int = 0) -> Figures:
    """One contender once; rounds after the first (``round_`` > 0) measure throughput only."""
    if kind == "bare":
        return await run_bare(plane, client, objects, workers, round_)
    if kind == "inproc":
        return await run_bare_inproc(plane, client, objects, workers, round_)
    figures = Figures(kind)
    if round_ == 0:
        figures.rss_before_mib = await rss_with_one_object(kind, plane, client, workers)
    namespace = f"bench-{kind}-{round_}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await create_many(client, namespace, 0, objects)
    async with AnnotationWatch(client, namespace) as watch:
        started = time.monotonic()
        exec_wall = time.time()
        proc = start_operator(kind, plane, namespace, workers)
        collect_starts(proc, figures)
        try:
            await watch.wait_for(objects)
            elapsed = time.monotonic() - started
            done_wall = time.time()
            figures.objects_per_second = objects / elapsed
            figures.cpu_per_1000 = cpu_seconds(proc.pid) / objects * 1000
            if kind == "ours":  # ours prints each reconcile's start
                await wait_for_starts(figures, [f"{namespace}/cm-0"])
                first = min(figures.starts.values()) - exec_wall
                figures.first_reconcile_s = first
                figures.steady_per_second = objects / (done_wall - exec_wall - first)
            if round_ > 0:
                return figures

            created_at: dict[str, float] = {}
            for i in range(objects, objects + 200):
                created_at[f"{namespace}/cm-{i}"] = time.time()  # the watch event can beat the create response
                await client.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"value": str(i)}},
                                    namespace)
                await asyncio.sleep(0.01)
            await watch.wait_for(objects + 200)
            await wait_for_starts(figures, list(created_at))
            latencies = sorted((figures.starts[k] - t) * 1000 for k, t in created_at.items())
            figures.p50_ms = statistics.median(latencies)
            figures.p99_ms = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]

            remaining = 10_000 - objects - 200
            if remaining > 0:
                await create_many(client, namespace, objects + 200, remaining)
                await watch.wait_for(10_000)
            figures.rss_mib = rss_mib(proc.pid)
        finally:
            stop(proc)
    return figures


async def main_async(args: argparse.Namespace) -> None:
    kinds = args.only.split(",") if args.only else ["inproc", "bare", "ours", "kopf"]
    runs: dict[str, list[Figures]] = {kind: [] for kind in kinds}
    with LocalControlPlane(controller_manager=False) as plane:
        client = await KubeClient.from_kubeconfig(plane.kubeconfig)
        try:
            for round_ in range(args.rounds):  # contenders alternate, so a load change hits them all alike
                for kind in kinds:
                    runs[kind].append(await run_one(kind, plane, client, args.objects, args.workers, round_))
        finally:
            await client.close()
    results = {kind: _median(figures) for kind, figures in runs.items()}
    print(f"{args.objects} objects, {args.workers} workers, medians of {args.rounds} round(s)")
    print(f"{'operator':8} {'objects/s':>10} {'CPU s/1000':>11} {'p50 ms':>8} {'p99 ms':>8} {'RSS MiB @1':>11} "
          f"{'RSS MiB @10k':>13}")
    for f in results.values():
        latency = f"{f.p50_ms:8.1f} {f.p99_ms:8.1f}" if f.starts else f"{'-':>8} {'-':>8}"
        before = f"{f.rss_before_mib:11.1f}" if f.rss_before_mib else f"{'-':>11}"
        rss = f"{f.rss_mib:13.1f}" if f.rss_mib else f"{'-':>13}"
        print(f"{f.name:8} {f.objects_per_second:10.1f} {f.cpu_per_1000:11.2f} {latency} {before} {rss}")
    if args.rounds > 1:
        for kind, figures in runs.items():
            print(f"{kind} objects/s per round: {', '.join(f'{f.objects_per_second:.0f}' for f in figures)}")
    ours = results.get("ours")
    if ours is not None and ours.first_reconcile_s:
        firsts = ", ".join(f"{f.first_reconcile_s:.2f}" for f in runs["ours"])
        steady = ", ".join(f"{f.steady_per_second:.0f}" for f in runs["ours"])
        print(f"ours: exec -> first reconcile {firsts} s; after it {steady} objects/s (per round)")
    for other, label in (("inproc", "the limit: bare client in this process; goal >= 0.9"),
                         ("bare", "bare client as a subprocess, start included"), ("kopf", "kopf")):
        if ours is not None and other in results:
            ratio = ours.objects_per_second / results[other].objects_per_second
            print(f"ours / {other}: {ratio:.2f}x  ({label}; medians of {args.rounds} round(s))")
    if ours is not None and "inproc" in results and ours.steady_per_second:
        ratio = statistics.median(f.steady_per_second for f in runs["ours"]) / results["inproc"].objects_per_second
        print(f"ours after its first reconcile / inproc: {ratio:.2f}x")


def _median(figures: list[Figures]) -> Figures:
    """The first round's figures with throughput and CPU replaced by the medians over all rounds."""
    return dataclasses.replace(figures[0],
                               objects_per_second=statistics.median(f.objects_per_second for f in figures),
                               cpu_per_1000=statistics.median(f.cpu_per_1000 for f in figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=32,
                        help="our operator's workers and the bare client's concurrent patches (the same number)")
    parser.add_argument("--only", help="comma-separated subset of inproc,bare,ours,kopf (default: all four)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the contenders this many times; throughput is the median (latency and "
                             "memory come from the first round)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run ours and bare under py-spy (pip install -e '.[bench]'); collapsed stacks in DIR")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
