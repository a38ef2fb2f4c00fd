"""The node tier (``node`` marker): the product as users run it, on a real node.

One control plane configured as a cluster (``for_node=True``: ServiceAccount admission, Node+RBAC, the
workload controllers, kube-scheduler), one :class:`~tools.controlplane.node.LocalNode` (containerd, runc and
the kubelet in a sandbox of their own), the project's image built from its ``Containerfile`` and imported,
both charts installed by ``helm install --wait`` under Pod Security ``restricted`` with two replicas each, and
real NATS on the host's loopback that pods reach on the node IP — shared by the tier's tests
(README.md#a-real-node).

Processes with a Flux intent need their Kustomization Ready: the tests run the labelled Flux stand-in for
their namespace (``tests/e2e/flux`` and ``tatara up`` judge the same objects with real Flux).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from shared.kube.client import NAMESPACES, KubeClient
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.controlplane.node import node_prerequisites
from tools.nats_server import NatsServer
from tools.node_stack import RECONCILER, RELEASE_NAMESPACE, NodeStack, pool_values, reconciler_values
from tools.up_node import install_controllers

ROOT = Path(__file__).resolve().parents[3]
EXPORTS_NAMESPACE = "node-exports"
"""The namespace the reconciler chart gives the export worker's ServiceAccount and RoleBinding."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/e2e/node as ``node`` (and, through the root conftest, ``integration``)."""
    for item in items:
        if "/e2e/node/" in str(item.path):
            item.add_marker(pytest.mark.node)


@dataclass
class NodeEnv:
    """The session's cluster: the plane, the node stack (helm, kubectl, the image), NATS, and the loopback
    port pods reach an HTTP receiver on (a test starts :class:`~tools.http_receiver.HttpReceiver` there)."""

    plane: LocalControlPlane
    stack: NodeStack
    nats: NatsServer
    receiver_port: int

    @property
    def node_ip(self) -> str:
        assert self.stack.node is not None
        return self.stack.node.ip

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """The pinned kubectl's stdout (raises on a non-zero exit when ``check``)."""
        return self.stack.kubectl(*args, stdin=stdin, check=check)

    def kubectl_run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """The pinned kubectl's whole result, whatever its exit code."""
        return self.stack.kubectl_run(*args, stdin=stdin)

    def values(self, chart: str, **overrides: Any) -> dict[str, Any]:
        """The values the session installed ``chart`` with."""
        if chart == RECONCILER:
            return reconciler_values(self.stack.image, [EXPORTS_NAMESPACE], **overrides)
        return pool_values(self.stack.image, **overrides)


@pytest.fixture(scope="package")
def node_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeEnv]:
    """Start everything (module docstring); stop it all once the tier's tests are done."""
    problems = node_prerequisites()
    if problems:
        pytest.fail(f"the node tier needs {'; '.join(problems)}")
    with LocalControlPlane(for_node=True, work_dir=Path(tmp_path_factory.mktemp("node-plane"))) as plane, \
            NatsServer() as nats:
        receiver_port = free_port()
        assert nats.port is not None
        # the node's logs (kubelet, containerd, proxy, every pod's) stay in pytest's temp folder for a failure
        with NodeStack(plane, forwards=[nats.port, receiver_port],
                       log_dir=Path(tmp_path_factory.mktemp("node-logs"))) as stack:
            charts = [doc for path in sorted((ROOT / "charts").glob("*/crds/*.yaml")) for doc in load_yaml_docs(path)]
            install_crds(plane.kubeconfig, [*charts, *third_party_crds()])
            env = NodeEnv(plane, stack, nats, receiver_port)
            stack.kubectl("create", "namespace", EXPORTS_NAMESPACE)
            anyio.run(install_controllers, stack, [EXPORTS_NAMESPACE])  # the values of NodeEnv.values
            yield env


@pytest.fixture
async def kc(node_env: NodeEnv) -> AsyncIterator[KubeClient]:
    """An admin client of the session's cluster."""
    async with await KubeClient.from_kubeconfig(node_env.plane.kubeconfig) as client:
        yield client


@pytest.fixture
async def node_ns(kc: KubeClient) -> str:
    """A fresh namespace of the session's cluster."""
    name = f"n-{uuid.uuid4().hex[:8]}"
    await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


__all__ = ["EXPORTS_NAMESPACE", "RELEASE_NAMESPACE", "NodeEnv"]
