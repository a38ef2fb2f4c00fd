"""/readyz and /metrics wired to a real leader elector against the real API server."""

from __future__ import annotations

import aiohttp
import anyio
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.client import KubeClient
from shared.kube.health import HealthServer
from shared.kube.leader import LeaderElector, LeaseTiming
from shared.kube.metrics import CONTENT_TYPE, RuntimeMetrics
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio


async def get(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text(), resp.headers["Content-Type"]


def master_status(body: str) -> dict[str, float]:
    """``name`` label → value of every leader_election_master_status sample in an exposition body."""
    return {sample.labels["name"]: sample.value
            for family in text_string_to_metric_families(body) if family.name == "leader_election_master_status"
            for sample in family.samples}


async def test_readyz_turns_200_once_the_elector_leads_and_metrics_report_it(kclient: KubeClient, ns: str) -> None:
    registry = CollectorRegistry()
    elector = LeaderElector(kclient, "tatara-health", ns, timing=LeaseTiming(3.0, 2.0, 0.5),
                            metrics=RuntimeMetrics(registry))
    server = HealthServer("127.0.0.1", 0, registry=registry)
    server.add_readiness_check("leader-election", elector.healthy)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.run)

        status, body, _ = await get(port, "/readyz")
        assert (status, body) == (503, "[-]leader-election failed: not ready\nreadyz check failed\n")
        status, body, content_type = await get(port, "/metrics")
        assert (status, content_type) == (200, CONTENT_TYPE)
        assert master_status(body) == {"tatara-health": 0.0}

        tg.start_soon(elector.run, anyio.sleep_forever)

        async def ready() -> bool:
            return (await get(port, "/readyz"))[0] == 200

        await wait_for(ready, timeout=10, what="/readyz 200")
        assert (await get(port, "/readyz"))[1] == "[+]leader-election ok\nreadyz check passed\n"
        assert master_status((await get(port, "/metrics"))[1]) == {"tatara-health": 1.0}
        assert (await get(port, "/healthz"))[0] == 200
        tg.cancel_scope.cancel()
