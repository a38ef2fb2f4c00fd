"""What ``tatara up`` adds on its own local plane so ephemeral exports really ship
(docs/architecture.md#the-job-runner-stand-in): a NATS server with JetStream and an HTTP receiver on fixed
loopback ports, the streams the examples publish to, the export worker's ServiceAccount and RBAC in the
example namespaces, and the image name the Job runner stand-in maps to the local ``tatara-export-worker``.

On a cluster ``tatara up`` did not start, none of this runs (:mod:`tools.real_cluster`).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import nats
import yaml
from nats.js.errors import NotFoundError

from shared.domain.labels import ROLE, ROLE_EXPORT
from shared.domain.resources import JOBS
from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.errors import NotFound
from tools.controlplane.helm import Helm
from tools.http_receiver import RecordedRequest
from tools.rbac import EXPORT_WORKER, RBAC_KINDS, export_worker_rbac
from tools.standins.job_status import condition_true

__all__ = [
    "EXPORT_WORKER",
    "LOCAL_EXPORT_WORKER_IMAGE",
    "NATS_PORT",
    "RECEIVER_PORT",
    "ExportRow",
    "ExportsView",
    "PortTaken",
    "check_ports_free",
    "ensure_streams",
    "export_worker_command",
    "export_worker_rbac_docs",
    "has_exports",
    "job_state",
    "nats_streams",
    "rbac_documents",
    "receipt_outcome",
    "receipts_hint",
    "retarget_exports",
    "stream_messages",
    "stream_subjects",
]

NATS_PORT: Final = 14222
RECEIVER_PORT: Final = 18090
LOCAL_EXPORT_WORKER_IMAGE: Final = "localhost/tatara-export-worker:local"
"""The ``--export-worker-image`` ``tatara up`` gives the reconciler; the Job runner stand-in runs
:func:`export_worker_command` for it."""
CHART = Path(__file__).resolve().parents[1] / "charts" / "tatara-reconciler"
RUN_ID: Final = "{{run_id}}"


class PortTaken(RuntimeError):
    """A fixed loopback port ``tatara up`` needs is in use."""


def export_worker_command() -> list[str]:
    """The local ``tatara-export-worker``: the console script beside the interpreter, else its module."""
    script = shutil.which("tatara-export-worker", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "export_worker.main"]


def check_ports_free(ports: Mapping[str, int]) -> None:
    """Raise :class:`PortTaken` naming every ``what → port`` that cannot be bound on 127.0.0.1."""
    taken = []
    for what, port in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # as the servers bind: a port left in TIME_WAIT by a previous run is free, a listening one is not
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                taken.append(f"{port} ({what})")
    if taken:
        raise PortTaken(f"127.0.0.1 port {', '.join(taken)} is taken; stop what uses it or choose another port")


def stream_subjects(subject: str) -> str:
    """The subject a JetStream stream must capture for an export's ``subject``: up to ``{{run_id}}``
    everything is kept and the rest becomes ``>`` (a run id is one subject token or more)."""
    head, found, _ = subject.partition(RUN_ID)
    return f"{head}>" if found else subject


def has_exports(doc: Mapping[str, Any]) -> bool:
    """Whether a Process document declares ephemeral exports."""
    return bool((((doc.get("spec") or {}).get("lifetime") or {}).get("ephemeral") or {}).get("exports"))


def nats_streams(processes: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Stream name → subjects, for every ``natsSubject`` export of the given Process documents."""
    streams: dict[str, set[str]] = {}
    for doc in processes:
        ephemeral = ((doc.get("spec") or {}).get("lifetime") or {}).get("ephemeral") or {}
        for export in ephemeral.get("exports") or ():
            channel = (export.get("channel") or {}).get("natsSubject")
            if channel:
                streams.setdefault(channel["stream"], set()).add(stream_subjects(channel["subject"]))
    return streams


def retarget_exports(doc: dict[str, Any], nats_url: str, receiver_url: str) -> dict[str, Any]:
    """``doc`` (a Process document) with its exports' default local endpoints — ``nats://127.0.0.1:14222`` and
    ``http://127.0.0.1:18090`` — moved to the ports this ``tatara up`` uses (``--nats-port``,
    ``--receiver-port``); every other endpoint is left alone. Returns a new document."""
    nats_default, http_default = f"nats://127.0.0.1:{NATS_PORT}", f"http://127.0.0.1:{RECEIVER_PORT}"
    ephemeral = ((doc.get("spec") or {}).get("lifetime") or {}).get("ephemeral") or {}
    exports = []
    for export in ephemeral.get("exports") or ():
        channel = dict(export.get("channel") or {})
        nats_channel, http_channel = channel.get("natsSubject"), channel.get("httpEvent")
        if nats_channel and nats_channel.get("url") == nats_default:
            channel["natsSubject"] = {**nats_channel, "url": nats_url}
        endpoint = (http_channel or {}).get("endpoint") or ""
        if http_channel and (endpoint == http_default or endpoint.startswith(http_default + "/")):
            channel["httpEvent"] = {**http_channel, "endpoint": receiver_url + endpoint[len(http_default):]}
        exports.append({**export, "channel": channel})
    if not exports:
        return doc
    spec = doc["spec"]
    lifetime = {**spec["lifetime"], "ephemeral": {**ephemeral, "exports": exports}}
    return {**doc, "spec": {**spec, "lifetime": lifetime}}


async def ensure_streams(url: str, streams: Mapping[str, set[str]]) -> None:
    """Create each JetStream stream (file storage, its subjects) on the server at ``url`` unless it exists."""
    client = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        js = client.jetstream()
        for name, subjects in sorted(streams.items()):
            try:
                await js.stream_info(name)
            except NotFoundError:
                await js.add_stream(name=name, subjects=sorted(subjects))
    finally:
        await client.close()


async def stream_messages(url: str, names: Iterable[str]) -> dict[str, int]:
    """Messages held by each named stream (0 when it does not exist)."""
    client = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        js, counts = client.jetstream(), {}
        for name in names:
            try:
                counts[name] = int((await js.stream_info(name)).state.messages)
            except NotFoundError:
                counts[name] = 0
        return counts
    finally:
        await client.close()


CHART_TEMPLATE: Final = "templates/export-worker-rbac.yaml"
"""The reconciler chart's template of the export worker's ServiceAccount, ClusterRole and RoleBindings."""
RELEASE: Final = "tatara-reconciler"
"""Release name the chart is rendered under (its objects are then named ``tatara-reconciler-…``)."""


def rbac_documents(rendered: Iterable[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The RBAC documents among rendered ones, in apply order: ServiceAccounts first (a TokenRequest needs the
    subject), then roles, then bindings."""
    picked = [d for d in rendered if d and d.get("kind") in RBAC_KINDS]
    return sorted(picked, key=lambda d: list(RBAC_KINDS).index(d["kind"]))


def export_worker_rbac_docs(namespaces: Sequence[str], helm: Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """The export worker's ServiceAccount and RBAC for ``namespaces``, and where they come from.

    From the reconciler chart (``helm template`` of :data:`CHART_TEMPLATE` with ``exportWorker.namespaces``)
    when the chart has that template and helm is built; otherwise the same rules by hand
    (:func:`tools.rbac.export_worker_rbac`), also when helm fails; the text says which and why.
    """
    binary = helm or (Helm.default().binary if Helm.default().is_built() else None)
    why = "helm is not built (make control-plane builds it)" if binary is None else "the chart has no such template"
    if binary is not None and (CHART / CHART_TEMPLATE).is_file():
        rendered = subprocess.run([str(binary), "template", RELEASE, str(CHART), "--namespace", RELEASE,
                                   "--set", f"exportWorker.namespaces={{{','.join(namespaces)}}}",
                                   "--show-only", CHART_TEMPLATE],
                                  capture_output=True, text=True, timeout=120, check=False)
        if rendered.returncode == 0:
            return (rbac_documents(yaml.safe_load_all(rendered.stdout)),
                    f"from the chart (helm template {CHART.name} {CHART_TEMPLATE})")
        why = f"helm template failed: {rendered.stderr.strip()[-300:]}"
    docs = [doc for ns in namespaces for doc in export_worker_rbac(ns)]
    return rbac_documents(docs), f"by hand (tools/rbac.py, the chart's rules): {why}"


@dataclass
class ExportRow:
    """One export Job on screen: its state and its receipt's outcome."""

    namespace: str
    name: str
    state: str
    receipt: str

    @property
    def receipt_name(self) -> str:
        return f"{self.name}-receipt"


def job_state(status: Mapping[str, Any]) -> str:
    """``Complete``, ``Failed``, ``Running`` (a run is active) or ``Pending``."""
    if condition_true(status, "Complete"):
        return "Complete"
    if condition_true(status, "Failed"):
        return "Failed"
    return "Running" if status.get("active") else "Pending"


def receipt_outcome(configmap: Mapping[str, Any]) -> str:
    """The ``evidence.outcome`` of the receipt in a receipt ConfigMap (``?`` when unreadable)."""
    text = (configmap.get("data") or {}).get("receipt.yaml") or (configmap.get("data") or {}).get("receipt.json")
    try:
        envelope = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return "?"
    evidence = envelope.get("evidence") if isinstance(envelope, dict) else None
    return str(evidence.get("outcome", "?")) if isinstance(evidence, dict) else "?"


@dataclass
class ExportsView:
    """Export Jobs and receipts seen so far in the example namespaces (rows stay once seen: an ephemeral
    Process's Jobs are deleted with it)."""

    namespaces: list[str]
    rows: dict[str, ExportRow] = field(default_factory=dict)
    http: list[RecordedRequest] = field(default_factory=list)
    runner: str = "the Job runner STAND-IN"
    """Who runs the Jobs, as the heading says it."""

    async def refresh(self, client: KubeClient) -> None:
        for ns in self.namespaces:
            jobs = msgspec.json.decode(await client.list(JOBS, ns, label_selector=f"{ROLE}={ROLE_EXPORT}"))["items"]
            for job in jobs:
                key = f"{ns}/{job['metadata']['name']}"
                row = self.rows.setdefault(key, ExportRow(ns, job["metadata"]["name"], "Pending", "-"))
                row.state = job_state(job.get("status") or {})
        for row in self.rows.values():
            if row.receipt in ("-", "?"):
                with suppress(NotFound):
                    row.receipt = receipt_outcome(msgspec.json.decode(
                        await client.get(CONFIG_MAPS, row.receipt_name, row.namespace)))

    def render(self) -> str:
        if not self.rows:
            return ""
        lines = [f"export Jobs (run by {self.runner}):"]
        lines += [f"  {r.namespace}/{r.name:<32} {r.state:<9} receipt {r.receipt_name}: {r.receipt}"
                  for r in sorted(self.rows.values(), key=lambda r: (r.namespace, r.name))]
        lines.append(f"  HTTP receiver got {len(self.http)} request(s)")
        return "\n".join(lines)


def receipts_hint(namespaces: Iterable[str]) -> list[str]:
    """Commands that show the export Jobs and receipts."""
    out = []
    for ns in namespaces:
        out.append(f"kubectl get jobs -n {ns} -l {ROLE}={ROLE_EXPORT}")
        out.append(f"kubectl get cm -n {ns} -l {ROLE}={ROLE_EXPORT}   "
                   f"# then: kubectl get cm -n {ns} <name> -o jsonpath='{{.data.receipt\\.yaml}}'")
    return out

