"""Fixtures: the tatara + Flux CRDs installed; the Process reconciler, the pool reconciler and a Flux
stand-in running in-process for one namespace, against the real local API server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import anyio
from prometheus_client import CollectorRegistry

from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared.kube.client import KubeClient
from shared.kube.manager import Manager
from tools.standins.flux import FluxStandIn


@dataclass
class Running:
    """The managers of a running pair, for ``idle()`` checks and the pool reconciler's metrics."""

    process: Manager
    pool: Manager
    pool_registry: CollectorRegistry

    def idle(self) -> bool:
        return self.process.idle() and self.pool.idle()


@asynccontextmanager
async def both_running(client: KubeClient, namespace: str, *, heartbeat: int = 30,
                       spawn_timeout: timedelta = timedelta(minutes=10)) -> AsyncIterator[Running]:
    """Both reconcilers (leader election off, health on ephemeral ports) and a Flux stand-in, for one namespace."""
    process_config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                                      health_port=0, table_status_interval=0.2)
    pool_config = PoolReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                                       health_port=0, heartbeat_seconds=heartbeat, spawn_timeout=spawn_timeout)
    registry = CollectorRegistry()
    process = build_process(client, process_config, registry=CollectorRegistry(), handle_signals=False)
    pool = build_pool(client, pool_config, registry=registry, handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(process.run)
        tg.start_soon(pool.run)
        tg.start_soon(FluxStandIn(client, namespace=namespace).run)
        try:
            yield Running(process, pool, registry)
        finally:
            pool.stop()
            process.stop()
            tg.cancel_scope.cancel()
