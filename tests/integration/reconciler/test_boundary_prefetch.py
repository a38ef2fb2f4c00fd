"""PromQL postconditions against a local Prometheus stand-in, with the reconciler running
(docs/behaviour.md#condition-kinds).

The stand-in is an aiohttp server on 127.0.0.1 answering ``/api/v1/query`` from a table; the
reconciler gets its URL as ``--prometheus-url`` (``ReconcilerConfig.prometheus_url``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.support.kube import wait_for
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio

VALUES = {"tatara_ok": "1", "tatara_broken": "0"}


@asynccontextmanager
async def prometheus_standin() -> AsyncIterator[str]:
    """A Prometheus query API answering each known query with a scalar; unknown → empty vector."""

    async def query(request: web.Request) -> web.Response:
        text = VALUES.get(request.query.get("query", ""))
        data: dict[str, Any] = ({"resultType": "scalar", "result": [1717243200.0, text]} if text is not None
                                else {"resultType": "vector", "result": []})
        return web.Response(text=json.dumps({"status": "success", "data": data}), content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def reconciler_with_prometheus(client: KubeClient, namespace: str, url: str) -> AsyncIterator[None]:
    config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                              health_port=0, table_status_interval=0.2, prometheus_url=url)
    manager = build(client, config, registry=CollectorRegistry(), handle_signals=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        tg.start_soon(FluxStandIn(client, namespace=namespace).run)
        try:
            yield
        finally:
            manager.stop()
            tg.cancel_scope.cancel()


def with_promql(name: str, query: str) -> dict[str, Any]:
    process = flux_process(name)
    process["spec"]["boundary"] = {"postconditions": [{"kind": "PromQL", "params": {"query": query}}]}
    return process


async def test_promql_postcondition_gates_attestation(kc: KubeClient, namespace: str) -> None:
    async with prometheus_standin() as url, reconciler_with_prometheus(kc, namespace, url):
        await kc.create(PROCESSES, with_promql("healthy", "tatara_ok"), namespace)
        await kc.create(PROCESSES, with_promql("broken", "tatara_broken"), namespace)

        async def status(name: str) -> dict[str, Any]:
            found: dict[str, Any] = (await read(kc, PROCESSES, name, namespace)).get("status", {})
            return found

        async def attested() -> dict[str, Any] | None:
            s = await status("healthy")
            return s if s.get("phase") == "Attested" else None

        healthy = await wait_for(attested, timeout=60, what="healthy to reach Attested")
        (row,) = healthy["boundary"]["postconditions"]
        assert (row["kind"], row["satisfied"]) == ("PromQL", True)

        async def waiting() -> dict[str, Any] | None:
            s = await status("broken")
            rows = s.get("boundary", {}).get("postconditions", [])
            return s if rows else None

        broken = await wait_for(waiting, timeout=60, what="broken to record its postcondition row")
        assert broken["phase"] == "Running"
        assert broken["message"] == "waiting on postconditions"
        (row,) = broken["boundary"]["postconditions"]
        assert row["satisfied"] is False
        assert row["message"] == "PromQL query 'tatara_broken' returned 0"


async def test_without_a_prometheus_url_the_row_says_so(kc: KubeClient, namespace: str) -> None:
    async with reconciler_with_prometheus(kc, namespace, ""):
        await kc.create(PROCESSES, with_promql("blind", "tatara_ok"), namespace)

        async def row() -> dict[str, Any] | None:
            s = (await read(kc, PROCESSES, "blind", namespace)).get("status", {})
            rows = s.get("boundary", {}).get("postconditions", [])
            return {"phase": s.get("phase"), **rows[0]} if rows else None

        found = await wait_for(row, timeout=60, what="blind to record its postcondition row")
        assert found["phase"] == "Running"
        assert found["message"] == "no Prometheus URL configured"


