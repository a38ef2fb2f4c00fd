"""Fixtures: the reconciler running in-process with a Flux stand-in.

The CRDs and the `kc` client come from tests/integration/conftest.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from shared.kube.client import KubeClient
from shared.kube.manager import Manager
from tools.standins.flux import FluxStandIn, Verdict

NO_HEARTBEAT = 3600
"""A HEARTBEAT far beyond any wait of these tests: what happens must have been asked for (a TICK) or
woken by a watch."""


@asynccontextmanager
async def reconciler_running(client: KubeClient, namespace: str, *, verdict: Verdict | None = None,
                             flux_delay: float = 0.0, heartbeat_seconds: int = 30,
                             dns_lb_target: str = "", standin: bool = True, flux_client: KubeClient | None = None,
                             **settings: Any) -> AsyncIterator[Manager]:
    """The reconciler (leader election off, health on an ephemeral port) and a Flux stand-in, for one namespace.

    ``heartbeat_seconds`` is HEARTBEAT (a test that proves a watch or a TICK, not the heartbeat, woke a
    Process sets it far beyond its own timeout); ``dns_lb_target`` makes routing render DNSEndpoints;
    ``standin=False`` starts no Flux stand-in (real Flux judges the children: tests/e2e/flux);
    ``flux_client`` runs the stand-in with other credentials than the reconciler's (default ``client``);
    ``settings`` are further :class:`ReconcilerConfig` fields (e.g. ``export_worker_image``).
    Yields the manager (``manager.idle()`` tells when its queue has settled)."""
    config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                              health_port=0, table_status_interval=0.2, heartbeat_seconds=heartbeat_seconds,
                              dns_lb_target=dns_lb_target, **settings)
    manager = build(client, config, registry=CollectorRegistry(), handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        if standin:
            tg.start_soon(FluxStandIn(flux_client or client, namespace=namespace, verdict=verdict,
                                      delay=flux_delay).run)
        try:
            yield manager
        finally:
            manager.stop()
            tg.cancel_scope.cancel()
