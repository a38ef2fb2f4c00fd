"""``tatara up``: the whole product locally in one command.

Starts the local control plane (unless a kubeconfig names a cluster), installs the CRDs, runs both
reconcilers as real subprocesses and the Flux stand-in in-process, applies ``examples/``, shows their
progress until every example reaches the state its ``examples.tatara.pleme.io/expect`` annotation
names, then keeps running until Ctrl-C / SIGTERM and stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import msgspec
import yaml
from rich.console import Console
from rich.live import Live
from rich.text import Text

from shared.domain.group import GROUP
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import NAMESPACES, KubeClient, Resource
from shared.kube.errors import Conflict, NotFound
from tools.controlplane import LocalControlPlane
from tools.crds import all_crds, install_crds
from tools.ops import format_table
from tools.processes import stop_process_groups
from tools.standins.flux import FluxStandIn
from tools.wait import wait_for

EXPECT = f"examples.{GROUP}/expect"
"""Annotation of an example: the phase it settles in (``Gone`` for one that deletes itself)."""
PARENT = f"examples.{GROUP}/parent"
"""Annotation of an example Process: the name of the Process whose PID becomes its ``spec.identity.parent``."""
FIELD_MANAGER = "tatara-up"
RECONCILER_PORT, POOL_PORT = 18080, 18081
STOP_GRACE = 10.0
"""Seconds a reconciler has after SIGTERM before it is SIGKILLed."""
KINDS: dict[str, Resource] = {"Process": PROCESSES, "EphemeralPool": EPHEMERAL_POOLS,
                              "EphemeralAllocation": EPHEMERAL_ALLOCATIONS}
GONE = "Gone"


def default_examples() -> Path:
    """``examples/`` of the source tree (editable install), else of the working directory."""
    beside = Path(__file__).resolve().parents[1] / "examples"
    return beside if beside.is_dir() else Path.cwd() / "examples"


@dataclass
class Example:
    """One applied example object and the state it should settle in."""

    kind: str
    namespace: str
    name: str
    expect: str
    doc: dict[str, Any]
    state: str = "-"
    pid: str = "-"
    ready: str = "-"

    @property
    def settled(self) -> bool:
        return self.state == self.expect


def load_examples(root: Path) -> list[Example]:
    """Every tatara object in ``root/**/*.yaml``, in path order (Lisp files are sources, not applied)."""
    out = []
    for path in sorted(root.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") not in KINDS:
                continue
            meta = doc["metadata"]
            expect = (meta.get("annotations") or {}).get(EXPECT, "")
            if not expect:
                raise ValueError(f"{path}: {doc['kind']} {meta['name']} has no {EXPECT} annotation")
            out.append(Example(doc["kind"], meta.get("namespace") or "default", meta["name"], expect, doc))
    return out


# ── cluster set-up ─────────────────────────────────────────────────────────────


async def ensure_namespace(client: KubeClient, name: str) -> None:
    with suppress(Conflict):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def apply_example(client: KubeClient, ex: Example) -> None:
    await client.apply(KINDS[ex.kind], ex.name, ex.doc, ex.namespace, field_manager=FIELD_MANAGER)


async def pid_of(client: KubeClient, namespace: str, name: str) -> str | None:
    try:
        obj = msgspec.json.decode(await client.get(PROCESSES, name, namespace))
    except NotFound:
        return None
    pid = (obj.get("status") or {}).get("pid")
    return str(pid) if pid else None


async def apply_examples(client: KubeClient, examples: list[Example], within: float) -> None:
    """Apply every example; a Process naming a parent (``examples.tatara.pleme.io/parent``) is applied
    once that parent holds a PID, with ``spec.identity.parent`` set to it."""
    for ns in sorted({ex.namespace for ex in examples}):
        await ensure_namespace(client, ns)
    waiting = []
    for ex in examples:
        if (ex.doc["metadata"].get("annotations") or {}).get(PARENT):
            waiting.append(ex)
        else:
            await apply_example(client, ex)
    for ex in waiting:
        parent = ex.doc["metadata"]["annotations"][PARENT]
        pid = await wait_for(partial(pid_of, client, ex.namespace, parent), timeout=within, interval=0.1,
                             what=f"Process {ex.namespace}/{parent} to hold a PID")
        ex.doc["spec"].setdefault("identity", {})["parent"] = pid
        await apply_example(client, ex)


# ── progress ───────────────────────────────────────────────────────────────────


def _ready(obj: dict[str, Any]) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status", "-"))
    return "-"


async def refresh(client: KubeClient, examples: list[Example]) -> None:
    """Read each example's current phase, PID and readiness."""
    for ex in examples:
        try:
            obj = msgspec.json.decode(await client.get(KINDS[ex.kind], ex.name, ex.namespace))
        except NotFound:
            ex.state, ex.pid, ex.ready = GONE, "-", "-"
            continue
        status = obj.get("status") or {}
        ex.state = str(status.get("phase") or "Pending")
        ex.ready = _ready(obj)
        if ex.kind == "Process":
            ex.pid = str(status.get("pid") or "-")
        elif ex.kind == "EphemeralPool":
            ex.pid = f"{status.get('readyCount', 0)} ready/{status.get('allocatedCount', 0)} alloc"
        else:
            ex.pid = str((status.get("assignedProcess") or {}).get("name") or "-")


def render(examples: list[Example], elapsed: float) -> str:
    rows = [(ex.namespace, f"{ex.kind}/{ex.name}", ex.state, ex.pid, ex.ready, ex.expect,
             "✓" if ex.settled else "…") for ex in examples]
    done = sum(ex.settled for ex in examples)
    table = format_table(("NAMESPACE", "NAME", "PHASE", "PID", "READY", "EXPECT", ""), rows)
    return f"{table}\n[{elapsed:5.1f} s] {done}/{len(examples)} settled"


class Screen:
    """The examples' progress table: redrawn in place on a terminal (rich's live display, which also
    keeps lines printed meanwhile above the table), printed only when it changed elsewhere (CI logs,
    pipes). :meth:`close` leaves the last table on screen."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.tty, self.last = out, out.isatty(), ""
        self._live: Live | None = None

    def show(self, text: str) -> None:
        body = text.rsplit("\n", 1)[0]
        if not self.tty:
            if body != self.last:
                print(text, file=self.out, flush=True)
                self.last = body
            return
        if self._live is None:
            self._live = Live(Text(text), console=Console(file=self.out), auto_refresh=False,
                              vertical_overflow="visible")
            self._live.start(refresh=True)
        else:
            self._live.update(Text(text), refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


# ── the reconcilers ────────────────────────────────────────────────────────────


@dataclass
class Daemon:
    """One reconciler subprocess: its log file and the loopback port of its health + metrics server."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    port: int

    @property
    def metrics(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    @property
    def readyz(self) -> str:
        return f"http://127.0.0.1:{self.port}/readyz"

    def check_alive(self) -> None:
        """Raise if the process has exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log}")


def _start(name: str, module: str, args: list[str], kubeconfig: Path, logs: Path, port: int) -> Daemon:
    log = logs / f"{name}.log"
    with open(log, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=handle, stderr=subprocess.STDOUT,
                                env={**os.environ, "KUBECONFIG": str(kubeconfig)}, start_new_session=True)
    return Daemon(name, proc, log, port)


@contextmanager
def reconcilers(kubeconfig: Path, logs: Path, reconciler_port: int, pool_port: int) -> Iterator[list[Daemon]]:
    """Both reconcilers as subprocesses (leader election off, health + metrics on loopback)."""
    daemons: list[Daemon] = []
    try:
        daemons.append(_start("tatara-reconciler", "reconciler.main",
                              ["--leader-elect=false", f"--health-addr=127.0.0.1:{reconciler_port}",
                               "--table-status-interval=1"], kubeconfig, logs, reconciler_port))
        daemons.append(_start("tatara-pool-reconciler", "pool_reconciler.main",
                              ["--leader-elect=false", f"--health-addr=127.0.0.1:{pool_port}",
                               "--heartbeat-seconds=5"], kubeconfig, logs, pool_port))
        yield daemons
    finally:
        stop_process_groups([d.proc for d in daemons], STOP_GRACE)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


async def wait_ready(daemons: list[Daemon], within: float) -> None:
    """Wait until every daemon answers ``/readyz``; raise as soon as one has exited."""
    for d in daemons:
        async def probe(d: Daemon = d) -> bool:
            d.check_alive()
            return await anyio.to_thread.run_sync(_healthy, d.readyz)

        await wait_for(probe, timeout=within, interval=0.1, what=f"{d.name} ready")


# ── the command, step by step ──────────────────────────────────────────────────


@contextmanager
def cluster(kubeconfig: str | None, started: float) -> Iterator[Path]:
    """Attach to the cluster of ``kubeconfig``, or start a local control plane (stopped on exit)."""
    if kubeconfig:
        print(f"using the cluster of {kubeconfig}", flush=True)
        yield Path(kubeconfig)
        return
    print("starting the local control plane (etcd + kube-apiserver + kube-controller-manager)…", flush=True)
    plane = LocalControlPlane()
    try:
        plane.start()
        print(f"local control plane ready in {time.monotonic() - started:.1f} s: {plane.server}", flush=True)
        yield plane.kubeconfig
    finally:
        plane.stop()


async def cancel_on_signal(scope: anyio.CancelScope, *,
                           task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Cancel ``scope`` on the first SIGINT or SIGTERM (started once the handlers are in place)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            print("\nstopping…", flush=True)
            scope.cancel()
            return


async def install_all_crds(client: KubeClient) -> None:
    crds = all_crds()
    await install_crds(client, crds)
    print(f"installed {len(crds)} CRDs (tatara + Flux/DNSEndpoint schemas)", flush=True)


async def announce_ready(daemons: list[Daemon]) -> None:
    await wait_ready(daemons, 60)
    for d in daemons:
        print(f"{d.name} running (pid {d.proc.pid}), metrics {d.metrics}, log {d.log}", flush=True)


def start_standin(tg: anyio.abc.TaskGroup, client: KubeClient) -> None:
    tg.start_soon(FluxStandIn(client).run)
    print("Flux STAND-IN running: no real Flux runs locally; a stand-in marks Kustomizations, "
          "HelmReleases and sources Ready as Flux would.", flush=True)


def start_examples(tg: anyio.abc.TaskGroup, client: KubeClient, examples: list[Example], source: str,
                   within: float) -> None:
    tg.start_soon(apply_examples, client, examples, within)
    print(f"applying {len(examples)} examples from {source}", flush=True)


async def watch_until_settled(client: KubeClient, examples: list[Example], daemons: list[Daemon],
                              started: float, within: float) -> bool:
    """Redraw the examples' progress until all are settled (True) or ``within`` seconds pass (False);
    raise if a reconciler exits meanwhile."""
    screen = Screen(sys.stdout)

    async def settled() -> bool:
        for d in daemons:
            d.check_alive()
        await refresh(client, examples)
        screen.show(render(examples, time.monotonic() - started))
        return all(ex.settled for ex in examples)

    try:
        await wait_for(settled, timeout=within, interval=0.5, what="the examples to settle")
    except TimeoutError:
        print(f"tatara: examples not settled after {within:.0f} s", file=sys.stderr)
        return False
    finally:
        screen.close()
    return True


async def _run(args: argparse.Namespace, kubeconfig: Path, logs: Path, started: float) -> int:
    """On the cluster of ``kubeconfig``: CRDs, both reconcilers, the stand-in, the examples, then watch.

    Everything started here stops on leaving: the task group (stand-in, examples) is cancelled — by a
    signal, by settling with ``--exit-when-settled``, or by not settling in time (exit 1) — and the
    reconcilers' context stops their processes."""
    examples = load_examples(Path(args.examples))
    async with await KubeClient.from_kubeconfig(kubeconfig) as client, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        await install_all_crds(client)
        with reconcilers(kubeconfig, logs, args.reconciler_port, args.pool_port) as daemons:
            await announce_ready(daemons)
            start_standin(tg, client)
            start_examples(tg, client, examples, args.examples, args.timeout)
            settled = await watch_until_settled(client, examples, daemons, started, args.timeout)
            print_summary(examples, started, kubeconfig, daemons, settled=settled)
            if settled and not args.exit_when_settled:
                print("Ctrl-C stops everything.", flush=True)
                await anyio.sleep_forever()
            tg.cancel_scope.cancel()
            if not settled:
                return 1
    return 0


def print_summary(examples: list[Example], started: float, kubeconfig: Path, daemons: list[Daemon],
             *, settled: bool) -> None:
    seconds = time.monotonic() - started
    if settled:
        print(f"all {len(examples)} examples settled in {seconds:.1f} s", flush=True)
    print(f"export KUBECONFIG={kubeconfig}", flush=True)
    for d in daemons:
        print(f"{d.name} metrics: {d.metrics}", flush=True)
    summary = {"settled": settled, "seconds": round(seconds, 1), "kubeconfig": str(kubeconfig),
               "metrics": {d.name: d.metrics for d in daemons},
               "examples": [{"kind": ex.kind, "namespace": ex.namespace, "name": ex.name, "phase": ex.state,
                             "pid": ex.pid, "expect": ex.expect} for ex in examples]}
    print("SUMMARY " + json.dumps(summary), flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix="tatara-up-"))
    try:
        with cluster(args.kubeconfig or os.environ.get("KUBECONFIG"), started) as kubeconfig:
            return anyio.run(_run, args, kubeconfig, logs, started)
    finally:
        print(f"stopped (reconciler logs kept in {logs})", flush=True)


def add_subcommand(sub: Any) -> None:
    up = sub.add_parser("up", help="run everything locally: control plane, CRDs, both reconcilers, Flux stand-in, "
                                   "the examples; until Ctrl-C")
    up.add_argument("--kubeconfig", default=None,
                    help="use this cluster instead of a local control plane (default: $KUBECONFIG if set)")
    up.add_argument("--examples", default=str(default_examples()), help="directory of example YAML to apply")
    up.add_argument("--exit-when-settled", action="store_true",
                    help="exit (0) once every example reached its expected state, printing a SUMMARY JSON line")
    up.add_argument("--timeout", type=float, default=300.0, help="seconds allowed for the examples to settle")
    up.add_argument("--reconciler-port", type=int, default=RECONCILER_PORT,
                    help=f"tatara-reconciler health/metrics port on 127.0.0.1 (default {RECONCILER_PORT})")
    up.add_argument("--pool-port", type=int, default=POOL_PORT,
                    help=f"tatara-pool-reconciler health/metrics port on 127.0.0.1 (default {POOL_PORT})")
    up.set_defaults(func=cmd_up)
