"""Fixtures shared by the integration tests: every CRD installed once, and a KubeClient per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.kube.client import KubeClient
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds
from tools.controlplane import LocalControlPlane

CHARTS = Path(__file__).resolve().parents[2] / "charts"


@pytest.fixture(scope="session")
def crds_installed(control_plane: LocalControlPlane) -> None:
    """The tatara CRDs (charts/*/crds) and the Flux / DNSEndpoint schemas, Established and listable."""
    tatara = [doc for path in sorted(CHARTS.glob("*/crds/*.yaml")) for doc in load_yaml_docs(path)]
    install_crds(control_plane.kubeconfig, [*tatara, *third_party_crds()])


@pytest.fixture
async def kc(control_plane: LocalControlPlane, crds_installed: None) -> AsyncIterator[KubeClient]:
    """An admin KubeClient with every CRD installed; closed after the test."""
    client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()
