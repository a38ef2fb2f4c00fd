"""What a new Process costs the API server, counted on the reconciler's own client: from creation to
Attested at most the design minimum + 1 (docs/behaviour.md#folded-phases, docs/behaviour.md#pid-allocation)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from reconciler.table_keeper import JSON_PATCH, TableKeeper
from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient
from tests.integration.reconciler.test_lifecycle import flux_process, phase_of
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio

NAMES = ("r0", "r1", "r2")
_PROCESS = re.compile(r"/processes/(?P<name>[^/]+)(?P<status>/status)?$")


def kind_of(method: str, path: str, content_type: str | None) -> str:
    """One request as the design counts it (docs/behaviour.md#folded-phases); a PID bump is the JSON patch
    of the table."""
    if content_type == JSON_PATCH and "/processtables/" in path and not path.endswith("/status"):
        return "bump"
    found = _PROCESS.search(path)
    if found:
        return f"{method} process{found['status'] or ''}"
    for part in ("processtables", "kustomizations", "events"):
        if f"/{part}" in path:
            return f"{method} {part}{'/status' if path.endswith('/status') else ''}"
    return f"{method} {path}"


async def test_a_new_process_costs_at_most_ten_requests_from_creation_to_attested(
    control_plane: LocalControlPlane, crds_installed: None, namespace: str
) -> None:
    sent: list[tuple[str, str, str | None]] = []
    reconciler_client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    probe = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    request = reconciler_client.request

    async def counted(method: str, path: str, **kwargs: Any) -> bytes:
        if "watch=" not in path and not (kwargs.get("query") or {}).get("watch"):
            sent.append((method, path, kwargs.get("content_type")))
        return await request(method, path, **kwargs)

    reconciler_client.request = counted  # type: ignore[method-assign]
    config = ReconcilerConfig(watch_namespace=namespace, leader_elect=False, health_host="127.0.0.1",
                              health_port=0, table_status_interval=3600)
    manager = build(reconciler_client, config, registry=CollectorRegistry(), handle_signals=False)

    async def idle() -> bool:
        return manager.idle()

    async def started() -> bool:  # the table writer's first read follows discovery and every list
        return manager.idle() and any(m == "GET" and "/processtables" in p for m, p, _ in sent)

    async def all_attested() -> bool:
        return [await phase_of(probe, namespace, name) for name in NAMES] == ["Attested"] * len(NAMES)

    async def transitions_recorded() -> bool:  # Events are written in the background
        events = msgspec.json.decode(await probe.list(EVENTS, namespace))["items"]
        return sum(1 for e in events if e["reason"].startswith("Phase")) == 4 * len(NAMES)

    await TableKeeper(probe).read()  # the table exists (a missing one is recreated past every held PID: a LIST)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.run)
            tg.start_soon(FluxStandIn(probe, namespace=namespace).run)
            await wait_for(started, timeout=60, what="the reconciler's caches synced")
            start = len(sent)
            for name in NAMES:
                await probe.create(PROCESSES, flux_process(name), namespace)
            await wait_for(all_attested, timeout=120, what="every Process Attested")
            await wait_for(transitions_recorded, timeout=30, what="the transitions' Events")
            await wait_for(idle, timeout=30, what="the queue to settle")
            counts = Counter(kind_of(*request) for request in sent[start:])
            manager.stop()
            tg.cancel_scope.cancel()
    finally:
        await reconciler_client.close()
        await probe.close()

    n = len(NAMES)
    # the design's writes (docs/behaviour.md#folded-phases): finalizer, PID bump, apply, Running, Attested
    assert counts["PATCH process"] == n, counts  # the finalizer
    assert counts["bump"] == n, counts  # one bump each, none lost among our own workers
    assert counts["PATCH kustomizations"] == n, counts  # server-side apply
    assert 2 * n <= counts["PATCH process/status"] <= 3 * n, counts  # + "not yet observed" when seen first
    assert counts["POST events"] == 4 * n, counts  # Forking, Execing, Running, Attested
    assert counts["GET process"] == 0, counts  # decided on the cache: no live read
    assert not [k for k in counts if k.startswith("GET /")], counts  # no LIST either
    # the table status writer (batched, ≈0 per Process at scale) reads the table once per flush; the
    # allocator read it at its first bump, and then only its own answers
    table_writer = sum(v for k, v in counts.items() if "processtables" in k)
    assert counts["GET processtables"] <= 2, counts
    assert (sum(counts.values()) - table_writer) / n <= 10, counts
