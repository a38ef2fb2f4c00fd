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
from pathlib import Path
from typing import IO, Any

import anyio
import msgspec
import yaml

from shared.domain.group import GROUP
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, KubeClient, Resource
from shared.kube.errors import ApiError, Conflict, NotFound
from tools.controlplane import LocalControlPlane
from tools.crds import all_crds
from tools.ops import format_table
from tools.standins.flux import FluxStandIn

EXPECT = f"examples.{GROUP}/expect"
"""Annotation of an example: the phase it settles in (``Gone`` for one that deletes itself)."""
PARENT = f"examples.{GROUP}/parent"
"""Annotation of an example Process: the name of the Process whose PID becomes its ``spec.identity.parent``."""
FIELD_MANAGER = "tatara-up"
RECONCILER_PORT, POOL_PORT = 18080, 18081
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


async def _deadline_poll(probe: Any, what: str, within: float) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within:.0f} s waiting for {what}")
        await anyio.sleep(0.1)


async def install_crds(client: KubeClient, docs: list[dict[str, Any]], within: float = 60.0) -> None:
    """Create or replace each CRD and wait until each is Established and its kind is listable."""
    for doc in docs:
        name = doc["metadata"]["name"]
        try:
            await client.create(CUSTOM_RESOURCE_DEFINITIONS, doc)
        except Conflict:
            current = msgspec.json.decode(await client.get(CUSTOM_RESOURCE_DEFINITIONS, name))
            body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
            await client.replace(CUSTOM_RESOURCE_DEFINITIONS, name, body)
    for doc in docs:
        name, spec = doc["metadata"]["name"], doc["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served", True))
        resource = Resource(spec["group"], version, spec["names"]["plural"], spec["names"]["kind"],
                            namespaced=spec["scope"] == "Namespaced")

        async def ready(name: str = name, resource: Resource = resource) -> bool:
            crd = msgspec.json.decode(await client.get(CUSTOM_RESOURCE_DEFINITIONS, name))
            conditions = crd.get("status", {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
            try:
                await client.list(resource, limit=1)
            except ApiError:
                return False
            return True

        await _deadline_poll(ready, f"CRD {name} established", within)


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

        async def parent_pid(ns: str = ex.namespace, parent: str = parent) -> str | None:
            return await pid_of(client, ns, parent)

        pid = await _deadline_poll(parent_pid, f"Process {ex.namespace}/{parent} to hold a PID", within)
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
    """Redraws the table in place on a terminal; elsewhere prints it only when it changed."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.tty, self.lines, self.last = out, out.isatty(), 0, ""

    def show(self, text: str) -> None:
        body = text.rsplit("\n", 1)[0]
        if not self.tty:
            if body != self.last:
                print(text, file=self.out, flush=True)
                self.last = body
            return
        if self.lines:
            self.out.write(f"\x1b[{self.lines}F\x1b[J")
        self.out.write(text + "\n")
        self.out.flush()
        self.lines = text.count("\n") + 1


# ── the reconcilers ────────────────────────────────────────────────────────────


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    metrics: str


def _start(name: str, module: str, args: list[str], kubeconfig: Path, logs: Path, port: int) -> Daemon:
    log = logs / f"{name}.log"
    with open(log, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=handle, stderr=subprocess.STDOUT,
                                env={**os.environ, "KUBECONFIG": str(kubeconfig)}, start_new_session=True)
    return Daemon(name, proc, log, f"http://127.0.0.1:{port}/metrics")


def _stop(daemons: list[Daemon], grace: float = 10.0) -> None:
    for d in daemons:
        if d.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(d.proc.pid, signal.SIGTERM)
    for d in daemons:
        try:
            d.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(d.proc.pid, signal.SIGKILL)
            d.proc.wait()


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
        _stop(daemons)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


async def wait_ready(daemons: list[Daemon], within: float) -> None:
    for d in daemons:
        url = d.metrics.replace("/metrics", "/readyz")

        async def probe(d: Daemon = d, url: str = url) -> bool:
            if d.proc.poll() is not None:
                raise RuntimeError(f"{d.name} exited with {d.proc.returncode}; see {d.log}")
            return await anyio.to_thread.run_sync(_healthy, url)

        await _deadline_poll(probe, f"{d.name} ready", within)


# ── the command ────────────────────────────────────────────────────────────────


async def _run(args: argparse.Namespace, kubeconfig: Path, logs: Path, started: float) -> int:
    examples = load_examples(Path(args.examples))
    screen = Screen(sys.stdout)
    async with await KubeClient.from_kubeconfig(kubeconfig) as client, anyio.create_task_group() as tg:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async def on_signal() -> None:
                async for _ in signals:
                    print("\nstopping…", flush=True)
                    tg.cancel_scope.cancel()
                    return

            tg.start_soon(on_signal)
            crds = all_crds()
            await install_crds(client, crds)
            print(f"installed {len(crds)} CRDs (tatara + Flux/DNSEndpoint schemas)", flush=True)
            with reconcilers(kubeconfig, logs, args.reconciler_port, args.pool_port) as daemons:
                await wait_ready(daemons, 60)
                for d in daemons:
                    print(f"{d.name} running (pid {d.proc.pid}), metrics {d.metrics}, log {d.log}", flush=True)
                tg.start_soon(FluxStandIn(client).run)
                print("Flux STAND-IN running: no real Flux runs locally; a stand-in marks Kustomizations, "
                      "HelmReleases and sources Ready as Flux would.", flush=True)
                tg.start_soon(apply_examples, client, examples, args.timeout)
                print(f"applying {len(examples)} examples from {args.examples}", flush=True)
                deadline = time.monotonic() + args.timeout
                while True:
                    for d in daemons:
                        if d.proc.poll() is not None:
                            raise RuntimeError(f"{d.name} exited with {d.proc.returncode}; see {d.log}")
                    await refresh(client, examples)
                    screen.show(render(examples, time.monotonic() - started))
                    if all(ex.settled for ex in examples):
                        break
                    if time.monotonic() > deadline:
                        print(f"tatara: examples not settled after {args.timeout:.0f} s", file=sys.stderr)
                        _summary(examples, started, kubeconfig, daemons, settled=False)
                        tg.cancel_scope.cancel()
                        return 1
                    await anyio.sleep(0.5)
                _summary(examples, started, kubeconfig, daemons, settled=True)
                if not args.exit_when_settled:
                    print("Ctrl-C stops everything.", flush=True)
                    await anyio.sleep_forever()
                tg.cancel_scope.cancel()
    return 0


def _summary(examples: list[Example], started: float, kubeconfig: Path, daemons: list[Daemon],
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
    given = args.kubeconfig or os.environ.get("KUBECONFIG")
    plane: LocalControlPlane | None = None
    logs = Path(tempfile.mkdtemp(prefix="tatara-up-"))
    try:
        if given:
            kubeconfig = Path(given)
            print(f"using the cluster of {kubeconfig}", flush=True)
        else:
            plane = LocalControlPlane()
            print("starting the local control plane (etcd + kube-apiserver + kube-controller-manager)…",
                  flush=True)
            plane.start()
            kubeconfig = plane.kubeconfig
            print(f"local control plane ready in {time.monotonic() - started:.1f} s: {plane.server}", flush=True)
        return anyio.run(_run, args, kubeconfig, logs, started)
    finally:
        if plane is not None:
            plane.stop()
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
    up.add_argument("--reconciler-port", type=int, default=RECONCILER_PORT, help="tatara-reconciler health/metrics")
    up.add_argument("--pool-port", type=int, default=POOL_PORT, help="tatara-pool-reconciler health/metrics")
    up.set_defaults(func=cmd_up)
