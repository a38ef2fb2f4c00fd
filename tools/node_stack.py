"""The product as users run it, locally: a real node, the project's image on it, both charts installed by helm.

What ``tatara up`` (its default mode) and the node tier (``tests/e2e/node``) share (README.md#a-real-node):

1. the images are built (:class:`~tools.controlplane.images.ImageBuilder`: the project's ``Containerfile``
   on the Debian base, the examples' ``echo`` workload; cached by content);
2. a :class:`~tools.controlplane.node.LocalNode` joins the control plane (started ``for_node=True``) and
   the images are imported into its containerd;
3. the namespace :data:`RELEASE_NAMESPACE` enforces Pod Security ``restricted``, and ``helm install --wait``
   installs both charts with the local image (``pullPolicy: Never``), two replicas each, so leader election
   is real, and the export worker's ServiceAccount + RBAC in the namespaces given.

The chart values are a pure function (:func:`reconciler_values`, :func:`pool_values`); the executor only runs
helm.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from tools.controlplane.cluster import LocalControlPlane
from tools.controlplane.helm import Helm
from tools.controlplane.images import ImageBuilder
from tools.controlplane.node import LocalNode

log = logging.getLogger(__name__)

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
RELEASE_NAMESPACE: Final = "tatara-system"
RECONCILER: Final = "tatara-reconciler"
POOL_RECONCILER: Final = "tatara-pool-reconciler"
CHARTS: Final = (RECONCILER, POOL_RECONCILER)
"""Chart names; each is installed as a release of the same name."""
RESTRICTED: Final = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")}
"""Pod Security Admission labels of :data:`RELEASE_NAMESPACE`."""
HELM_TIMEOUT: Final = "180s"


class ChartInstallError(RuntimeError):
    """``helm`` failed; the message has its output and the namespace's pods."""


def image_values(image: str) -> dict[str, Any]:
    """The charts' ``image`` block for a locally built ``repository:tag`` (never pulled)."""
    repository, _, tag = image.rpartition(":")
    return {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}}


def reconciler_values(image: str, export_namespaces: Sequence[str] = (), *, replicas: int = 2,
                      table_status_interval: int = 1) -> dict[str, Any]:
    """tatara-reconciler's values on the local node: the local image for the controller and its export Jobs,
    ``replicas`` replicas, the export worker's ServiceAccount + RBAC in ``export_namespaces``."""
    return {**image_values(image), "replicaCount": replicas,
            "config": {"exportWorkerImage": image, "tableStatusInterval": table_status_interval},
            "exportWorker": {"namespaces": sorted(set(export_namespaces))}}


def pool_values(image: str, *, replicas: int = 2, heartbeat_seconds: int = 5) -> dict[str, Any]:
    """tatara-pool-reconciler's values on the local node."""
    return {**image_values(image), "replicaCount": replicas, "config": {"heartbeatSeconds": heartbeat_seconds}}


@dataclass
class NodeStack:
    """A node on ``plane`` with the images imported; :meth:`install` puts the charts on it.

    Args:
        plane: a started control plane with ``for_node=True``.
        forwards: host loopback ports the pods reach on the node IP (NATS, the HTTP receiver).
        log_dir: where the node's logs are kept when the stack stops (None: they go with the node).
    """

    plane: LocalControlPlane
    forwards: Sequence[int] = ()
    log_dir: Path | None = None
    images: ImageBuilder = field(default_factory=ImageBuilder.default)
    node: LocalNode | None = None
    image: str = ""
    helm_binary: Path = field(default=Path())
    _namespace_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> NodeStack:
        """Build the images and helm if missing, start the node, import the images.

        Raises:
            tools.controlplane.node.NodeError, tools.controlplane.images.ImageError,
            tools.controlplane.build.BuildError: as :meth:`LocalNode.start` and the builders raise.
        """
        self.helm_binary = Helm.default().ensure_built()
        self.image, tatara = self.images.tatara(REPO_ROOT)
        echo = self.images.echo(REPO_ROOT)
        self.node = LocalNode(self.plane, forwards=self.forwards, log_dir=self.log_dir)
        self.node.start()
        try:
            for archive in (tatara, echo):
                self.node.import_image(archive)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.node is not None:
            self.node.stop()
            self.node = None

    def __enter__(self) -> NodeStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helm -------------------------------------------------------------------------

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run helm against the plane (admin kubeconfig).

        Raises:
            ChartInstallError: it exited non-zero and ``check``.
        """
        try:
            proc = subprocess.run([str(self.helm_binary), "--kubeconfig", str(self.plane.kubeconfig), *args],
                                  capture_output=True, text=True, check=False, timeout=600)
        except subprocess.TimeoutExpired as err:
            raise ChartInstallError(f"helm {' '.join(args)} did not finish within 600 s") from err
        if check and proc.returncode != 0:
            raise ChartInstallError(f"helm {' '.join(args)} failed (exit {proc.returncode}):\n"
                                    f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        return proc

    def install(self, chart: str, values: Mapping[str, Any], *, namespace: str = RELEASE_NAMESPACE,
                upgrade: bool = False) -> subprocess.CompletedProcess[str]:
        """``helm install`` (or ``upgrade``) the release ``chart`` from ``charts/<chart>`` with ``values``,
        ``--wait`` until its Deployment is rolled out, into ``namespace`` (made to enforce Pod Security
        ``restricted`` first).

        Raises:
            ChartInstallError: helm or kubectl failed (the pods' states are appended).
        """
        with self._namespace_lock:  # two installs at once would race to create it
            self.kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": RESTRICTED}}))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix=f"{chart}-values-") as handle:
            yaml.safe_dump(dict(values), handle)
            handle.flush()
            verb = ["upgrade"] if upgrade else ["install"]
            try:
                return self.helm(*verb, chart, str(REPO_ROOT / "charts" / chart), "-n", namespace,
                                 "-f", handle.name, "--wait", "--timeout", HELM_TIMEOUT)
            except ChartInstallError as err:
                raise ChartInstallError(f"{err}\npods:\n{self.pods_summary(namespace)}") from None

    def kubectl_run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against the plane (admin); its whole result, whatever its exit code.

        Raises:
            ChartInstallError: it did not finish within two minutes.
        """
        kubectl = self.plane.toolchain.binary("kubectl")
        try:
            return subprocess.run([str(kubectl), "--kubeconfig", str(self.plane.kubeconfig), *args], input=stdin,
                                  capture_output=True, text=True, check=False, timeout=120)
        except subprocess.TimeoutExpired as err:
            raise ChartInstallError(f"kubectl {' '.join(args)} did not finish within 120 s") from err

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run the pinned kubectl against the plane (admin); return its stdout.

        Raises:
            ChartInstallError: it exited non-zero and ``check``, or it timed out.
        """
        proc = self.kubectl_run(*args, stdin=stdin)
        if check and proc.returncode != 0:
            raise ChartInstallError(f"kubectl {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def pods_summary(self, namespace: str) -> str:
        """``kubectl get pods -o wide`` of ``namespace`` (best effort, for error messages)."""
        return self.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False)
