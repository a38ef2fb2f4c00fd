"""RBAC proven, not assumed: both binaries run as local processes with bearer tokens of
the charts' ServiceAccounts — only the RBAC objects ``helm template`` renders grant them anything — and
complete a Process lifecycle (flux intent → Attested → deleted, finalizer released), an ephemeral
Process's export Job in Releasing, and a pool
fill / bind / release / teardown. Any 403 in either binary's log fails the test with the forbidden lines."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
import pytest
import yaml

from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.errors import Forbidden, NotFound
from tests.support.jobs import finish_job
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.processes import stop_process_groups
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
T = TypeVar("T")

SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                                 namespaced=False)
# Applied in this order: the subject first (TokenRequest needs it), then what grants it anything.
RBAC_KINDS = {"ServiceAccount": SERVICE_ACCOUNTS, "ClusterRole": CLUSTER_ROLES,
              "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS, "Role": ROLES, "RoleBinding": ROLE_BINDINGS}
MODULES = {"tatara-reconciler": "reconciler.main", "tatara-pool-reconciler": "pool_reconciler.main"}
FORBIDDEN = re.compile(r"forbidden|(?<![\w.-])403(?![\w.-])", re.IGNORECASE)


@pytest.fixture
async def admin(control_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as kc:
        yield kc


def render(helm: Path, chart: str, release: str, namespace: str) -> list[dict[str, Any]]:
    """``helm template`` of ``chart`` with default values."""
    proc = subprocess.run([str(helm), "template", release, str(ROOT / "charts" / chart), "--namespace", namespace],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"helm template {chart} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def container_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def write_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig with the admin's server and CA and nothing but ``token`` as credentials."""
    source = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = dict(source["clusters"][0]["cluster"])
    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "plane", "cluster": {k: cluster[k] for k in ("server", "certificate-authority-data")}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "plane", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Binary:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def forbidden(self) -> list[str]:
        return [line for line in self.text().splitlines() if FORBIDDEN.search(line)]


@contextmanager
def binaries(specs: list[tuple[str, list[str], Path]], logs: Path) -> Iterator[list[Binary]]:
    """Each ``(name, args, kubeconfig)`` as a subprocess (its own session); SIGTERM, then SIGKILL, at the end."""
    running: list[Binary] = []
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    try:
        for name, args, kubeconfig in specs:
            log = logs / f"{name}.log"
            with open(log, "wb") as handle:
                proc = subprocess.Popen([sys.executable, "-m", MODULES[name], *args], cwd=ROOT,
                                        stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**env, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"})
            running.append(Binary(name, proc, log))
        yield running
    finally:
        stop_process_groups([b.proc for b in running], 10)


def report(running: list[Binary]) -> str:
    """Forbidden lines of each binary, or the tail of its log when there are none."""
    parts = []
    for b in running:
        bad = b.forbidden()
        state = "running" if b.proc.poll() is None else f"exited {b.proc.returncode}"
        body = "\n".join(bad) if bad else "\n".join(b.text().splitlines()[-15:])
        parts.append(f"--- {b.name} ({state}; {'FORBIDDEN lines' if bad else 'log tail'}):\n{body}")
    return "\n".join(parts)


async def until(running: list[Binary], probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """``wait_for`` that fails at once on a 403 or a dead binary, with the offending log lines."""
    async def guarded() -> T | None:
        for b in running:
            assert b.proc.poll() is None, f"{b.name} exited while waiting for {what}\n{report(running)}"
            assert not b.forbidden(), f"403 while waiting for {what}\n{report(running)}"
        return await probe()

    try:
        return await wait_for(guarded, timeout=TIMEOUT, interval=0.2, what=what)
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{report(running)}") from None


async def read(kc: KubeClient, resource: Resource, name: str, ns: str) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = msgspec.json.decode(await kc.get(resource, name, ns))
    except NotFound:
        return None
    return result


def example(path: str, kind: str, namespace: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((ROOT / "examples" / path).read_text()) if d and d["kind"] == kind]
    doc["metadata"]["namespace"] = namespace
    doc["metadata"].pop("annotations", None)
    if kind == "EphemeralAllocation":
        doc["spec"]["poolRef"]["namespace"] = namespace
    return doc


async def test_both_binaries_complete_their_lifecycles_with_only_the_charts_rbac(
    control_plane: LocalControlPlane, helm: Path, admin: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await install_crds(admin, all_crds())
    release = f"rbac-{uuid.uuid4().hex[:6]}"
    created: list[tuple[Resource, str, str | None]] = []
    specs: list[tuple[str, list[str], Path]] = []
    try:
        for chart in MODULES:
            docs = render(helm, chart, release, namespace)
            for kind, resource in RBAC_KINDS.items():
                for doc in (d for d in docs if d["kind"] == kind):
                    ns = namespace if resource.namespaced else None
                    assert not resource.namespaced or doc["metadata"]["namespace"] == namespace
                    await admin.create(resource, doc, ns)
                    created.append((resource, doc["metadata"]["name"], ns))
            (sa,) = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
            minted = msgspec.json.decode(await admin.request(
                "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token",
                body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 3600}}).encode()))
            kubeconfig = write_kubeconfig(control_plane.kubeconfig, minted["status"]["token"],
                                          tmp_path / f"kubeconfig-{chart}")
            # The kubeconfig authenticates as the ServiceAccount, not as an admin: Secrets are not granted.
            async with await KubeClient.from_kubeconfig(kubeconfig) as as_sa:
                with pytest.raises(Forbidden, match=f"system:serviceaccount:{namespace}:{sa}"):
                    await as_sa.list(SECRETS, namespace)
            args = [a for a in container_args(docs)
                    if not a.startswith(("--health-addr=", "--watch-namespace="))]
            assert "--leader-elect=true" in args, args
            assert f"--leader-election-namespace={namespace}" in args, args
            specs.append((chart, [*args, f"--health-addr=127.0.0.1:{free_port()}",
                                  f"--watch-namespace={namespace}"], kubeconfig))

        with binaries(specs, tmp_path) as running:
            async with anyio.create_task_group() as tg:
                tg.start_soon(FluxStandIn(admin, namespace=namespace).run)
                await lifecycles(admin, namespace, running)
                tg.cancel_scope.cancel()
            assert all(b.proc.poll() is None for b in running), report(running)
        for b in running:
            assert not b.forbidden(), f"{b.name} was refused a request:\n" + "\n".join(b.forbidden())
            assert '"msg"' in b.text(), f"{b.name} wrote no JSON log:\n{b.text()[-2000:]}"
    finally:
        for resource, name, ns in reversed(created):
            if not resource.namespaced:
                with suppress(NotFound):
                    await admin.delete(resource, name, ns)


async def lifecycles(kc: KubeClient, ns: str, running: list[Binary]) -> None:
    # Both hold their Lease (in the release namespace, as the charts configure) before anything is created.
    for name in MODULES:
        async def leased(name: str = name) -> bool:
            lease = await read(kc, Resource("coordination.k8s.io", "v1", "leases", "Lease"), name, ns)
            return bool(lease and (lease.get("spec") or {}).get("holderIdentity"))

        await until(running, leased, f"{name} to hold its Lease")

    # Process: flux intent → Attested; deleted, its finalizer released by the reconciler.
    process = example("flux-intent.yaml", "Process", ns)
    await kc.create(PROCESSES, process, ns)

    async def attested() -> bool:
        obj = await read(kc, PROCESSES, "podinfo", ns)
        return bool(obj and (obj.get("status") or {}).get("phase") == "Attested")

    await until(running, attested, "Process podinfo Attested")
    assert (await read(kc, PROCESSES, "podinfo", ns) or {})["metadata"].get("finalizers")
    await kc.delete(PROCESSES, "podinfo", ns)

    async def process_gone() -> bool:
        return await read(kc, PROCESSES, "podinfo", ns) is None

    await until(running, process_gone, "Process podinfo deleted (finalizer released)")

    # An ephemeral Process with an export: Releasing applies the export Job and watches it (the test
    # finishes it as the Job controller would), then the Process is torn down.
    exporter = example("flux-intent.yaml", "Process", ns)
    exporter["metadata"]["name"] = "exporter"
    exporter["spec"]["lifetime"] = {"ephemeral": {"teardownPolicy": "Always", "maxConcurrent": 0, "exports": [
        {"source": {"runMarker": {}}, "channel": {"stdout": {}}}]}}
    await kc.create(PROCESSES, exporter, ns)

    async def export_job() -> bool:
        return await read(kc, JOBS, "exporter-export-0", ns) is not None

    await until(running, export_job, "export Job exporter-export-0 applied")
    await finish_job(kc, ns, "exporter-export-0", succeeded=True)

    async def exporter_gone() -> bool:
        return await read(kc, PROCESSES, "exporter", ns) is None

    await until(running, exporter_gone, "Process exporter released, reaped and deleted")

    # Pool: fills, an allocation binds, is released; then the pool is torn down with its members.
    await kc.create(EPHEMERAL_POOLS, example("pool.yaml", "EphemeralPool", ns), ns)

    async def steady() -> bool:
        status = (await read(kc, EPHEMERAL_POOLS, "warm", ns) or {}).get("status") or {}
        return status.get("phase") == "Steady" and status.get("readyCount") == 2 and status.get("allocatedCount") == 0

    await until(running, steady, "pool warm Steady with 2 ready members")
    await kc.create(EPHEMERAL_ALLOCATIONS, example("pool.yaml", "EphemeralAllocation", ns), ns)

    async def bound() -> dict[str, Any] | None:
        obj = await read(kc, EPHEMERAL_ALLOCATIONS, "ci-run-1", ns)
        return obj if obj and (obj.get("status") or {}).get("phase") == "Bound" else None

    alloc = await until(running, bound, "allocation ci-run-1 Bound")
    assert alloc["status"]["assignedProcess"]["name"]
    await kc.delete(EPHEMERAL_ALLOCATIONS, "ci-run-1", ns)

    async def released() -> bool:
        return await read(kc, EPHEMERAL_ALLOCATIONS, "ci-run-1", ns) is None

    await until(running, released, "allocation ci-run-1 released and deleted")
    await until(running, steady, "pool warm Steady again with both members free")
    await kc.delete(EPHEMERAL_POOLS, "warm", ns)

    async def pool_gone() -> bool:
        members = msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]
        return await read(kc, EPHEMERAL_POOLS, "warm", ns) is None and not members

    await until(running, pool_gone, "pool warm and its member Processes deleted")
