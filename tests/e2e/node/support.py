"""What the node tier's tests share: the Leases and pods of the charts, a pod's metrics read through the API
server's pod proxy (the egress into the node), and the Flux stand-in for a test's namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import msgspec
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.client import KubeClient, Resource
from tools.node_stack import RELEASE_NAMESPACE
from tools.standins.flux import FluxStandIn
from tools.wait import wait_for

LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PODS: Final = Resource("", "v1", "pods", "Pod")
HEALTH_PORTS: Final = {"tatara-reconciler": 8080, "tatara-pool-reconciler": 8081}
"""Each chart's default ``healthPort`` (/healthz, /readyz, /metrics)."""


async def lease(kc: KubeClient, chart: str) -> dict[str, Any]:
    """The chart's leader-election Lease (named as the chart, in the release namespace)."""
    obj: dict[str, Any] = msgspec.json.decode(await kc.get(LEASES, chart, RELEASE_NAMESPACE))
    return obj


def holder_pod(lease_obj: dict[str, Any]) -> str:
    """The pod name in a Lease's ``holderIdentity`` (``<pod>_<random>``)."""
    return str(lease_obj["spec"].get("holderIdentity") or "").split("_", 1)[0]


async def live_leader(kc: KubeClient, chart: str) -> str:
    """The chart's leader pod, once the Lease names one of its current pods (after a reinstall or a
    rollout the Lease names a gone pod until a new one takes it)."""
    async def probe() -> str | None:
        holder = holder_pod(await lease(kc, chart))
        return holder if holder in {p["metadata"]["name"] for p in await chart_pods(kc, chart)} else None
    return await wait_for(probe, timeout=120, interval=0.2, what=f"{chart}'s Lease held by one of its pods")


async def chart_pods(kc: KubeClient, chart: str) -> list[dict[str, Any]]:
    """The chart's pods that are not being deleted."""
    page = msgspec.json.decode(await kc.list(PODS, RELEASE_NAMESPACE, label_selector=f"app.kubernetes.io/name={chart}"))
    return [p for p in page["items"] if not p["metadata"].get("deletionTimestamp")]


async def pod_metrics(kc: KubeClient, pod: str, port: int, namespace: str = RELEASE_NAMESPACE) -> dict[
        tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of ``pod``'s ``/metrics``, read through the API server's pod proxy (kube-apiserver dials the
    pod through its egress selector into the node): ``{(name, sorted labels): value}``."""
    text = (await kc.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/metrics")).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


@asynccontextmanager
async def flux_standin(kc: KubeClient, namespace: str) -> AsyncIterator[None]:
    """The labelled Flux stand-in for ``namespace`` during the block (tools/standins/flux.py)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(FluxStandIn(kc, namespace=namespace).run)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
