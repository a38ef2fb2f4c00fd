"""``tatara up``: the whole product locally in one command.

Starts the local control plane as a cluster with a real node (kubelet, containerd, runc in a sandbox;
:mod:`tools.up_node`), builds the project's image from its ``Containerfile``, installs the CRDs and both
charts with ``helm install`` (the controllers run as pods, two replicas each), real Flux (source-, kustomize-
and helm-controller with a TLS registry and a git server serving the examples' charts and paths,
:mod:`tools.up_flux`; ``--flux=standin``: the Flux stand-in in-process instead), a NATS server (JetStream)
and an HTTP receiver on loopback for the exports (which the export Jobs' pods reach on the node IP), a real
Jaeger collecting both controllers' and the export Jobs' spans (``--tracing=off``: none), applies
``examples/``, shows their progress (the controllers' pods, the export Jobs' pods and receipts) until every
example reaches the state its ``examples.tatara.pleme.io/expect`` annotation names, then keeps running
until Ctrl-C / SIGTERM and stops everything it started.

``--fast`` runs without a node: both reconcilers as local subprocesses and the Job runner stand-in
in-process for the export Jobs (clearly labelled).

On a cluster named by ``--kubeconfig`` or ``$KUBECONFIG`` it is careful (:mod:`tools.real_cluster`): it
refuses to run next to a tatara controller unless ``--force``, installs only missing CRDs, and starts no
stand-in and no local sink (docs/architecture.md#tatara-up-on-a-real-cluster).
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import IO, Any

import anyio
import anyio.abc
import msgspec
import yaml
from nats.errors import Error as NatsError
from rich.console import Console
from rich.live import Live
from rich.text import Text

from shared.domain.group import GROUP
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient, Resource
from shared.kube.errors import Conflict, NotFound
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import ObjectMeta
from tools.controlplane import BuildError, LocalControlPlane
from tools.controlplane import jaeger as jaeger_build
from tools.controlplane.flux import COMPONENTS, Built
from tools.controlplane.images import ECHO_IMAGE, ImageError
from tools.controlplane.node import NodeError, node_prerequisites
from tools.crds import all_crds, install_crds
from tools.flux_stack import FluxStack, FluxStackError, flux_crds
from tools.git_http import GitServerError
from tools.http_receiver import HttpReceiver, RecordedRequest
from tools.jaeger_server import JaegerError, JaegerServer
from tools.nats_server import NatsServer, NatsServerError
from tools.node_stack import ChartInstallError, NodeStack
from tools.ops import format_table
from tools.opscli import compile_lisp
from tools.processes import stop_process_groups
from tools.rbac import EXPORT_WORKER, apply_rbac
from tools.real_cluster import install_missing_crds, running_controllers
from tools.standins.flux import FluxStandIn
from tools.standins.jobs import JobRunnerStandIn
from tools.up_exports import (
    LOCAL_EXPORT_WORKER_IMAGE,
    NATS_PORT,
    RECEIVER_PORT,
    ExportsView,
    PortTaken,
    check_ports_free,
    ensure_streams,
    export_worker_command,
    export_worker_rbac_docs,
    has_exports,
    nats_streams,
    receipts_hint,
    retarget_exports,
    stream_messages,
)
from tools.up_flux import flux_applied, plan_local_flux, retarget_charts, serve_examples
from tools.up_node import PodsView, flux_workloads, hints, install_controllers, node_otlp_endpoint, node_sink_urls
from tools.wait import wait_for

EXPECT = f"examples.{GROUP}/expect"
"""Annotation of an example: the phase it settles in (``Gone`` for one that deletes itself)."""
PARENT = f"examples.{GROUP}/parent"
"""Annotation of an example Process: the name of the Process whose PID becomes its ``spec.identity.parent``."""
FIELD_MANAGER = "tatara-up"
RECONCILER_PORT, POOL_PORT = 18080, 18081
JAEGER_PORT = 16686
"""Jaeger's query API on 127.0.0.1 (Jaeger's own default port)."""
TRACED_SERVICES = ("tatara-reconciler", "tatara-pool-reconciler", "tatara-export-worker")
"""The services whose spans ``tatara up`` points at Jaeger (OTEL_SERVICE_NAME of each binary)."""
STOP_GRACE = 10.0
"""Seconds a reconciler has after SIGTERM before it is SIGKILLed."""
KINDS: dict[str, Resource] = {"Process": PROCESSES, "EphemeralPool": EPHEMERAL_POOLS,
                              "EphemeralAllocation": EPHEMERAL_ALLOCATIONS}
GONE = "Gone"
GONE_AFTER_ATTESTED = "Gone after Attested"
"""The state of a Process that was seen Attested (by the watch, :class:`PhaseHistory`) and is now deleted:
an ephemeral one whose teardown policy fired on Attested."""
LISP_DIR = "lisp"
"""Subdirectory of the examples whose ``*.lisp`` sources are compiled (as ``tatara compile`` does) and applied."""
LISP_NAMESPACE = "tatara-examples"
"""Namespace of the Processes compiled from ``LISP_DIR`` (a Lisp form names none)."""


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
    applied: bool = False
    """Set once applied: until then it shows ``-``, not Gone."""

    @property
    def settled(self) -> bool:
        return self.state == self.expect


SUPPORTING_KINDS = frozenset({"ConfigMap"})
"""Plain objects an example may carry (e.g. the test report an export ships), applied before the examples."""


def load_supporting(root: Path) -> list[dict[str, Any]]:
    """Every ConfigMap in ``root/**/*.yaml``, in path order."""
    return [doc for path in sorted(root.rglob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
            if doc and doc.get("kind") in SUPPORTING_KINDS]


def load_examples(root: Path) -> list[Example]:
    """Every tatara object in ``root/**/*.yaml``, in path order, then the Processes compiled from
    ``root/lisp/*.lisp`` (:func:`load_lisp_examples`; other Lisp files are sources, not applied).

    Raises:
        ValueError: a YAML object without the ``examples.tatara.pleme.io/expect`` annotation.
        LispError, CompileProblem: a Lisp example does not compile.
    """
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
    return out + load_lisp_examples(root / LISP_DIR)


def lisp_expectation(doc: dict[str, Any]) -> str:
    """What a compiled Process settles in: ephemeral with ``teardownPolicy: Always`` → Gone after
    Attested (docs/behaviour.md#teardown-policy), anything else → Attested."""
    ephemeral = ((doc.get("spec") or {}).get("lifetime") or {}).get("ephemeral") or {}
    return GONE_AFTER_ATTESTED if ephemeral.get("teardownPolicy") == "Always" else "Attested"


def load_lisp_examples(root: Path) -> list[Example]:
    """The Processes of each ``root/*.lisp`` (path order) compiled as ``tatara compile -n tatara-examples``
    does (:func:`tools.opscli.compile_lisp`: a matrix fans out into one Process per environment), each
    annotated with the state it settles in (:func:`lisp_expectation`). Other compiled kinds (breathe
    Bands) are left out. Raises what :func:`~tools.opscli.compile_lisp` raises."""
    out = []
    for path in sorted(root.glob("*.lisp")):
        for doc in compile_lisp(path.read_text(), LISP_NAMESPACE):
            if doc.get("kind") != "Process":
                continue
            expect = lisp_expectation(doc)
            meta = doc["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}), EXPECT: expect}
            out.append(Example("Process", LISP_NAMESPACE, meta["name"], expect, doc))
    return out


# ── cluster set-up ─────────────────────────────────────────────────────────────


async def ensure_namespace(client: KubeClient, name: str) -> None:
    with suppress(Conflict):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def apply_example(client: KubeClient, ex: Example) -> None:
    await client.apply(KINDS[ex.kind], ex.name, ex.doc, ex.namespace, field_manager=FIELD_MANAGER)
    ex.applied = True


async def pid_of(client: KubeClient, namespace: str, name: str) -> str | None:
    try:
        obj = msgspec.json.decode(await client.get(PROCESSES, name, namespace))
    except NotFound:
        return None
    pid = (obj.get("status") or {}).get("pid")
    return str(pid) if pid else None


async def apply_supporting(client: KubeClient, docs: list[dict[str, Any]]) -> None:
    """Server-side apply the examples' plain objects (ConfigMaps) in their namespaces."""
    for doc in docs:
        meta = doc["metadata"]
        namespace = meta.get("namespace") or "default"
        await ensure_namespace(client, namespace)
        await client.apply(CONFIG_MAPS, meta["name"], {**doc, "metadata": {**meta, "namespace": namespace}},
                           namespace, field_manager=FIELD_MANAGER)


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


class _PhaseStatus(msgspec.Struct):
    phase: str | None = None


class _Phased(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: _PhaseStatus | None = None


class PhaseHistory:
    """Every phase each Process was seen in, from a watch on all Processes: a poll every half second
    misses a phase held for less (an ephemeral Process with ``teardownPolicy: Always`` leaves Attested
    within a pass). Run :meth:`run` in a task group; :meth:`passed` answers from what was recorded."""

    def __init__(self, client: KubeClient) -> None:
        self.informer: Informer[_Phased] = Informer(client, PROCESSES, _Phased)
        self.informer.add_handler(self._record)
        self.seen: dict[tuple[str, str], set[str]] = {}

    def _record(self, _event: WatchEventType, _old: _Phased | None, new: _Phased) -> None:
        if new.status is not None and new.status.phase:
            key = (new.metadata.namespace or "default", new.metadata.name or "")
            self.seen.setdefault(key, set()).add(new.status.phase)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; ``started`` once the first list is in (so nothing applied later is missed)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.informer.run)
            await self.informer.wait_synced()
            task_status.started()

    def passed(self, namespace: str, name: str, phase: str) -> bool:
        return phase in self.seen.get((namespace, name), set())


def gone_state(ex: Example, history: PhaseHistory | None) -> str:
    """The state of a deleted example: :data:`GONE_AFTER_ATTESTED` for a Process seen Attested, else Gone."""
    if ex.kind == "Process" and history is not None and history.passed(ex.namespace, ex.name, "Attested"):
        return GONE_AFTER_ATTESTED
    return GONE


async def refresh(client: KubeClient, examples: list[Example], history: PhaseHistory | None = None) -> None:
    """Read each example's current phase, PID and readiness (a deleted one: :func:`gone_state`; one not
    applied yet keeps ``-``)."""
    for ex in examples:
        if not ex.applied:
            continue
        try:
            obj = msgspec.json.decode(await client.get(KINDS[ex.kind], ex.name, ex.namespace))
        except NotFound:
            ex.state, ex.pid, ex.ready = gone_state(ex, history), "-", "-"
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


def _start(name: str, module: str, args: list[str], kubeconfig: Path, logs: Path, port: int,
           env: dict[str, str] | None = None) -> Daemon:
    log = logs / f"{name}.log"
    with open(log, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=handle, stderr=subprocess.STDOUT,
                                env={**os.environ, "KUBECONFIG": str(kubeconfig), **(env or {})},
                                start_new_session=True)
    return Daemon(name, proc, log, port)


def tracing_env(otlp_endpoint: str | None) -> dict[str, str]:
    """The ``OTEL_*`` variables that point a binary at ``otlp_endpoint`` with every new trace kept (the export
    Jobs the reconciler creates inherit them: docs/runtime.md#traces); none when ``otlp_endpoint`` is None."""
    if not otlp_endpoint:
        return {}
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1"}


@contextmanager
def reconcilers(kubeconfig: Path, logs: Path, reconciler_port: int, pool_port: int,
                reconciler_args: Sequence[str] = (), *, run: bool = True,
                otlp_endpoint: str | None = None) -> Iterator[list[Daemon]]:
    """Both reconcilers as subprocesses (leader election off, health + metrics on loopback, spans to
    ``otlp_endpoint`` when given); ``reconciler_args`` are added to tatara-reconciler's flags. ``run=False``
    (they run as pods): none."""
    daemons: list[Daemon] = []
    if not run:
        yield daemons
        return
    env = tracing_env(otlp_endpoint)
    try:
        daemons.append(_start("tatara-reconciler", "reconciler.main",
                              ["--leader-elect=false", f"--health-addr=127.0.0.1:{reconciler_port}",
                               "--table-status-interval=1", *reconciler_args], kubeconfig, logs, reconciler_port,
                              env))
        daemons.append(_start("tatara-pool-reconciler", "pool_reconciler.main",
                              ["--leader-elect=false", f"--health-addr=127.0.0.1:{pool_port}",
                               "--heartbeat-seconds=5"], kubeconfig, logs, pool_port, env))
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


@dataclass
class Target:
    """The cluster ``tatara up`` runs on: its own local plane (``plane``) or one it was pointed at."""

    kubeconfig: Path
    plane: LocalControlPlane | None = None

    @property
    def local(self) -> bool:
        """True when ``tatara up`` started this plane itself (stand-ins and local sinks only then)."""
        return self.plane is not None


@contextmanager
def cluster(kubeconfig: str | None, started: float, for_node: bool = False) -> Iterator[Target]:
    """Attach to the cluster of ``kubeconfig``, or start a local control plane (stopped on exit); ``for_node``:
    a plane a node can join (tools/controlplane/cluster.py), with kube-scheduler."""
    if kubeconfig:
        print(f"using the cluster of {kubeconfig} (not started by tatara up: no stand-in, no CRD overwritten)",
              flush=True)
        yield Target(Path(kubeconfig))
        return
    extra = " + kube-scheduler" if for_node else ""
    print(f"starting the local control plane (etcd + kube-apiserver + kube-controller-manager{extra})…", flush=True)
    plane = LocalControlPlane(for_node=for_node)
    try:
        plane.start()
        print(f"local control plane ready in {time.monotonic() - started:.1f} s: {plane.server}", flush=True)
        yield Target(plane.kubeconfig, plane)
    finally:
        plane.stop()


class FluxUnavailable(FluxStackError):
    """Real Flux did not start (the message is the build's or a component's error)."""


@contextmanager
def real_flux(target: Target, wanted: bool, logs: Path) -> Iterator[FluxStack | None]:
    """On a local plane when ``wanted``: install the real Flux CRDs (over the schema-only copies) and start the
    controllers, the TLS registry and the git server (built on first use), on the main thread so they die with
    this process (tools/processes.py); stopped on exit. None otherwise.

    Raises:
        FluxUnavailable: a build failed or a component did not start (nothing is left running).
    """
    if target.plane is None or not wanted:
        yield None
        return
    print("starting real Flux (source-, kustomize-, helm-controller), a TLS OCI registry and a git server on "
          "loopback…", flush=True)
    if not all(Built.default(comp).is_built() for comp in COMPONENTS):
        print("building them from their Go modules first (once; about 20 minutes cold on 2 cores, a minute with Go's "
              "caches warm; `make control-plane` does it ahead of time)…", flush=True)
    stack = FluxStack(target.plane, log_dir=logs / "flux")
    try:
        crds = flux_crds()
        anyio.run(install_flux_crds, target.kubeconfig, crds)
        stack.start()
    except (BuildError, FluxStackError, GitServerError) as err:
        stack.stop()
        raise FluxUnavailable(str(err)) from err
    print(f"real Flux started ({len(crds)} Flux CRDs installed)", flush=True)
    try:
        yield stack
    finally:
        stack.stop()


async def install_flux_crds(kubeconfig: Path, crds: list[dict[str, Any]]) -> None:
    async with await KubeClient.from_kubeconfig(kubeconfig) as client:
        await install_crds(client, crds)


@contextmanager
def local_node(target: Target, nats: NatsServer | None, receiver_port: int, logs: Path,
               jaeger: JaegerServer | None = None) -> Iterator[NodeStack | None]:
    """On a local plane started ``for_node``: build the images and start the node (on the main thread, so it
    dies with this process: tools/processes.py), pods reaching NATS, the HTTP receiver and (when it runs)
    Jaeger's OTLP receiver on the node IP; stopped on exit, its logs kept under ``logs/node``. None otherwise.

    Raises:
        NodeError: the node did not start, or an image or the node's binaries did not build.
    """
    if target.plane is None or not target.plane.for_node:
        yield None
        return
    assert nats is not None
    assert nats.port is not None
    print("building the images (the project's Containerfile with buildah on a Debian base; cached by content) and "
          "starting the node (kubelet + containerd + runc in a sandbox of their own)…", flush=True)
    try:
        forwards = [nats.port, receiver_port] + ([jaeger.otlp_http_port] if jaeger is not None else [])
        stack = NodeStack(target.plane, forwards=forwards, log_dir=logs / "node").start()
    except (ImageError, BuildError) as err:
        raise NodeError(str(err)) from err
    try:
        assert stack.node is not None
        print(f"node {stack.node.name} Ready (InternalIP {stack.node.ip}), image {stack.image} imported", flush=True)
        yield stack
    finally:
        stack.stop()


class TracingUnavailable(Exception):
    """Jaeger did not build or start (the message says why; ``--tracing=off`` runs without it)."""


@contextmanager
def jaeger_server(target: Target, wanted: bool, query_port: int) -> Iterator[JaegerServer | None]:
    """On a local plane when ``wanted``: a real Jaeger (in-memory storage) with its query API on
    ``127.0.0.1:query_port`` and OTLP receivers on free loopback ports; built from its Go module on first use;
    stopped on exit. None otherwise.

    Raises:
        TracingUnavailable: the build failed or Jaeger did not answer (nothing is left running).
    """
    if not target.local or not wanted:
        yield None
        return
    if not jaeger_build.built().is_built():
        print("building Jaeger from its Go module first (once; about 7 minutes cold on 2 cores; "
              "`make control-plane` does it ahead of time)…", flush=True)
    server = JaegerServer(query_port=query_port)
    try:
        server.start()
    except (BuildError, JaegerError) as err:
        server.stop()
        raise TracingUnavailable(str(err)) from err
    print(f"Jaeger running: traces of {', '.join(TRACED_SERVICES)} at {server.query_url}/api/traces "
          f"(OTLP/HTTP in on {server.otlp_http_url})", flush=True)
    try:
        yield server
    finally:
        server.stop()


def traces_hint(query_url: str) -> list[str]:
    """How to read the traces ``tatara up`` collected (Jaeger's query API; this build has no web UI)."""
    return [f"curl -s {query_url}/api/services",
            f"curl -s '{query_url}/api/traces?service=tatara-reconciler&limit=20'",
            f"curl -s {query_url}/api/traces/<trace id>    # a trace id is in every log line: trace_id"]


async def traced_services(jaeger: JaegerServer, expected: Sequence[str], within: float = 15.0) -> list[str]:
    """The services Jaeger holds spans of, sorted, once all of ``expected`` are there or ``within`` seconds
    passed (the binaries export in batches, every few seconds); empty when the query fails (the summary still
    prints)."""
    found: list[str] = []

    async def all_there() -> bool:
        found[:] = sorted(await anyio.to_thread.run_sync(jaeger.services))
        return set(expected) <= set(found)

    try:
        await wait_for(all_there, timeout=within, interval=0.5, what="spans of every traced service")
    except TimeoutError:
        print(f"tatara: Jaeger holds no spans of {', '.join(sorted(set(expected) - set(found)))} yet",
              file=sys.stderr, flush=True)
    except (JaegerError, OSError) as err:
        print(f"tatara: cannot read Jaeger's services: {err}", file=sys.stderr, flush=True)
    return found


@contextmanager
def nats_server(target: Target, port: int) -> Iterator[NatsServer | None]:
    """A NATS server with JetStream on ``127.0.0.1:port`` on a local plane (None on a real cluster)."""
    if not target.local:
        yield None
        return
    with NatsServer(port=port) as server:
        yield server


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


class Refused(Exception):
    """``tatara up`` will not run on this cluster (the message says why and what overrides it)."""


async def prepare_real_cluster(client: KubeClient, force: bool) -> None:
    """On a cluster ``tatara up`` did not start: refuse next to a running tatara controller (unless
    ``force``), then install only the CRDs it lacks.

    Raises:
        Refused: a tatara controller runs there and ``force`` is False (nothing was changed).
    """
    found = await running_controllers(client)
    if found and not force:
        raise Refused("a tatara controller already runs on this cluster:\n  " + "\n  ".join(found)
                      + "\nstop it first, or pass --force to run a second set of reconcilers next to it")
    if found:
        print("--force: running next to a tatara controller already on this cluster: " + "; ".join(found),
              flush=True)
    await install_missing_crds(client, all_crds(), announce=lambda line: print(line, flush=True))
    print("no stand-in started (Flux and the Job controller of this cluster do that work); no local NATS "
          "server, HTTP receiver or export-worker RBAC", flush=True)


async def announce_ready(daemons: list[Daemon]) -> None:
    await wait_ready(daemons, 60)
    for d in daemons:
        print(f"{d.name} running (pid {d.proc.pid}), metrics {d.metrics}, log {d.log}", flush=True)


def start_standin(tg: anyio.abc.TaskGroup, client: KubeClient) -> None:
    tg.start_soon(FluxStandIn(client).run)
    print("Flux STAND-IN running (--flux=standin): no real Flux runs; a stand-in marks Kustomizations, "
          "HelmReleases and sources Ready as Flux would.", flush=True)


async def serve_real_flux(client: KubeClient, stack: FluxStack, examples: list[Example], logs: Path,
                          workload_image: str | None = None) -> None:
    """Serve what the examples need to the running real Flux and point their charts at the local registry
    (docs/architecture.md#real-flux); with ``workload_image`` (a node runs) the charts deploy it."""
    plan = plan_local_flux(ex.doc for ex in examples)
    for ex in examples:
        ex.doc = retarget_charts(ex.doc, stack.registry)
    for line in await serve_examples(client, stack, plan, ensure_namespace, workload_image=workload_image):
        print(f"  {line}", flush=True)
    print(f"real Flux running: registry https://{stack.registry}, git {stack.git.url('<repo>')}; logs in "
          f"{logs / 'flux'}", flush=True)


def start_job_runner(tg: anyio.abc.TaskGroup, client: KubeClient, plane: LocalControlPlane, logs: Path) -> None:
    command = export_worker_command()
    runner = JobRunnerStandIn(client, server=plane.server, ca_file=plane.ca_file, logs=logs / "jobs",
                              entrypoints={LOCAL_EXPORT_WORKER_IMAGE: command})
    tg.start_soon(runner.run)
    print(f"Job runner STAND-IN running: no kubelet locally; export Jobs run as local processes "
          f"({' '.join(command)}) under their ServiceAccount's token, logs in {runner.logs}", flush=True)


@dataclass
class Sinks:
    """The local export sinks: NATS (JetStream) and the HTTP receiver."""

    nats: NatsServer
    receiver: HttpReceiver
    streams: dict[str, set[str]]


async def prepare_exports(client: KubeClient, sinks: Sinks, namespaces: list[str], *, rbac: bool = True) -> None:
    """The examples' JetStream streams, their namespaces and (``rbac``; on the node the chart does it) the export
    worker's ServiceAccount + RBAC in each."""
    await ensure_streams(sinks.nats.url, sinks.streams)
    for ns in namespaces:
        await ensure_namespace(client, ns)
    print(f"NATS (JetStream) on {sinks.nats.url}, streams {', '.join(sorted(sinks.streams)) or '-'}; "
          f"HTTP receiver on {sinks.receiver.url}", flush=True)
    if rbac:
        docs, where = await anyio.to_thread.run_sync(export_worker_rbac_docs, namespaces)
        await apply_rbac(client, docs)
        if namespaces:
            print(f"ServiceAccount {EXPORT_WORKER} + RBAC in {', '.join(namespaces)}: {where}", flush=True)


def start_examples(tg: anyio.abc.TaskGroup, client: KubeClient, examples: list[Example],
                   supporting: list[dict[str, Any]], source: str, within: float) -> None:
    async def apply_all() -> None:
        await apply_supporting(client, supporting)
        await apply_examples(client, examples, within)

    tg.start_soon(apply_all)
    print(f"applying {len(examples)} examples from {source}", flush=True)


async def watch_until_settled(client: KubeClient, examples: list[Example], daemons: list[Daemon],
                              started: float, within: float, exports: ExportsView | None = None,
                              history: PhaseHistory | None = None, flux: FluxStack | None = None,
                              pods: PodsView | None = None) -> bool:
    """Redraw the examples' progress (and their export Jobs, and on the node the pods) until all are settled
    (True) or ``within`` seconds pass (False); raise if a reconciler (or a real Flux process) exits meanwhile."""
    screen = Screen(sys.stdout)

    async def settled() -> bool:
        for d in daemons:
            d.check_alive()
        if flux is not None:
            flux.check_alive()
        await refresh(client, examples, history)
        text = render(examples, time.monotonic() - started)
        table, _, footer = text.rpartition("\n")
        if exports is not None:
            await exports.refresh(client)
            if exports.rows:
                table = f"{table}\n{exports.render()}"
        if pods is not None:
            await pods.refresh(client)
            table = f"{table}\n{pods.render()}"
        screen.show(f"{table}\n{footer}")
        return all(ex.settled for ex in examples)

    try:
        await wait_for(settled, timeout=within, interval=0.5, what="the examples to settle")
    except TimeoutError:
        print(f"tatara: examples not settled after {within:.0f} s", file=sys.stderr)
        return False
    finally:
        screen.close()
    return True


def _print_request(request: RecordedRequest) -> None:
    print(f"HTTP receiver: {request.method} {request.path} "
          f"(X-Tatara-Signal-Type: {request.header('X-Tatara-Signal-Type')}, {len(request.body)} bytes)", flush=True)


async def _run(args: argparse.Namespace, target: Target, nats: NatsServer | None, flux: FluxStack | None,
               node: NodeStack | None, logs: Path, started: float, jaeger: JaegerServer | None = None) -> int:
    """On ``target``: CRDs, the controllers, the stand-ins and sinks (local plane only), the examples, then
    watch. On a local plane with a node (the default) the controllers are both charts installed by helm on
    the node and the export Jobs run as pods; with ``--fast`` they are subprocesses and the Job runner
    stand-in runs the Jobs.

    Everything started here stops on leaving: the task group (stand-ins, examples) is cancelled — by a
    signal, by settling with ``--exit-when-settled``, or by not settling in time (exit 1) — and the
    reconcilers' context, the node and Flux stop their processes. Refused on a real cluster: exit 2, nothing
    changed."""
    root = Path(args.examples)
    examples, supporting = load_examples(root), load_supporting(root)
    namespaces = sorted({ex.namespace for ex in examples if ex.kind == "Process" and has_exports(ex.doc)})
    on_node = node is not None
    async with await KubeClient.from_kubeconfig(target.kubeconfig) as client, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        reconciler_args: list[str] = []
        sinks: Sinks | None = None
        stack = flux
        if target.plane is None:
            try:
                await prepare_real_cluster(client, args.force)
            except Refused as err:
                print(f"tatara: refusing to run: {err}", file=sys.stderr, flush=True)
                tg.cancel_scope.cancel()
                return 2
        else:
            await install_all_crds(client)
            if flux is not None:
                await serve_real_flux(client, flux, examples, logs, workload_image=ECHO_IMAGE if on_node else None)
            assert nats is not None
            assert nats.port is not None
            sinks = Sinks(nats, HttpReceiver(port=args.receiver_port, on_request=_print_request),
                          nats_streams(ex.doc for ex in examples if ex.kind == "Process"))
            nats_url, receiver_url = (node_sink_urls(nats.port, args.receiver_port) if on_node
                                      else (nats.url, sinks.receiver.url))
            for ex in examples:
                if ex.kind == "Process":
                    ex.doc = retarget_exports(ex.doc, nats_url, receiver_url)
            if not on_node:
                reconciler_args.append(f"--export-worker-image={LOCAL_EXPORT_WORKER_IMAGE}")
        try:
            if sinks is not None:
                await sinks.receiver.start()
                await prepare_exports(client, sinks, namespaces, rbac=not on_node)
            pods: PodsView | None = None
            if node is not None:
                try:
                    otlp = node_otlp_endpoint(jaeger.otlp_http_port) if jaeger is not None else None
                    for line in await install_controllers(node, namespaces, otlp_endpoint=otlp):
                        print(line, flush=True)
                except ChartInstallError as err:
                    print(f"tatara: the charts did not install: {err}", file=sys.stderr, flush=True)
                    tg.cancel_scope.cancel()
                    return 1
                pods = PodsView(namespaces)
            with reconcilers(target.kubeconfig, logs, args.reconciler_port, args.pool_port, reconciler_args,
                             run=not on_node, otlp_endpoint=jaeger.otlp_http_url if jaeger else None) as daemons:
                await announce_ready(daemons)
                exports = None
                if target.plane is not None and sinks is not None:
                    if stack is None:
                        start_standin(tg, client)
                    if on_node:
                        exports = ExportsView(namespaces, http=sinks.receiver.requests,
                                              runner="the Job controller, as pods on the node")
                    else:
                        start_job_runner(tg, client, target.plane, logs)
                        exports = ExportsView(namespaces, http=sinks.receiver.requests)
                history = PhaseHistory(client)
                await tg.start(history.run)
                start_examples(tg, client, examples, supporting, args.examples, args.timeout)
                settled = await watch_until_settled(client, examples, daemons, started, args.timeout, exports,
                                                    history, stack, pods)
                extra: dict[str, Any] = {"mode": "node" if on_node else "fast" if target.plane else "cluster"}
                if stack is not None:
                    applied = await flux_applied(client, sorted({ex.namespace for ex in examples}))
                    print(f"real Flux applied {len(applied)} ConfigMap(s): {', '.join(applied) or '-'} "
                          "(kubectl get cm -n <namespace>)", flush=True)
                    extra["flux"] = {"registry": stack.registry, "dir": str(stack.dir), "applied": applied}
                if node is not None and pods is not None:
                    await pods.refresh(client)
                    assert node.node is not None
                    assert node.node.sandbox is not None
                    extra["node"] = {"image": node.image, "pods": pods.summary(), "dir": str(node.node.dir),
                                     "cgroup": node.node.cgroup, "namespaces": node.node.sandbox.namespaces(),
                                     "workloads": await flux_workloads(client, sorted({ex.namespace
                                                                                       for ex in examples}))}
                    print(f"Deployments helm-controller installed: {', '.join(extra['node']['workloads']) or '-'}",
                          flush=True)
                if jaeger is not None:
                    expected = [name for name in TRACED_SERVICES
                                if name != "tatara-export-worker" or (exports is not None and exports.rows)]
                    extra["traces"] = {"query": jaeger.query_url,
                                       "services": await traced_services(jaeger, expected)}
                    print("traces (Jaeger's query API):", flush=True)
                    for line in traces_hint(jaeger.query_url):
                        print(f"  {line}", flush=True)
                kubectl = str(target.plane.toolchain.binary("kubectl")) if target.plane is not None else "kubectl"
                await print_summary(examples, started, target.kubeconfig, daemons, sinks, exports, settled=settled,
                                    extra=extra, pods=pods, kubectl=kubectl)
                if settled and not args.exit_when_settled:
                    print("Ctrl-C stops everything.", flush=True)
                    await anyio.sleep_forever()
                tg.cancel_scope.cancel()
                if not settled:
                    return 1
        finally:
            with anyio.CancelScope(shield=True):
                if sinks is not None:
                    await sinks.receiver.stop()
    return 0


async def print_summary(examples: list[Example], started: float, kubeconfig: Path, daemons: list[Daemon],
                        sinks: Sinks | None, exports: ExportsView | None, *, settled: bool,
                        extra: dict[str, Any] | None = None, pods: PodsView | None = None,
                        kubectl: str = "kubectl") -> None:
    seconds = time.monotonic() - started
    if settled:
        print(f"all {len(examples)} examples settled in {seconds:.1f} s", flush=True)
    print(f"export KUBECONFIG={kubeconfig}", flush=True)
    for d in daemons:
        print(f"{d.name} metrics: {d.metrics}", flush=True)
    if pods is not None:
        print(f"on the node:\n{pods.render()}", flush=True)
        for line in hints(pods.export_namespaces, kubectl):
            print(f"  {line}", flush=True)
    summary: dict[str, Any] = {
        "settled": settled, "seconds": round(seconds, 1), "kubeconfig": str(kubeconfig),
        "metrics": {d.name: d.metrics for d in daemons},
        "examples": [{"kind": ex.kind, "namespace": ex.namespace, "name": ex.name, "phase": ex.state,
                      "pid": ex.pid, "expect": ex.expect} for ex in examples]}
    if sinks is not None and exports is not None:
        print(f"NATS: {sinks.nats.url}   HTTP receiver: {sinks.receiver.url} "
              f"({len(sinks.receiver.requests)} request(s) so far)", flush=True)
        print("receipts and export Jobs:", flush=True)
        for line in receipts_hint(exports.namespaces):
            print(f"  {line}", flush=True)
        try:
            messages = await stream_messages(sinks.nats.url, sorted(sinks.streams))
        except (OSError, NatsError) as err:
            print(f"tatara: cannot count the streams' messages: {err}", file=sys.stderr, flush=True)
            messages = {}
        summary["exports"] = {
            "nats": sinks.nats.url, "receiver": sinks.receiver.url, "http_requests": len(sinks.receiver.requests),
            "stream_messages": messages,
            "jobs": [{"namespace": r.namespace, "name": r.name, "state": r.state, "receipt": r.receipt}
                     for r in exports.rows.values()]}
    summary.update(extra or {})
    print("SUMMARY " + json.dumps(summary), flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix="tatara-up-"))
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    # Until the event loop takes over (and after it ends) a signal interrupts the start and the clean-up runs;
    # the builds and the node's start take minutes on a cold machine.
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        if not kubeconfig:
            check_ports_free({"NATS, --nats-port": args.nats_port,
                              "HTTP receiver, --receiver-port": args.receiver_port,
                              **({"Jaeger query API, --jaeger-port": args.jaeger_port}
                                 if args.tracing == "on" else {})})
        if not kubeconfig and not args.fast:
            refuse_without_node()
        with cluster(kubeconfig, started, for_node=not args.fast) as target, \
                nats_server(target, args.nats_port) as nats, \
                jaeger_server(target, args.tracing == "on", args.jaeger_port) as jaeger, \
                real_flux(target, args.flux == "real", logs) as flux, \
                local_node(target, nats, args.receiver_port, logs, jaeger) as node:
            code = anyio.run(_run, args, target, nats, flux, node, logs, started, jaeger)
            _ignore_signals()  # the event loop's own handlers are gone: stopping must not be cut short
            return code
    except Interrupted as err:
        print(f"tatara: interrupted ({err}) while starting; what was started is stopped", file=sys.stderr,
              flush=True)
        return 0
    except FluxUnavailable as err:
        print(f"tatara: real Flux did not start: {err}\n(--flux=standin runs the Flux stand-in instead)",
              file=sys.stderr, flush=True)
        return 1
    except (PortTaken, NatsServerError, NodeUnavailable) as err:
        print(f"tatara: {err}", file=sys.stderr, flush=True)
        return 1
    except TracingUnavailable as err:
        print(f"tatara: Jaeger did not start: {err}\n(--tracing=off runs without traces)", file=sys.stderr,
              flush=True)
        return 1
    except NodeError as err:
        print(f"tatara: the local node did not come up: {err}\n(`.venv/bin/tatara up --fast` runs without a node)",
              file=sys.stderr, flush=True)
        return 1
    finally:
        print(f"stopped (logs kept in {logs})", flush=True)


class NodeUnavailable(Exception):
    """The local node cannot run on this machine (the message says what is missing and that --fast works)."""


def refuse_without_node() -> None:
    """Raise :class:`NodeUnavailable` unless this machine can run the node (tools/controlplane/node.py)."""
    problems = node_prerequisites()
    if problems:
        raise NodeUnavailable(f"the local node needs {'; '.join(problems)}. `.venv/bin/tatara up --fast` runs "
                              "without a node (the reconcilers as subprocesses, the Job runner stand-in for export "
                              "Jobs)")


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while ``tatara up`` was starting or stopping outside its event loop."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    # the first signal stops the start; what follows (the clean-up) must not be cut short by a second one
    _ignore_signals()
    raise Interrupted(signal.Signals(signum).name)


def _ignore_signals() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def add_subcommand(sub: Any) -> None:
    up = sub.add_parser("up", help="run everything locally: control plane and a node, the image, CRDs, both charts "
                                   "(the controllers as pods), real Flux (or its stand-in), NATS and an HTTP "
                                   "receiver, Jaeger, the examples; until Ctrl-C")
    up.add_argument("--kubeconfig", default=None,
                    help="use this cluster instead of a local control plane (default: $KUBECONFIG if set); "
                         "only missing CRDs are installed and no stand-in runs there")
    up.add_argument("--force", action="store_true",
                    help="run on a cluster that already runs a tatara controller (held Lease or Deployment)")
    up.add_argument("--fast", action="store_true",
                    help="local plane only: no node; the reconcilers as local subprocesses and the Job runner "
                         "STAND-IN for export Jobs (starts sooner, needs no root)")
    up.add_argument("--flux", choices=("real", "standin"), default="real",
                    help="local plane only: run the real Flux controllers with a local registry and git server "
                         "(default; built from their Go modules on first use), or the fast Flux stand-in")
    up.add_argument("--examples", default=str(default_examples()),
                    help="directory of example YAML to apply (and lisp/*.lisp, compiled as tatara compile does)")
    up.add_argument("--exit-when-settled", action="store_true",
                    help="exit (0) once every example reached its expected state, printing a SUMMARY JSON line")
    up.add_argument("--timeout", type=float, default=300.0, help="seconds allowed for the examples to settle")
    up.add_argument("--reconciler-port", type=int, default=RECONCILER_PORT,
                    help=f"tatara-reconciler health/metrics port on 127.0.0.1 (default {RECONCILER_PORT})")
    up.add_argument("--pool-port", type=int, default=POOL_PORT,
                    help=f"tatara-pool-reconciler health/metrics port on 127.0.0.1 (default {POOL_PORT})")
    up.add_argument("--nats-port", type=int, default=NATS_PORT,
                    help=f"NATS client port on 127.0.0.1, local plane only (default {NATS_PORT})")
    up.add_argument("--receiver-port", type=int, default=RECEIVER_PORT,
                    help=f"HTTP receiver port on 127.0.0.1, local plane only (default {RECEIVER_PORT})")
    up.add_argument("--tracing", choices=("on", "off"), default="on",
                    help="local plane only: run a real Jaeger (built from its Go module on first use) and send both "
                         "controllers' and the export Jobs' spans to it (default on)")
    up.add_argument("--jaeger-port", type=int, default=JAEGER_PORT,
                    help=f"Jaeger's query API port on 127.0.0.1, local plane only (default {JAEGER_PORT})")
    up.set_defaults(func=cmd_up)
