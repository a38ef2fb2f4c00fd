"""The export worker's RBAC proven, not assumed: the real ``tatara-export-worker`` runs with ``$KUBECONFIG``
holding a TokenRequest token of the ServiceAccount the chart creates for export Jobs — as the local Job runner
stand-in runs it — and only the chart's export-worker ClusterRole and RoleBinding grant it anything. Each source
(a ConfigMap GET, a ConfigMap LIST, a Process GET) ships and writes its receipt; the same worker under a Role
without ``create`` on ConfigMaps gets a 403 and writes no receipt."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from shared.domain.resources import PROCESSES
from shared.kube.client import CONFIG_MAPS, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.e2e.test_rbac import RBAC_KINDS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, write_kubeconfig
from tests.integration.export_worker.conftest import PROCESS, run_worker
from tools.controlplane import LocalControlPlane
from tools.crds import all_crds, install_crds

FORBIDDEN = re.compile(r"\b403\b")
"""The status code as a word of its own (not a run of digits inside a hash or a time)."""

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def admin(control_plane: LocalControlPlane) -> Any:
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as kc:
        yield kc


def export_worker_objects(helm: Path, release: str, namespace: str) -> list[dict[str, Any]]:
    proc = subprocess.run([str(helm), "template", release, str(ROOT / "charts" / "tatara-reconciler"),
                           "--namespace", "tatara-system", "--set", f"exportWorker.namespaces={{{namespace}}}"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout)
            if d and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "export-worker"]


async def token_kubeconfig(admin: KubeClient, plane: LocalControlPlane, namespace: str, account: str,
                           path: Path) -> Path:
    minted = msgspec.json.decode(await admin.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}}).encode()))
    return write_kubeconfig(plane.kubeconfig, minted["status"]["token"], path)


def stdout_export(source: dict[str, Any]) -> dict[str, Any]:
    return {"source": source, "channel": {"stdout": {"pretty": False}}, "when": "OnAttested"}


async def test_the_export_worker_ships_and_writes_receipts_with_only_the_charts_rbac(
        control_plane: LocalControlPlane, helm: Path, admin: KubeClient, namespace: str, tmp_path: Path) -> None:
    await install_crds(admin, all_crds())
    release = f"ew-{uuid.uuid4().hex[:6]}"
    docs = export_worker_objects(helm, release, namespace)
    assert sorted(d["kind"] for d in docs) == ["ClusterRole", "RoleBinding", "ServiceAccount"]
    created: list[tuple[Resource, str]] = []
    try:
        for kind, resource in RBAC_KINDS.items():
            for doc in (d for d in docs if d["kind"] == kind):
                await admin.create(resource, doc, namespace if resource.namespaced else None)
                if not resource.namespaced:
                    created.append((resource, doc["metadata"]["name"]))
        await admin.create(PROCESSES, {**PROCESS, "metadata": {"name": "pr-1", "namespace": namespace}}, namespace)
        await admin.create(CONFIG_MAPS, {"metadata": {"name": "results"}, "data": {"junit.xml": "<ok/>"}}, namespace)
        kubeconfig = await token_kubeconfig(admin, control_plane, namespace, "tatara-export-worker",
                                            tmp_path / "kubeconfig-export-worker")
        sources: list[dict[str, Any]] = [
            {"testReport": {"configmap": "results", "key": "junit.xml", "format": "Junit"}},
            {"receipts": {}}, {"processSnapshot": {"includeAttestationChain": False}}]
        for index, source in enumerate(sources):
            run = await run_worker(kubeconfig, admin, stdout_export(source), namespace,
                                   configmap=f"pr-1-export-{index}-receipt")
            assert run.returncode == 0, run.stderr
            records = [json.loads(line) for line in run.stderr.splitlines() if line.strip()]
            # a refused request is logged as a warning or an error, naming the status: match whole log fields,
            # never substrings of the line (a timestamp's milliseconds or a hash can read "403")
            assert {r["level"] for r in records} <= {"debug", "info"}, run.stderr
            assert not any("forbidden" in r["msg"].lower() or FORBIDDEN.search(r["msg"]) for r in records), \
                run.stderr
            assert run.receipt["evidence"]["outcome"] == "Shipped"
            assert json.loads(run.stdout)["run_id"] == f"{namespace}/pr-1"
    finally:
        for resource, name in created:
            with contextlib.suppress(NotFound):
                await admin.delete(resource, name)


async def test_without_create_on_configmaps_the_receipt_is_refused_and_the_worker_exits_1(
        control_plane: LocalControlPlane, admin: KubeClient, namespace: str, tmp_path: Path) -> None:
    await install_crds(admin, all_crds())
    await admin.create(SERVICE_ACCOUNTS, {"metadata": {"name": "narrow"}}, namespace)
    await admin.create(ROLES, {"metadata": {"name": "narrow"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": ["tatara.pleme.io"], "resources": ["processes"], "verbs": ["get"]},
    ]}, namespace)
    await admin.create(ROLE_BINDINGS, {"metadata": {"name": "narrow"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "narrow"},
        "subjects": [{"kind": "ServiceAccount", "name": "narrow", "namespace": namespace}]}, namespace)
    kubeconfig = await token_kubeconfig(admin, control_plane, namespace, "narrow", tmp_path / "kubeconfig-narrow")
    run = await run_worker(kubeconfig, admin, stdout_export({"runMarker": {"labels": {}}}), namespace)
    assert run.returncode == 1
    assert run.configmap == {}, "no receipt without create"
    assert "403" in run.stderr
    assert f"system:serviceaccount:{namespace}:narrow" in run.stderr
