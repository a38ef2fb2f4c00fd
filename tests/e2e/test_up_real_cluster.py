"""``tatara up`` pointed at a cluster it did not start (a local control plane playing the "real cluster"): it
refuses next to a running tatara controller unless ``--force``, never overwrites a CRD, installs only the
missing ones after saying so, and starts no stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.domain.resources import KUSTOMIZATIONS
from shared.kube.client import CUSTOM_RESOURCE_DEFINITIONS, LEASES, NAMESPACES, KubeClient
from shared.kube.leader import format_micro_time
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds, third_party_crds
from tools.real_cluster import DEPLOYMENTS

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MARKER = "example.test/owner"


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[LocalControlPlane]:
    """A plane of its own: what these tests install or refuse to install must not meet other tests' CRDs."""
    with LocalControlPlane() as plane:
        yield plane


@pytest.fixture
async def admin(real_cluster: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(real_cluster.kubeconfig) as kc:
        yield kc


def up(plane: LocalControlPlane, tmp_path: Path, *extra: str, via_env: bool = False,
       kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``tatara up --exit-when-settled`` on ``plane`` (as its admin unless ``kubeconfig``) with no examples."""
    examples = tmp_path / "no-examples"
    examples.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    config = kubeconfig or plane.kubeconfig
    target = []
    if via_env:
        env["KUBECONFIG"] = str(config)
    else:
        target = ["--kubeconfig", str(config)]
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "up", *target, "--exit-when-settled", "--timeout", "60",
         "--examples", str(examples), "--reconciler-port", str(free_port()), "--pool-port", str(free_port()), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


async def crd_names(kc: KubeClient) -> set[str]:
    return {c["metadata"]["name"] for c in msgspec.json.decode(await kc.list(CUSTOM_RESOURCE_DEFINITIONS))["items"]}


async def held_lease(kc: KubeClient, namespace: str) -> None:
    await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await kc.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": "tatara-reconciler", "namespace": namespace},
                             "spec": {"holderIdentity": "tatara-reconciler-7d9f-abcde", "leaseDurationSeconds": 3600,
                                      "renewTime": format_micro_time(datetime.now(UTC))}}, namespace)


async def test_a_held_lease_of_ours_makes_up_refuse_and_change_nothing(
    real_cluster: LocalControlPlane, admin: KubeClient, tmp_path: Path
) -> None:
    await held_lease(admin, "tatara-system")
    before = await crd_names(admin)
    try:
        result = up(real_cluster, tmp_path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "refusing to run" in result.stderr
        assert "Lease tatara-system/tatara-reconciler held by tatara-reconciler-7d9f-abcde" in result.stderr
        assert "--force" in result.stderr
        assert "running (pid" not in result.stdout, "a reconciler was started"
        assert await crd_names(admin) == before
    finally:
        await admin.delete(LEASES, "tatara-reconciler", "tatara-system")


async def test_a_tatara_controller_deployment_makes_up_refuse(
    real_cluster: LocalControlPlane, admin: KubeClient, tmp_path: Path
) -> None:
    labels = {"app.kubernetes.io/name": "tatara-pool-reconciler", "app.kubernetes.io/part-of": "tatara",
              "app.kubernetes.io/component": "controller"}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "pools-tatara-pool-reconciler", "namespace": "default", "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "ghcr.io/pleme-io/tatara:0.2.0"}]}}}}
    await admin.create(DEPLOYMENTS, deployment, "default")
    try:
        result = up(real_cluster, tmp_path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Deployment default/pools-tatara-pool-reconciler (2 replicas)" in result.stderr
    finally:
        await admin.delete(DEPLOYMENTS, "pools-tatara-pool-reconciler", "default")


async def test_a_user_who_cannot_list_leases_is_refused_rather_than_run_blind(
    real_cluster: LocalControlPlane, admin: KubeClient, tmp_path: Path
) -> None:
    before = await crd_names(admin)
    result = up(real_cluster, tmp_path, kubeconfig=real_cluster.kubeconfig_for("nobody"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot tell: listing Leases in all namespaces is forbidden" in result.stderr
    assert await crd_names(admin) == before


async def test_with_kubeconfig_in_the_environment_existing_crds_are_kept_missing_ones_installed_no_stand_in(
    real_cluster: LocalControlPlane, admin: KubeClient, tmp_path: Path
) -> None:
    kustomizations = next(c for c in third_party_crds() if c["spec"]["names"]["kind"] == "Kustomization")
    theirs = {**kustomizations, "metadata": {**kustomizations["metadata"], "labels": {MARKER: "the-cluster"}}}
    await install_crds(admin, [theirs])
    before = msgspec.json.decode(await admin.get(CUSTOM_RESOURCE_DEFINITIONS, theirs["metadata"]["name"]))
    await admin.create(KUSTOMIZATIONS, {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "real"},
        "spec": {"interval": "5m", "path": "./", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "repo"}}}, "default")

    result = up(real_cluster, tmp_path, via_env=True)

    assert result.returncode == 0, result.stdout + result.stderr
    after = msgspec.json.decode(await admin.get(CUSTOM_RESOURCE_DEFINITIONS, theirs["metadata"]["name"]))
    assert after["metadata"]["labels"] == {MARKER: "the-cluster"}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "the CRD was rewritten"
    assert {c["metadata"]["name"] for c in all_crds()} <= await crd_names(admin)
    missing = [c["metadata"]["name"] for c in all_crds() if c["metadata"]["name"] != theirs["metadata"]["name"]]
    assert f"installing {len(missing)} missing CRDs: {', '.join(missing)}" in result.stdout
    assert f"kept 1 existing CRDs as they are (not overwritten): {theirs['metadata']['name']}" in result.stdout
    assert "STAND-IN" not in result.stdout
    assert "no stand-in started" in result.stdout
    kustomization = msgspec.json.decode(await admin.get(KUSTOMIZATIONS, "real", "default"))
    assert "status" not in kustomization or not kustomization["status"].get("conditions"), "something marked it"
    # A second run finds nothing missing.
    again = up(real_cluster, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no CRD missing: nothing installed" in again.stdout


async def test_force_runs_next_to_a_held_lease_and_says_so(
    real_cluster: LocalControlPlane, admin: KubeClient, tmp_path: Path
) -> None:
    await held_lease(admin, "tatara-forced")
    try:
        result = up(real_cluster, tmp_path, "--force")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "--force: running next to a tatara controller" in result.stdout
        assert "tatara-reconciler running (pid" in result.stdout
    finally:
        await admin.delete(LEASES, "tatara-reconciler", "tatara-forced")
