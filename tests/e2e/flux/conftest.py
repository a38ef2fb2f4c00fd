"""The real-Flux tier's fixtures: its own control plane (real Flux watches every namespace and would fight the
stand-in the other tiers run on the session plane), the tatara CRDs plus the real Flux CRDs, and the real
source-, kustomize- and helm-controller with a TLS registry and a git server (tools/flux_stack.py), all built
from their Go modules on first use (``make control-plane`` builds them ahead of time)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from shared.kube.client import NAMESPACES, KubeClient
from tests.integration.conftest import CHARTS
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds
from tools.controlplane import LocalControlPlane
from tools.flux_stack import FluxStack, flux_crds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this tier ``flux`` (``pytest -m flux`` runs it alone; the default run includes it)."""
    for item in items:
        if "/e2e/flux/" in str(item.path):
            item.add_marker(pytest.mark.flux)


@pytest.fixture(scope="package")
def flux_plane() -> Iterator[LocalControlPlane]:
    """A control plane for this tier alone, with every CRD: tatara's, DNSEndpoint, and the real Flux ones."""
    with LocalControlPlane() as plane:
        tatara = [doc for path in sorted(CHARTS.glob("*/crds/*.yaml")) for doc in load_yaml_docs(path)]
        install_crds(plane.kubeconfig, [*tatara, *third_party_crds()])
        install_crds(plane.kubeconfig, flux_crds())  # over the schema-only copies
        yield plane


@pytest.fixture(scope="package")
def flux(flux_plane: LocalControlPlane) -> Iterator[FluxStack]:
    """Real Flux on :func:`flux_plane`; every process stopped at the end of the tier."""
    with FluxStack(flux_plane) as stack:
        yield stack


@pytest.fixture
async def fkc(flux_plane: LocalControlPlane, flux: FluxStack) -> AsyncIterator[KubeClient]:
    """An admin client on the real-Flux plane (with Flux running)."""
    async with await KubeClient.from_kubeconfig(flux_plane.kubeconfig) as client:
        yield client


@pytest.fixture
async def fns(fkc: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace on the real-Flux plane, deleted after the test."""
    name = f"f-{uuid.uuid4().hex[:10]}"
    await fkc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await fkc.delete(NAMESPACES, name)
