"""docs/migration.md's commands, run as written against the local control plane: a release of the reference's
chart (its stand-in, tests/fixtures/reference-chart) moved to ours and back, and one namespace moved while
another stays with the reference.

The blocks are the doc's ``sh`` blocks after a ``<!-- migration-test: <name> -->`` line; the test gives them
their variables, ``KUBECONFIG`` and ``helm`` / ``kubectl`` on ``PATH``, and runs them with ``bash -eu`` from the
repository root. Without a node no pod runs: what is checked is what the API server holds (the releases'
objects, their args and images), which is what the commands change.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tools.controlplane import LocalControlPlane
from tools.controlplane.build import Toolchain

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "migration.md"
REFERENCE_CHART = ROOT / "tests" / "fixtures" / "reference-chart" / "tatara-reconciler"
REFERENCE_IMAGE = "ghcr.io/pleme-io/tatara-reconciler:0.2.0"
BLOCK = re.compile(r"<!-- migration-test: (\S+) -->\n```sh\n(.*?)```", re.DOTALL)


def blocks() -> dict[str, str]:
    return {name: body for name, body in BLOCK.findall(DOC.read_text())}


def test_the_doc_has_the_blocks_this_test_runs() -> None:
    assert set(blocks()) == {"cluster", "namespace", "back"}


class Plane:
    """``helm`` and ``kubectl`` against the plane, and the doc's blocks with their variables."""

    def __init__(self, plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "helm").symlink_to(helm)
        (self.bin / "kubectl").symlink_to(Toolchain.default().binary("kubectl"))
        self.env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "PATH": f"{self.bin}:{os.environ['PATH']}",
                    "HELM_CACHE_HOME": str(tmp_path / "helm-cache"), "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
                    "HELM_DATA_HOME": str(tmp_path / "helm-data")}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=180, check=False, env=self.env,
                              cwd=ROOT)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def block(self, name: str, variables: Mapping[str, str]) -> None:
        script = blocks()[name]
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                              timeout=300, check=False, env={**self.env, **variables}, cwd=ROOT)
        assert proc.returncode == 0, f"migration block {name!r} failed:\n{script}\n{proc.stdout}\n{proc.stderr}"

    def get(self, *args: str) -> Any:
        return json.loads(self.run("kubectl", "get", *args, "-o", "json").stdout)

    def deployments(self, namespace: str) -> dict[str, Json]:
        return {d["metadata"]["labels"]["app.kubernetes.io/instance"]: d
                for d in self.get("deployments", "-n", namespace)["items"]}

    def history(self, namespace: str, release: str) -> list[Json]:
        out: list[Json] = json.loads(self.run("helm", "-n", namespace, "history", release, "-o", "json").stdout)
        return out


Json = dict[str, Any]


def container(deployment: Json) -> Json:
    (one,) = deployment["spec"]["template"]["spec"]["containers"]
    found: Json = one
    return found


def watched(deployment: Json) -> str:
    return next(a.split("=", 1)[1] for a in container(deployment)["args"] if a.startswith("--watch-namespace="))


@pytest.fixture
def plane(control_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> Plane:
    return Plane(control_plane, helm, tmp_path)


@pytest.fixture
def releases_ns(plane: Plane) -> Iterator[str]:
    """A namespace for the releases; its releases are uninstalled and it is deleted at the end."""
    name = f"mig-{uuid.uuid4().hex[:8]}"
    plane.run("kubectl", "create", "namespace", name)
    try:
        yield name
    finally:
        for release in json.loads(plane.run("helm", "-n", name, "list", "-a", "-o", "json").stdout):
            plane.run("helm", "-n", name, "uninstall", release["name"], "--wait=false", check=False)
        plane.run("kubectl", "delete", "namespace", name, "--wait=false", check=False)


def test_a_whole_cluster_moves_to_our_chart_and_back(plane: Plane, releases_ns: str) -> None:
    release = f"ref-{uuid.uuid4().hex[:6]}"
    plane.run("helm", "-n", releases_ns, "install", release, str(REFERENCE_CHART))
    before = plane.deployments(releases_ns)[release]
    assert container(before)["image"] == REFERENCE_IMAGE
    variables = {"NS": releases_ns, "RELEASE": release, "WATCH_NAMESPACE": ""}

    plane.block("cluster", variables)
    after = plane.deployments(releases_ns)[release]
    assert after["metadata"]["uid"] == before["metadata"]["uid"], "the reference's Deployment, replaced in place"
    assert after["metadata"]["name"] == f"{release}-tatara-reconciler"
    assert container(after)["image"] != REFERENCE_IMAGE
    assert "--leader-elect=true" in container(after)["args"]
    assert watched(after) == ""
    assert after["spec"]["replicas"] == 2
    history = plane.history(releases_ns, release)
    assert [(h["revision"], h["chart"], h["status"]) for h in history] == [
        (1, "tatara-reconciler-0.2.0", "superseded"), (2, "tatara-reconciler-0.1.0", "deployed")]
    binding = plane.get("clusterrolebinding", f"{release}-tatara-reconciler")
    assert binding["subjects"][0]["namespace"] == releases_ns
    processes = plane.get("crd", "processes.tatara.pleme.io")
    assert "Releasing" in json.dumps(processes["spec"]), "our CRDs were applied"

    plane.block("back", {**variables, "REFERENCE_REVISION": "1"})
    back = plane.deployments(releases_ns)[release]
    assert back["metadata"]["uid"] == before["metadata"]["uid"]
    assert container(back)["image"] == REFERENCE_IMAGE
    assert back["spec"]["replicas"] == 1
    assert "--heartbeat-seconds=30" in container(back)["args"]
    assert plane.history(releases_ns, release)[-1]["status"] == "deployed"


def test_one_namespace_moves_while_another_stays_with_the_reference(plane: Plane, releases_ns: str) -> None:
    """Each namespace has exactly one controller before and after: the moved one ours, the other the
    reference's."""
    move, stay = (f"mig-{role}-{uuid.uuid4().hex[:6]}" for role in ("move", "stay"))
    for ns in (move, stay):
        plane.run("kubectl", "create", "namespace", ns)
    try:
        for ns in (move, stay):
            plane.run("helm", "-n", releases_ns, "install", f"ref-{ns}", str(REFERENCE_CHART),
                      "--set", f"watchNamespace={ns}")
        plane.block("namespace", {"NS": releases_ns, "RELEASE": f"ref-{move}", "MOVE": move})

        deployments = plane.deployments(releases_ns)
        assert set(deployments) == {f"ref-{stay}", f"tatara-{move}"}
        ours, theirs = deployments[f"tatara-{move}"], deployments[f"ref-{stay}"]
        assert (watched(ours), watched(theirs)) == (move, stay)
        assert container(theirs)["image"] == REFERENCE_IMAGE
        assert f"--leader-election-lease-name=tatara-reconciler-{move}" in container(ours)["args"]
        running = [watched(d) for d in deployments.values() if d["spec"]["replicas"] > 0]
        assert sorted(running) == sorted([move, stay]), "never two controllers on one namespace"
        kept = plane.history(releases_ns, f"ref-{move}")
        assert kept[-1]["status"] == "uninstalled", "the reference's history is kept to go back to"
        assert plane.get("rolebinding", "-n", move)["items"], "ours is bound in the namespace it watches"
    finally:
        for ns in (move, stay):
            plane.run("kubectl", "delete", "namespace", ns, "--wait=false", check=False)
