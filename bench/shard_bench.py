"""Shard benchmark: the Process reconciler with 1, 2 and 3 instances (static sharding) on one API server.

One private control plane (etcd + kube-apiserver, no controller-manager) with the tatara and Flux CRDs, and in
**one run** of this script, one measurement per setup, side by side, so the figures compare as ratios. Each
setup gets a fresh namespace; its ``tatara-reconciler`` instances run as OS processes (``python -m
reconciler.main --leader-elect=false --watch-namespace NS --controller-namespace NS``, Flux's sharding
convention: instance *j* of *k* with ``--watch-label-selector=sharding.fluxcd.io/key=shard<j>``), the Flux
stand-in (``tools/standins/flux.py``) runs in this process and marks every Kustomization Ready at once. N
flux-intent Processes (``--processes``) are created, labelled ``sharding.fluxcd.io/key=shard<j>`` round-robin
over the *k* shards, and the run waits until all are ``Attested`` (seen by a watch here).

**The 1-instance baseline runs as one shard** (``sharding.fluxcd.io/key=shard1``, every Process labelled
``shard1``), not without a selector: then the 1, 2 and 3-instance runs take the same code path per instance
(a selected cache and the every-Process cache, PID blocks of 32, the ProcessTable writer elected by its Lease,
cross-shard reads), and the ratio is what adding instances does, not what switching sharding on costs. That
cost is the extra row ``1 (no selector)``: one instance as deployed without sharding (one cache, one PID per
bump, the table writer under the instance itself), unlabelled Processes; ``--no-unsharded`` leaves it out.

Measured, per setup:

- **throughput**: N / (first create sent → the last Process ``Attested``), Processes per second, and its ratio
  to the 1-instance (one shard) run of the same round and ``--pid-block-size``;
- **API requests per Process**: the reconcilers' own client counter ``rest_client_requests_total`` (each
  instance's ``/metrics``; ``shared/kube/metrics.py``), summed over the instances, after all are Attested and
  3 s more (one ProcessTable status write) minus before the first create, divided by N. These are the
  reconcilers' requests only (not this script's creates and watches, nor the stand-in's writes); they include
  the table Lease's renewals and retries, a few per second over all instances; beside it the Process
  reconciles per Process over the same window (``controller_runtime_reconcile_total``) by result;
- **PID-table contention**: lost bumps per PID allocated: ``tatara_pid_bump_races_total`` (``reconciler/pid.py``;
  a lost bump is a JSON-patch ``test`` that failed, 422, or a 409), summed over the instances, divided by the
  number of Processes holding a PID. Beside it, from the API server's own ``apiserver_request_total`` (its
  ``/metrics``), the ``nextSequence`` bumps: PATCHes of the ProcessTable's main resource (not ``/status``) per
  PID, won (2xx) and lost (4xx), which checks the counter. The block size in effect is shown: the binary's
  default (32 with a selector, 1 without) unless ``--pid-block-sizes`` asks for more (``0,1``: the default and
  one number per bump, as a second set of rows, to show what blocks save); every PID is checked unique;
- **CPU per Process**: user + system CPU of every reconciler instance over the create → all-Attested window
  (``/proc/<pid>/stat``), summed, divided by N, in ms; and **where the two cores went** over that window, in
  cores (CPU seconds / wall seconds): the reconcilers (sum and busiest one), kube-apiserver, etcd, this process
  (watches, creates, the stand-in) and the whole machine (``/proc/stat``, other work included). A machine near
  its core count with the API server and etcd taking the largest share says the API server, not the
  reconcilers, is the limit.

Like every benchmark here it asserts nothing: it prints a table whose baseline (the 1-instance run) is measured
in the same run. ``--rounds R`` repeats every setup R times, in reverse order every other round (the store grows
with each run's Processes, which stay: nothing runs to delete them), each row against the baseline of its round.

Usage: ``.venv/bin/python -m bench.shard_bench [--processes 300] [--instances 1,2,3] [--pid-block-sizes 0,1]
[--rounds 1] [--no-unsharded]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import msgspec
from prometheus_client.parser import text_string_to_metric_families

from bench.reconciler_bench import CLK_TCK, cpu_seconds, scrape_requests
from reconciler.config import pid_block_size
from shared.domain.resources import PROCESSES
from shared.domain.sharding import SHARD_KEY, shard_selector
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import install_crds
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds
from tools.processes import stop_process_groups
from tools.standins.flux import FluxStandIn
from tools.up import Daemon, _start, ensure_namespace, wait_ready

SETTLE_BEFORE = 3.0
"""Seconds between the instances answering ``/readyz`` and the first create: their startup lists, watches and
table reads are not charged to Processes."""
SETTLE_AFTER = 3.0
"""Seconds after the last Attested before the request counters are read: one ProcessTable status write."""
CREATORS = 16
"""Creates in flight at once (as ``reconciler_bench``)."""


@dataclass(frozen=True)
class Setup:
    """One measured configuration: ``instances`` reconcilers, sharded (instance j selects ``shard<j>``) or one
    instance without a selector; ``block`` is ``--pid-block-size`` (0: the binary's default)."""

    instances: int
    sharded: bool = True
    block: int = 0

    @property
    def shards(self) -> list[str | None]:
        """Each instance's shard; None: no selector."""
        return [f"shard{j}" for j in range(1, self.instances + 1)] if self.sharded else [None]

    @property
    def block_in_effect(self) -> int:
        return pid_block_size(self.block, sharded=self.sharded)

    @property
    def baseline(self) -> Setup:
        """The run this one's throughput is a ratio to: one shard, the same ``--pid-block-size``."""
        return Setup(1, True, self.block)

    @property
    def name(self) -> str:
        return f"{self.instances}" if self.sharded else "1 (no selector)"

    @property
    def slug(self) -> str:
        return f"{self.instances}{'s' if self.sharded else 'u'}-b{self.block}"


@dataclass
class Figures:
    """What one run measured (counter and CPU figures are differences over the run's window)."""

    setup: Setup
    round: int
    n: int
    load: float
    """The 1-minute load average when the run started (``/proc/loadavg``)."""
    wall: float
    attested: int
    requests: dict[str, float] = field(default_factory=dict)
    """``"<method> <code>"`` → requests, summed over the instances."""
    reconciles: dict[str, float] = field(default_factory=dict)
    """Process reconciles by result (``success``, ``requeue_after``, ``error``), summed over the instances."""
    races: float = 0.0
    bumps: dict[str, float] = field(default_factory=dict)
    """Status code → PATCHes of the ProcessTable's main resource, from the API server."""
    cpu: dict[str, float] = field(default_factory=dict)
    """Seconds of CPU over create → all Attested: ``reconcilers``, ``busiest``, ``kube-apiserver``, ``etcd``,
    ``bench``, ``machine``."""
    pids: int = 0
    unique_pids: int = 0

    @property
    def done(self) -> bool:
        return self.attested >= self.n

    @property
    def rate(self) -> float:
        return self.n / self.wall if self.done else float("nan")


class _Phase(msgspec.Struct):
    metadata: ObjectMeta
    status: dict[str, Any] = {}


# ── reading counters ─────────────────────────────────────────────────────────────


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` of a Prometheus text exposition, with their labels (the other lines are
    skipped unparsed: the API server's exposition is several MB)."""
    lines = [line for line in text.splitlines() if line.startswith((f"{name}{{", f"{name} "))]
    families = text_string_to_metric_families("\n".join(lines) + "\n")
    return [(dict(s.labels), s.value) for family in families for s in family.samples if s.name == name]


async def instance_counts(port: int) -> dict[str, float]:
    """One instance's requests (``"<method> <code>"``) and Process reconciles (``"reconcile <result>"``), as
    ``reconciler_bench`` reads them, and its lost PID bumps (``"races"``)."""
    counts = await scrape_requests(port)
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as resp:
        text = await resp.text()
    counts["races"] = sum(v for _, v in samples(text, "tatara_pid_bump_races_total"))
    return counts


async def table_bumps(client: KubeClient) -> dict[str, float]:
    """Status code → the API server's count of PATCHes of ProcessTables' main resource (the ``nextSequence``
    bumps; the status writer patches ``/status``)."""
    text = (await client.request("GET", "/metrics")).decode()
    out: dict[str, float] = {}
    for labels, value in samples(text, "apiserver_request_total"):
        if (labels.get("resource"), labels.get("verb"), labels.get("subresource")) == ("processtables", "PATCH", ""):
            out[labels.get("code", "")] = out.get(labels.get("code", ""), 0.0) + value
    return out


async def counters(client: KubeClient, daemons: Sequence[Daemon]) -> tuple[dict[str, float], dict[str, float]]:
    """The instances' counts summed, and the API server's table bumps."""
    total: dict[str, float] = {}
    for d in daemons:
        for key, value in (await instance_counts(d.port)).items():
            total[key] = total.get(key, 0.0) + value
    return total, await table_bumps(client)


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting for I/O) since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / CLK_TCK


def cpu_now(plane: LocalControlPlane, daemons: Sequence[Daemon]) -> dict[str, float]:
    """CPU seconds so far of each instance (``instance<i>``), kube-apiserver, etcd, this process, the machine."""
    out = {f"instance{i}": cpu_seconds(d.proc.pid) for i, d in enumerate(daemons)}
    for component in ("kube-apiserver", "etcd"):
        proc = plane._component(component).process
        assert proc is not None
        out[component] = cpu_seconds(proc.pid)
    out["bench"] = time.process_time()
    out["machine"] = machine_busy()
    return out


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ── one run ─────────────────────────────────────────────────────────────────────


def instance_args(ns: str, shard: str | None, block: int, port: int) -> list[str]:
    """One instance's flags: leader election off (alone in its shard), the table's Lease in the run's namespace."""
    args = ["--leader-elect=false", f"--health-addr=127.0.0.1:{port}", f"--watch-namespace={ns}",
            f"--controller-namespace={ns}", "--log-level=warn"]
    if shard is not None:
        args.append(f"--watch-label-selector={shard_selector(shard)}")
    if block:
        args.append(f"--pid-block-size={block}")
    return args


def process_doc(i: int, shard: str | None) -> dict[str, Any]:
    doc = flux_process(f"p{i:05d}")
    if shard is not None:
        doc["metadata"]["labels"] = {SHARD_KEY: shard}
    return doc


async def run_once(plane: LocalControlPlane, setup: Setup, n: int, round_: int, logs: Path,
                   timeout: float) -> Figures:
    ns = f"shards-{setup.slug}-r{round_}"
    load = load_average()
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
        await ensure_namespace(client, ns)
        daemons: list[Daemon] = []
        try:
            for shard in setup.shards:
                port = free_port()
                daemons.append(_start(f"{ns}-{shard or 'unsharded'}", "reconciler.main",
                                      instance_args(ns, shard, setup.block, port), plane.kubeconfig, logs, port))
            await wait_ready(daemons, 120.0)
            figures = Figures(setup, round_, n, load, float("nan"), 0)
            await measure(client, plane, daemons, ns, figures, timeout)
        finally:
            stop_process_groups([d.proc for d in daemons], 30.0)
        listed = msgspec.json.decode(await client.list(PROCESSES, ns))["items"]
    pids = [(p.get("status") or {}).get("pid") for p in listed]
    figures.pids = sum(1 for p in pids if p)
    figures.unique_pids = len({p for p in pids if p})
    return figures


async def measure(client: KubeClient, plane: LocalControlPlane, daemons: list[Daemon], ns: str, figures: Figures,
                  timeout: float) -> None:
    n, shards = figures.n, figures.setup.shards
    attested: set[str] = set()
    all_done = anyio.Event()

    def on_process(_type: Any, _old: _Phase | None, new: _Phase) -> None:
        if new.status.get("phase") == "Attested":
            attested.add(new.metadata.name or "")
            if len(attested) >= n:
                all_done.set()

    async def watch_alive() -> None:
        while True:
            for d in daemons:
                d.check_alive()
            await anyio.sleep(1.0)

    processes: Informer[_Phase] = Informer(client, PROCESSES, _Phase, namespace=ns)
    processes.add_handler(on_process)
    limiter = anyio.CapacityLimiter(CREATORS)

    async def create(i: int) -> None:
        async with limiter:
            await client.create(PROCESSES, process_doc(i, shards[i % len(shards)]), ns)

    async with anyio.create_task_group() as tg:
        tg.start_soon(processes.run)
        tg.start_soon(FluxStandIn(client, namespace=ns).run)
        tg.start_soon(watch_alive)
        await processes.wait_synced()
        await anyio.sleep(SETTLE_BEFORE)
        before, bumps_before = await counters(client, daemons)
        cpu_before = cpu_now(plane, daemons)
        start = time.monotonic()
        async with anyio.create_task_group() as creators:
            for i in range(n):
                creators.start_soon(create, i)
        with anyio.move_on_after(max(0.0, timeout - (time.monotonic() - start))):
            await all_done.wait()
        figures.wall = time.monotonic() - start
        figures.attested = len(attested)
        cpu_after = cpu_now(plane, daemons)
        await anyio.sleep(SETTLE_AFTER)
        after, bumps_after = await counters(client, daemons)
        tg.cancel_scope.cancel()

    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(after) | set(before)}
    figures.requests = {k: v for k, v in delta.items() if k != "races" and not k.startswith("reconcile ")}
    figures.reconciles = {k.removeprefix("reconcile "): v for k, v in delta.items() if k.startswith("reconcile ")}
    figures.races = delta.get("races", 0.0)
    codes = set(bumps_after) | set(bumps_before)
    figures.bumps = {c: bumps_after.get(c, 0.0) - bumps_before.get(c, 0.0) for c in codes}
    used = {k: cpu_after[k] - cpu_before[k] for k in cpu_before}
    per_instance = [used[f"instance{i}"] for i in range(len(daemons))]
    figures.cpu = {"reconcilers": sum(per_instance), "busiest": max(per_instance),
                   **{k: used[k] for k in ("kube-apiserver", "etcd", "bench", "machine")}}


# ── the report ──────────────────────────────────────────────────────────────────


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns right-aligned but the first."""
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        cells = zip(row, widths, strict=True)
        print("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(cells)))


def per_process(counts: dict[str, float], n: int) -> str:
    """Counts per Process by the first word of their key, e.g. ``GET 0.10 PATCH 5.20 POST 4.00``."""
    summed: dict[str, float] = {}
    for key, value in counts.items():
        word = key.split(" ", 1)[0]
        summed[word] = summed.get(word, 0.0) + value
    return " ".join(f"{w} {v / n:.2f}" for w, v in sorted(summed.items()) if v)


def report(results: list[Figures]) -> None:
    baselines = {(r.round, r.setup): r for r in results}
    rows: list[list[str]] = []
    cores: list[list[str]] = []
    for r in results:
        n, pids = r.n, max(r.pids, 1)
        base = baselines.get((r.round, r.setup.baseline))
        ratio = f"{r.rate / base.rate:.2f}" if base is not None and base.done and r.done else "–"
        won = sum(v for c, v in r.bumps.items() if c.startswith("2"))
        lost = sum(v for c, v in r.bumps.items() if c.startswith("4"))
        label = f"{r.setup.name}" + (f" r{r.round}" if len({x.round for x in results}) > 1 else "")
        rows.append([
            label, f"{r.setup.block_in_effect}", f"{r.load:.1f}",
            f"{r.wall:.1f}" if r.done else f"timeout {r.attested}/{n}", f"{r.rate:.1f}", ratio,
            f"{sum(r.requests.values()) / n:.2f}", per_process(r.requests, n), per_process(r.reconciles, n),
            f"{r.races / pids:.3f}", f"{won / pids:.3f} / {lost / pids:.3f}",
            "yes" if r.unique_pids == r.pids else f"NO ({r.pids - r.unique_pids} shared)",
            f"{1000 * r.cpu['reconcilers'] / n:.1f}",
        ])
        wall = r.wall
        cores.append([label, f"{r.setup.block_in_effect}", f"{r.cpu['reconcilers'] / wall:.2f}",
                      f"{r.cpu['busiest'] / wall:.2f}", f"{r.cpu['kube-apiserver'] / wall:.2f}",
                      f"{r.cpu['etcd'] / wall:.2f}", f"{r.cpu['bench'] / wall:.2f}", f"{r.cpu['machine'] / wall:.2f}",
                      f"{1000 * (r.cpu['kube-apiserver'] + r.cpu['etcd']) / n:.1f}"])
    print_table(["instances", "block", "load", "wall s", "Proc/s", "× 1", "req/Proc", "by method",
                 "reconciles/Proc by result", "races/PID", "bumps won / lost per PID", "PIDs unique",
                 "CPU ms/Proc"], rows)
    print("  block: PID block size in effect; load: 1-min load average at the run's start; Proc/s: Processes "
          "Attested per second, first create → last Attested; × 1: that over the 1-instance (one shard) run of the\n"
          "  same block size; req/Proc: the reconcilers' rest_client_requests_total, summed; races/PID: their "
          "tatara_pid_bump_races_total per PID; bumps: the API server's apiserver_request_total, PATCH of\n"
          "  processtables (not /status), 2xx / 4xx, per PID; CPU: the reconcilers' user+system, summed")
    print()
    print("where the cores went, create → all Attested (CPU s / wall s):")
    print_table(["instances", "block", "reconcilers Σ", "busiest one", "kube-apiserver", "etcd",
                 "this process", "machine", "apiserver+etcd CPU ms/Proc"], cores)
    print("  this process: its watches, creates and the Flux stand-in; machine: every busy core (/proc/stat), "
          "other work included")
    loads = [r.load for r in results]
    print(f"\nload average (1 min) at the start of the runs: {min(loads):.1f}–{max(loads):.1f}, "
          f"median {statistics.median(loads):.1f}")


def setups(instances: Sequence[int], blocks: Sequence[int], unsharded: bool) -> list[Setup]:
    """Every setup of one round: per block size, one shard first (the baseline), then the others; the
    instance without a selector once (its default block is 1 already)."""
    out: list[Setup] = []
    for block in blocks:
        out += [Setup(k, True, block) for k in sorted(set(instances))]
    if unsharded:
        out.append(Setup(1, False, 0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=300, help="Processes per setup (default 300)")
    parser.add_argument("--instances", default="1,2,3", help="instance counts, comma-separated (default 1,2,3)")
    parser.add_argument("--pid-block-sizes", default="0",
                        help="--pid-block-size values, one set of rows each; 0: the binary's default (32 sharded)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every setup, every other round reversed")
    parser.add_argument("--no-unsharded", dest="unsharded", action="store_false",
                        help="leave out the one instance without a selector")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a setup may take to all Attested")
    args = parser.parse_args()
    one_round = setups([int(k) for k in args.instances.split(",")], [int(b) for b in args.pid_block_sizes.split(",")],
                       args.unsharded)
    logs = Path(tempfile.mkdtemp(prefix="shard_bench-"))
    results: list[Figures] = []
    with LocalControlPlane(controller_manager=False) as plane:
        install_crds(plane.kubeconfig, all_crds())
        for round_ in range(1, args.rounds + 1):
            for setup in one_round if round_ % 2 else list(reversed(one_round)):
                figures = asyncio.run(run_once(plane, setup, args.processes, round_, logs, args.timeout))
                print(f"round {round_}, {setup.name} instance(s), PID block {setup.block_in_effect}: "
                      f"{figures.attested}/{figures.n} Attested in {figures.wall:.1f} s (load {figures.load:.1f})",
                      flush=True)
                results.append(figures)
    print(f"\n{args.processes} Processes per run; reconciler logs in {logs}\n")
    report(results)


if __name__ == "__main__":
    main()
