"""Fixtures: the tatara + Flux CRDs installed, and the reconciler running in-process with a Flux stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from shared.controlplane import LocalControlPlane
from shared.kube.client import KubeClient, Resource
from shared.kube.manager import Manager
from tests.support.flux_standin import FluxStandIn
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds

CHARTS = Path(__file__).resolve().parents[3] / "charts"


@pytest.fixture(scope="session")
def crds_installed(control_plane: LocalControlPlane) -> None:
    tatara = [doc for path in sorted(CHARTS.glob("*/crds/*.yaml")) for doc in load_yaml_docs(path)]
    install_crds(control_plane.kubeconfig, [*tatara, *third_party_crds()])


@pytest.fixture
async def kc(control_plane: LocalControlPlane, crds_installed: None) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


Verdict = Callable[[Resource, dict[str, Any]], str | None]


@asynccontextmanager
async def reconciler_running(client: KubeClient, namespace: str, *, verdict: Verdict | None = None,
                             flux_delay: float = 0.0) -> AsyncIterator[Manager]:
    """The reconciler (leader election off, health on an ephemeral port) and a Flux stand-in, for one namespace.

    Yields the manager (``manager.idle()`` tells when its queue has settled)."""
    config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                              health_port=0, table_status_interval=0.2)
    manager = build(client, config, registry=CollectorRegistry(), handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        tg.start_soon(FluxStandIn(client, namespace=namespace, verdict=verdict, delay=flux_delay).run)
        try:
            yield manager
        finally:
            manager.stop()
            tg.cancel_scope.cancel()
