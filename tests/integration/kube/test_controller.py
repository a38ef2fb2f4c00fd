"""A toy controller over ConfigMaps (and a tiny CRD) against the real API server."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics, render
from tests.integration.kube.conftest import ConfigMap
from tests.support.kube import install_crds, wait_for, widget_crd
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

SEEN = "toy.tatara.test/seen"


@asynccontextmanager
async def started(controller: Controller[Any], *informers: Informer[Any]) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        for informer in informers:
            tg.start_soon(informer.run)
        tg.start_soon(controller.run)
        yield
        await controller.shutdown()
        tg.cancel_scope.cancel()


async def test_toy_controller_converges_200_configmaps_never_reconciling_a_key_twice_at_once(
    kclient: KubeClient, ns: str
) -> None:
    in_flight: Counter[Request] = Counter()
    overlaps: list[Request] = []
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)

    async def reconcile(request: Request) -> Result:
        in_flight[request] += 1
        if in_flight[request] > 1:
            overlaps.append(request)
        try:
            cm = informer.get(str(request))
            if cm is None:
                return Result.done()
            await anyio.lowlevel.checkpoint()  # yield, so overlapping workers would interleave here
            wanted = cm.data.get("value", "")
            if cm.metadata.annotations.get(SEEN) != wanted:
                await kclient.merge_patch(CONFIG_MAPS, request.name,
                                          {"metadata": {"annotations": {SEEN: wanted}}}, request.namespace)
            return Result.done()
        finally:
            in_flight[request] -= 1

    controller = Controller("toy-converge", informer, reconcile, workers=8,
                            metrics=RuntimeMetrics(CollectorRegistry()))
    async with started(controller, informer):
        for i in range(200):
            await kclient.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"value": str(i)}}, ns)
        for i in range(0, 200, 10):  # change some again while the controller works
            await kclient.merge_patch(CONFIG_MAPS, f"cm-{i}", {"data": {"value": f"v{i}"}}, ns)

        def expected(i: int) -> str:
            return f"v{i}" if i % 10 == 0 else str(i)

        async def all_converged() -> bool:
            return all(
                (cm := informer.get(f"{ns}/cm-{i}")) is not None and cm.metadata.annotations.get(SEEN) == expected(i)
                for i in range(200))

        await wait_for(all_converged, timeout=120, what="200 ConfigMaps annotated")
    assert overlaps == []


async def test_a_burst_of_50_updates_collapses_into_few_reconciles(kclient: KubeClient, ns: str) -> None:
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    calls: list[str] = []
    release = anyio.Event()
    first_started = anyio.Event()

    async def reconcile(request: Request) -> Result:
        calls.append(request.name)
        first_started.set()
        await release.wait()
        return Result.done()

    controller = Controller("toy-burst", informer, reconcile, metrics=RuntimeMetrics(CollectorRegistry()))
    async with started(controller, informer):
        await kclient.create(CONFIG_MAPS, {"metadata": {"name": "hot"}, "data": {"n": "0"}}, ns)
        with anyio.fail_after(30):
            await first_started.wait()
        last = b""
        for n in range(1, 51):
            last = await kclient.merge_patch(CONFIG_MAPS, "hot", {"data": {"n": str(n)}}, ns)
        last_rv = msgspec.json.decode(last, type=ConfigMap).metadata.resource_version

        async def informer_saw_all() -> bool:
            cm = informer.get(f"{ns}/hot")
            return cm is not None and cm.metadata.resource_version == last_rv

        await wait_for(informer_saw_all, what="the informer to see all 50 updates")
        release.set()

        async def idle() -> bool:
            return len(controller.queue) == 0 and controller.queue.processing == 0

        await wait_for(idle, what="the queue to drain")
    assert calls == ["hot", "hot"]  # the first, then one for all 50 updates that arrived meanwhile


class Widget(msgspec.Struct):
    metadata: ObjectMeta
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}


WIDGETS, WIDGET_CRD = widget_crd("toy.tatara.test")


async def test_our_own_status_write_does_not_trigger_another_reconcile(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str
) -> None:
    await anyio.to_thread.run_sync(install_crds, private_plane.kubeconfig, [WIDGET_CRD])
    informer = Informer(kclient, WIDGETS, Widget, namespace=ns)
    seen_generations: list[int | None] = []
    status_rv: list[str] = []

    async def reconcile(request: Request) -> Result:
        widget = informer.get(str(request))
        assert widget is not None
        seen_generations.append(widget.metadata.generation)
        if widget.status.get("observedSize") != widget.spec.get("size"):
            raw = await kclient.merge_patch(WIDGETS, request.name, {"status": {"observedSize": widget.spec["size"]}},
                                            request.namespace, subresource="status")
            status_rv.append(msgspec.json.decode(raw, type=Widget).metadata.resource_version or "")
        return Result.done()

    controller = Controller("toy-status", informer, reconcile, metrics=RuntimeMetrics(CollectorRegistry()))
    async with started(controller, informer):
        await kclient.create(WIDGETS, {"apiVersion": "toy.tatara.test/v1", "kind": "Widget",
                                       "metadata": {"name": "w"}, "spec": {"size": 3}}, ns)

        async def status_write_observed_and_idle() -> bool:
            w = informer.get(f"{ns}/w")
            return (bool(status_rv) and w is not None and w.metadata.resource_version == status_rv[-1]
                    and len(controller.queue) == 0 and controller.queue.processing == 0)

        await wait_for(status_write_observed_and_idle, what="the status write to reach the cache")
        assert seen_generations == [1]  # the status event was delivered and dropped: nothing queued

        await kclient.merge_patch(WIDGETS, "w", {"spec": {"size": 4}}, ns)

        async def spec_change_reconciled() -> bool:
            w = informer.get(f"{ns}/w")
            return w is not None and w.status.get("observedSize") == 4

        await wait_for(spec_change_reconciled, what="the spec change to be reconciled")
    assert seen_generations == [1, 2]


async def test_metrics_after_a_run_carry_every_controller_runtime_name(kclient: KubeClient, ns: str) -> None:
    registry = CollectorRegistry()
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    done = anyio.Event()

    async def reconcile(request: Request) -> Result:
        if request.name == "fails" and not done.is_set():
            done.set()
            raise RuntimeError("boom")
        return Result.after(3600) if request.name == "later" else Result.done()

    controller = Controller("toy-metrics", informer, reconcile, metrics=RuntimeMetrics(registry))
    async with started(controller, informer):
        for name in ("ok", "later", "fails"):
            await kclient.create(CONFIG_MAPS, {"metadata": {"name": name}}, ns)

        async def counted() -> bool:
            families = {f.name: f for f in text_string_to_metric_families(render(registry).decode())}
            total = {s.labels["result"]: s.value for s in families["controller_runtime_reconcile"].samples
                     if s.labels.get("controller") == "toy-metrics" and s.name.endswith("_total")}
            return total.get("success", 0) >= 2 and total.get("requeue_after") == 1 and total.get("error") == 1

        await wait_for(counted, what="reconcile_total to count success, requeue_after and error")
    exposed = {s.name for f in text_string_to_metric_families(render(registry).decode()) for s in f.samples}
    for name in (
        "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket", "controller_runtime_active_workers",
        "controller_runtime_max_concurrent_reconciles", "workqueue_depth", "workqueue_adds_total",
        "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
        "workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
        "controller_runtime_reconcile_panics_total", "controller_runtime_terminal_reconcile_errors_total",
    ):
        assert name in exposed, name
