"""HealthServer on a loopback ephemeral port: check registry semantics, status codes, bodies, /metrics format.

Endpoint meaning and body format follow controller-runtime's healthz package (docs/runtime.md#health):
200 only when every check passes, 503 naming the failing checks otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import anyio
import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.health import HealthServer
from shared.kube.metrics import CONTENT_TYPE

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served() -> AsyncIterator[tuple[HealthServer, CollectorRegistry]]:
    registry = CollectorRegistry()
    server = HealthServer("127.0.0.1", 0, registry=registry)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        yield server, registry
        tg.cancel_scope.cancel()


async def get(server: HealthServer, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{server.port}{path}") as resp:
        return resp.status, await resp.text(), resp.headers["Content-Type"]


async def test_ephemeral_port_is_exposed_once_bound(served: tuple[HealthServer, object]) -> None:
    server, _ = served
    assert server.port > 0
    status, body, _ = await get(server, "/healthz")
    assert (status, body) == (200, "healthz check passed\n")


def test_port_before_run_raises() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = HealthServer("127.0.0.1", 0).port


async def test_readyz_with_no_checks_is_ready(served: tuple[HealthServer, object]) -> None:
    server, _ = served
    assert (await get(server, "/readyz"))[:2] == (200, "readyz check passed\n")


async def test_readyz_fails_until_every_check_passes_and_names_the_failing_ones(
    served: tuple[HealthServer, object],
) -> None:
    server, _ = served
    synced = False
    leading = anyio.Event()

    async def leader() -> bool:
        return leading.is_set()

    server.add_readiness_check("informers", lambda: synced)
    server.add_readiness_check("leader-election", leader)
    assert await get(server, "/readyz") == (
        503, "[-]informers failed: not ready\n[-]leader-election failed: not ready\nreadyz check failed\n",
        "text/plain; charset=utf-8")
    synced = True
    assert (await get(server, "/readyz"))[:2] == (
        503, "[+]informers ok\n[-]leader-election failed: not ready\nreadyz check failed\n")
    leading.set()
    assert (await get(server, "/readyz"))[:2] == (
        200, "[+]informers ok\n[+]leader-election ok\nreadyz check passed\n")


async def test_a_raising_check_fails_with_its_reason(served: tuple[HealthServer, object]) -> None:
    server, _ = served

    def broken() -> bool:
        raise LookupError("no cache")

    server.add_health_check("cache", broken)
    assert (await get(server, "/healthz"))[:2] == (
        503, "[-]cache failed: LookupError: no cache\nhealthz check failed\n")


def test_duplicate_check_names_are_rejected() -> None:
    server = HealthServer("127.0.0.1", 0)
    server.add_readiness_check("informers", lambda: True)
    with pytest.raises(ValueError, match="already registered"):
        server.add_readiness_check("informers", lambda: True)


async def test_metrics_renders_the_given_registry_in_prometheus_text_format(
    served: tuple[HealthServer, CollectorRegistry],
) -> None:
    server, registry = served
    Gauge("leader_election_master_status", "doc", ["name"], registry=registry).labels("x").set(1)
    status, body, content_type = await get(server, "/metrics")
    assert (status, content_type) == (200, CONTENT_TYPE)
    samples = {(s.name, tuple(s.labels.items())): s.value
               for family in text_string_to_metric_families(body) for s in family.samples}
    assert samples == {("leader_election_master_status", (("name", "x"),)): 1.0}
