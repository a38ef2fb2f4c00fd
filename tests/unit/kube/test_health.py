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


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;"
                     "q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
"""What Prometheus sends on a scrape (its scrape.go, ``scrapeAcceptHeader``)."""


@pytest.mark.parametrize(("tracing_on", "accept", "openmetrics"), [
    (False, PROMETHEUS_ACCEPT, False),  # tracing off: the text format, whatever is asked
    (True, PROMETHEUS_ACCEPT, True),
    (True, "text/plain;version=0.0.4", False),
    (True, "application/openmetrics-text;q=0,text/plain", False),
    (True, "", False),
])
async def test_with_tracing_on_a_scraper_asking_for_openmetrics_gets_it(
    served: tuple[HealthServer, CollectorRegistry], monkeypatch: pytest.MonkeyPatch,
    tracing_on: bool, accept: str, openmetrics: bool,
) -> None:
    from shared.kube import tracing
    from shared.kube.metrics import OPENMETRICS_CONTENT_TYPE

    monkeypatch.setattr(tracing, "enabled", tracing_on)
    server, registry = served
    Gauge("up_gauge", "doc", registry=registry).set(1)
    headers = {"Accept": accept} if accept else {}
    async with aiohttp.ClientSession() as session, \
            session.get(f"http://127.0.0.1:{server.port}/metrics", headers=headers) as resp:
        body, content_type = await resp.text(), resp.headers["Content-Type"]
    assert content_type == (OPENMETRICS_CONTENT_TYPE if openmetrics else CONTENT_TYPE)
    assert body.endswith("# EOF\n") is openmetrics
