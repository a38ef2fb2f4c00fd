"""Session-wide fixtures: one real local control plane (etcd + kube-apiserver + kube-controller-manager), helm,
kubeconform."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from kubernetes_asyncio import client

from tests.support.kube import api_client
from tools.controlplane import LocalControlPlane
from tools.controlplane.helm import Helm
from tools.controlplane.kubeconform import Kubeconform

# Property tests have no per-example deadline: a wall-clock bound fails them on a busy machine (two cores
# shared with a control plane), which says nothing about the code. Every other Hypothesis default stays.
settings.register_profile("tatara", deadline=None)
settings.load_profile("tatara")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    """A started control plane shared by the whole session; stopped (no processes, no files) at the end.

    The binaries are built on first use (``tatara control-plane build`` does it ahead of time). The API server
    keeps an audit log of ServiceAccount requests (tools/controlplane/audit.py), which the RBAC test reads.
    """
    with LocalControlPlane(audit=True) as plane:
        yield plane


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned helm binary, built from its Go module on first use (tools/controlplane/helm.py;
    ``make control-plane`` builds it ahead of time, a cold build takes about 100 s)."""
    return Helm.default().ensure_built()


@pytest.fixture(scope="session")
def kubeconform() -> Path:
    """The pinned kubeconform binary, built from its Go module on first use (tools/controlplane/kubeconform.py;
    ``make control-plane`` builds it ahead of time); skipped only when there is no ``go`` to build it with."""
    built = Kubeconform.default()
    if not built.is_built() and shutil.which("go") is None:
        pytest.skip("kubeconform is not built and `go` is not on PATH to build it")
    return built.ensure_built()


@pytest.fixture
async def kube(control_plane: LocalControlPlane) -> AsyncIterator[client.ApiClient]:
    """An admin (``system:masters``) kubernetes-asyncio client, closed after the test."""
    api = await api_client(control_plane.kubeconfig)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def namespace(kube: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace per test (never reused: a deleted namespace may linger Terminating)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(kube)
    await core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        await core.delete_namespace(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration and tests/e2e as ``integration``."""
    for item in items:
        if "/integration/" in str(item.path) or "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.integration)
