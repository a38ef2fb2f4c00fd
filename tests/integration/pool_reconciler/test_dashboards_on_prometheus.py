"""The charts' dashboards and alerts on a real Prometheus (Debian's ``prometheus`` package, which .ci/run
installs; without it the test skips).

Both apps run in-process against the session API server (:func:`both_leading`), their ``/metrics`` and their
domain registries are served over HTTP, and a Prometheus scrapes them every second under the labels a
ServiceMonitor would give them (``job="<release>-<chart>-metrics"``, ``namespace``; ``instance`` = the
target). While a pool fills, an allocation binds and is released, the Process reconciler drives the
members through their phases. Then every dashboard query, with the dashboard's variables filled in as
Grafana would, must return data; every variable query must list series; every alert expression must
evaluate. A query may come back empty only when the event it counts did not happen in this workload
(:data:`NO_EVENT`).

In-process both apps share one runtime registry (controller-runtime series, ``process_*``), so both jobs
serve it: this test proves that the queries find data under the job/namespace/instance labels, not that
they separate the two binaries (tests/unit/charts/test_dashboards.py checks each query selects its job).
As in the binaries' entrypoint, every API response of the shared client is counted."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS
from shared.kube.client import KubeClient
from shared.kube.health import HealthServer
from shared.kube.manager import Manager
from shared.kube.metrics import render, runtime_metrics
from tests.integration.pool_reconciler.test_dashboard_queries import both_leading
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
from tests.support.prometheus import PROMETHEUS, grafana, prometheus, query, series
from tools import alerts
from tools.controlplane.cluster import free_port

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (.ci/run installs it)")]

JOBS = {"tatara-reconciler": "rel-tatara-reconciler-metrics",
        "tatara-pool-reconciler": "rel-tatara-pool-reconciler-metrics"}

NO_EVENT = {
    "Signals": "no signal annotation is written in this workload",
}
"""Panels (by title) whose query may be empty: the workload never produces what they count."""


@asynccontextmanager
async def serving(registry: CollectorRegistry) -> AsyncIterator[int]:
    """The domain registry at ``/metrics`` (in the binary it is the process registry the health server serves)."""
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=render(registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port
    finally:
        await runner.cleanup()


async def test_every_dashboard_query_returns_data_and_every_alert_evaluates(
    kc: KubeClient, namespace: str, tmp_path: Path
) -> None:
    # as the binaries' entrypoint does (shared/kube/entrypoint.py): count every API response
    requests = runtime_metrics().rest_client_requests_total
    kc.on_response.append(lambda method, code, host: requests.labels(code, method, host).inc())
    async with both_leading(kc, namespace) as (process, pool, registries), \
            serving(registries[0]) as process_domain, serving(registries[1]) as pool_domain:
        managers: dict[str, Manager] = {"tatara-reconciler": process, "tatara-pool-reconciler": pool}
        domain = {"tatara-reconciler": process_domain, "tatara-pool-reconciler": pool_domain}
        targets = {}
        for chart, manager in managers.items():
            health = manager.health
            assert health is not None

            async def bound(health: HealthServer = health) -> int | None:
                try:
                    return health.port
                except RuntimeError:
                    return None

            port = await wait_for(bound, what=f"{chart} health server bound")
            targets[JOBS[chart]] = [f"127.0.0.1:{port}", f"127.0.0.1:{domain[chart]}"]
        async with prometheus(tmp_path, targets, namespace) as url, aiohttp.ClientSession() as session:
            async def all_up() -> bool:
                try:
                    up = await query(session, url, "up == 1")
                except (aiohttp.ClientError, AssertionError):
                    return False
                return len(up) == 4

            await wait_for(all_up, timeout=TIMEOUT, what="Prometheus scraping all four targets")
            await kc.create(EPHEMERAL_POOLS, pool_doc("prom", 1), namespace)
            await wait_free(kc, namespace, "prom", 1)
            await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("p1", "prom", namespace), namespace)
            await wait_phase(kc, namespace, "p1", "Bound")
            await kc.delete(EPHEMERAL_ALLOCATIONS, "p1", namespace)

            async def released() -> bool:
                return await read_or_none(kc, EPHEMERAL_ALLOCATIONS, "p1", namespace) is None

            await wait_for(released, timeout=TIMEOUT, what="allocation p1 released")
            empty: dict[str, dict[str, str]] = {}
            for chart, job in JOBS.items():
                (path,) = dash.ROOT.glob(f"charts/{chart}/dashboards/*.json")
                for where, expr in dash.expressions(dash.load(path)):
                    filled = grafana(expr, job, namespace)
                    if where.startswith("variable"):
                        assert await series(session, url, filled), f"{chart} {where}: {filled}"
                        continue

                    async def has_data(filled: str = filled) -> bool:
                        return bool(await query(session, url, filled))

                    try:
                        await wait_for(has_data, timeout=15, what=f"{chart} {where}")
                    except TimeoutError:
                        empty.setdefault(chart, {})[where] = filled
                selector = f'job="{job}", namespace="{namespace}"'
                for group in alerts.rules(chart)["groups"]:
                    for rule in group["rules"]:
                        await query(session, url, rule["expr"].replace(alerts.SELECTOR, selector))
            allowed = {chart: {w: e for w, e in found.items()
                               if not any(re.search(rf"panel '{re.escape(title)}'", w) for title in NO_EVENT)}
                       for chart, found in empty.items()}
            missing = {c: sorted(f) for c, f in allowed.items() if f}
            assert missing == {}, f"dashboard queries without data: {missing}"
