"""Every metric a dashboard query names is in ``/metrics`` of the running controllers.

Both binaries' apps run in-process against the session API server (leader election on, Lease in the test
namespace, so ``leader_election_master_status`` has a sample; each app a one-member ring of dynamic sharding, so
the ``controller_sharding_*`` series exist), a pool fills with two members, an allocation
binds and is released. Then ``/metrics`` of each health server is scraped over HTTP (the process registry:
controller-runtime series, ``process_*``) and the apps' domain registries (fresh per test, the process
registry in the binary) are rendered; each PromQL expression of the charts' dashboards is parsed with
``promql_parser`` and every metric it names must be exported (a histogram's ``_bucket``/``_sum``/``_count``
through its family)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import anyio
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.app import build as build_pool
from pool_reconciler.config import PoolReconcilerConfig
from reconciler.app import build as build_process
from reconciler.config import ReconcilerConfig
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS
from shared.kube.client import KubeClient
from shared.kube.manager import Manager
from shared.kube.metrics import render
from tests.integration.pool_reconciler.test_pool_allocation import (
    TIMEOUT,
    allocation_doc,
    pool_doc,
    read_or_none,
    wait_free,
    wait_phase,
)
from tests.support import dashboards as dash
from tests.support.kube import wait_for
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def both_leading(client: KubeClient,
                       namespace: str) -> AsyncIterator[tuple[Manager, Manager, list[CollectorRegistry]]]:
    """Both apps with leader election on (Leases in ``namespace``), each a one-member ring of dynamic sharding (so
    every panel has its series, the sharding row's too: docs/architecture.md#dynamic-sharding), fresh domain
    registries, a Flux stand-in."""
    process_config = ReconcilerConfig(watch_namespace=namespace, leader_elect=True,
                                      leader_election_namespace=namespace, health_host="127.0.0.1", health_port=0,
                                      table_status_interval=0.2, sharding="dynamic", shard_name=f"{namespace}-r")
    pool_config = PoolReconcilerConfig(watch_namespace=namespace, leader_elect=True,
                                       leader_election_namespace=namespace, health_host="127.0.0.1",
                                       health_port=0, sharding="dynamic", shard_name=f"{namespace}-p")
    registries = [CollectorRegistry(), CollectorRegistry()]
    process = build_process(client, process_config, registry=registries[0], handle_signals=False)
    pool = build_pool(client, pool_config, registry=registries[1], handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(process.run)
        tg.start_soon(pool.run)
        tg.start_soon(FluxStandIn(client, namespace=namespace).run)
        try:
            yield process, pool, registries
        finally:
            pool.stop()
            process.stop()
            tg.cancel_scope.cancel()


async def scrape(manager: Manager) -> str:
    assert manager.health is not None
    url = f"http://127.0.0.1:{manager.health.port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        return await resp.text()


async def test_every_dashboard_query_names_an_exported_metric(kc: KubeClient, namespace: str) -> None:
    async with both_leading(kc, namespace) as (process, pool, registries):
        await kc.create(EPHEMERAL_POOLS, pool_doc("dash", 1), namespace)
        await wait_free(kc, namespace, "dash", 1)
        await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("d1", "dash", namespace), namespace)
        await wait_phase(kc, namespace, "d1", "Bound")
        await kc.delete(EPHEMERAL_ALLOCATIONS, "d1", namespace)

        async def released() -> bool:
            return await read_or_none(kc, EPHEMERAL_ALLOCATIONS, "d1", namespace) is None

        await wait_for(released, timeout=TIMEOUT, what="allocation d1 released")
        expositions = {"tatara-reconciler": await scrape(process) + render(registries[0]).decode(),
                       "tatara-pool-reconciler": await scrape(pool) + render(registries[1]).decode()}

    for chart, text in expositions.items():
        types = dash.exported_types(text)
        # The workload really ran: series with samples, not only declared families.
        assert "leader_election_master_status" in types
        assert 'leader_election_master_status{name="' in text
        assert "controller_runtime_reconcile_time_seconds_bucket" in types
        (path,) = dash.ROOT.glob(f"charts/{chart}/dashboards/*.json")
        checked, missing = 0, {}
        for where, expr in dash.expressions(dash.load(path)):
            names = dash.metric_names(expr)
            checked += len(names)
            unknown = sorted(n for n in names if not dash.exported(n, types))
            if unknown:
                missing[where] = unknown
        assert checked > 20
        assert missing == {}, f"{chart}: dashboard queries name metrics /metrics does not export"
    pool_text = expositions["tatara-pool-reconciler"]
    assert 'tatara_pool_binds_total{outcome="bound"}' in pool_text
    assert "tatara_allocation_bind_seconds_bucket{" in pool_text
    assert "tatara_process_phase_transitions_total{" in expositions["tatara-reconciler"]
