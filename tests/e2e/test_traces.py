"""A Process's release as traces in a real Jaeger (docs/runtime.md#traces): the Process reconciler as a real
subprocess exporting over OTLP/HTTP, the real ``tatara-export-worker`` run by the Job runner stand-in for the
export Job the Releasing reconcile creates, a real HTTP sink; everything read back through Jaeger's query API.

What must hold, each checked on what Jaeger returns:

- the release shows spans of both services, ``tatara-reconciler`` and ``tatara-export-worker``;
- every API-request span of the reconciler has a reconcile span as its parent;
- the worker's ``export`` span is a child of the reconcile that applied the export Job (phase before
  ``Releasing``), the request span ``apply jobs`` being its sibling: one trace from the decision to the receipt;
- the sink received ``traceparent`` naming that trace, and the worker's ``ship`` span as the parent;
- every exemplar on ``/metrics``, and every exemplar a real Prometheus returns for the dashboard's exemplar queries,
  names a reconcile span Jaeger holds.
"""

from __future__ import annotations

import io
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from prometheus_client.openmetrics.parser import text_fd_to_metric_families

from shared.domain.resources import PROCESSES
from shared.kube.client import NAMESPACES, KubeClient
from tests.integration.reconciler.test_releasing import ephemeral, gone
from tests.support import dashboards as dash
from tests.support.kube import wait_for
from tests.support.prometheus import PROMETHEUS, grafana, prometheus, query_exemplars
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.http_receiver import HttpReceiver
from tools.jaeger_server import JaegerServer
from tools.processes import stop_process_groups
from tools.rbac import EXPORT_WORKER, apply_rbac
from tools.standins.flux import FluxStandIn
from tools.standins.jobs import JobRunnerStandIn
from tools.up import Daemon, _start, ensure_namespace, wait_ready
from tools.up_exports import LOCAL_EXPORT_WORKER_IMAGE, export_worker_command, export_worker_rbac_docs

pytestmark = pytest.mark.anyio

TIMEOUT = 120.0

TRACING_ENV = {
    "OTEL_TRACES_SAMPLER": "parentbased_always_on",  # every trace: the test follows one Process
    "OTEL_BSP_SCHEDULE_DELAY": "200",  # the batch span processor's export interval (ms; the SDK's default 5000)
}


@pytest.fixture(scope="module")
def jaeger() -> Iterator[JaegerServer]:
    with JaegerServer() as server:
        yield server


@pytest.fixture
async def kc(control_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as client:
        await install_crds(client, all_crds())
        yield client


@pytest.fixture
async def ns(kc: KubeClient) -> AsyncIterator[str]:
    name = f"traces-{uuid.uuid4().hex[:8]}"
    await ensure_namespace(kc, name)
    yield name
    await kc.delete(NAMESPACES, name)


@pytest.fixture
async def reconciler(control_plane: LocalControlPlane, jaeger: JaegerServer, ns: str, tmp_path: Path,
                     ) -> AsyncIterator[Daemon]:
    """tatara-reconciler as a subprocess watching ``ns``, tracing to ``jaeger`` (only its environment has the
    endpoint: this test process never configures tracing)."""
    port = free_port()
    saved = dict(os.environ)
    os.environ.update({**TRACING_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_url})
    try:
        daemon = _start("tatara-reconciler", "reconciler.main",
                        ["--leader-elect=false", f"--health-addr=127.0.0.1:{port}", f"--watch-namespace={ns}",
                         f"--export-worker-image={LOCAL_EXPORT_WORKER_IMAGE}",
                         f"--export-worker-service-account={EXPORT_WORKER}"],
                        control_plane.kubeconfig, tmp_path, port)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        await wait_ready([daemon], 60.0)
        yield daemon
    finally:
        stop_process_groups([daemon.proc], 10.0)


def service_of(trace: dict[str, Any], span: dict[str, Any]) -> str:
    return str(trace["processes"][span["processID"]]["serviceName"])


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


def parent_id(span: dict[str, Any]) -> str | None:
    refs = [r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"]
    return refs[0] if refs else None


async def test_a_release_is_one_trace_from_the_reconcile_to_the_sink(
        kc: KubeClient, ns: str, control_plane: LocalControlPlane, jaeger: JaegerServer, reconciler: Daemon,
        tmp_path: Path, helm: Path) -> None:
    docs, _ = export_worker_rbac_docs([ns], helm=helm)
    await apply_rbac(kc, docs)
    async with HttpReceiver() as sink, anyio.create_task_group() as tg:
        tg.start_soon(FluxStandIn(kc, namespace=ns).run)
        runner = JobRunnerStandIn(kc, server=control_plane.server, ca_file=control_plane.ca_file, logs=tmp_path,
                                  namespace=ns, entrypoints={LOCAL_EXPORT_WORKER_IMAGE: export_worker_command()},
                                  retry_base=0.2)
        tg.start_soon(runner.run)
        export = {"source": {"runMarker": {"labels": {"suite": "traces"}}},
                  "channel": {"httpEvent": {"endpoint": f"{sink.url}/ingest", "signalType": "test.report"}}}
        await kc.create(PROCESSES, ephemeral("traced", [export]), ns)
        await wait_for(lambda: gone(kc, PROCESSES, "traced", ns), timeout=TIMEOUT,
                       what="the ephemeral Process to be released and deleted")
        tg.cancel_scope.cancel()
    (request,) = [r for r in sink.requests if r.path == "/ingest"]
    traceparent = request.header("traceparent")
    assert traceparent is not None, request.headers
    version, trace_id, ship_span_id, _flags = traceparent.split("-")
    assert version == "00"

    async def whole_trace() -> dict[str, Any] | None:
        # the reconciler's batch exporter and the worker's final flush arrive in any order: wait for both
        trace = await anyio.to_thread.run_sync(jaeger.find_trace, trace_id)
        if trace is None:
            return None
        names = {(service_of(trace, s), s["operationName"]) for s in trace["spans"]}
        wanted = {("tatara-reconciler", "reconcile process"), ("tatara-reconciler", "apply jobs"),
                  ("tatara-export-worker", "export"), ("tatara-export-worker", "write receipt")}
        return trace if wanted <= names else None

    trace = await wait_for(whole_trace, timeout=60, what=f"trace {trace_id} of both services in Jaeger")
    spans = {s["spanID"]: s for s in trace["spans"]}
    assert {service_of(trace, s) for s in spans.values()} == {"tatara-reconciler", "tatara-export-worker"}
    assert set(jaeger.services()) >= {"tatara-reconciler", "tatara-export-worker"}

    # every API request of the reconciler in this trace sits under a reconcile span, directly or under the
    # span of an Event that reconcile emitted (written in the background, in the reconcile's trace)
    reconciler_requests = [s for s in spans.values() if service_of(trace, s) == "tatara-reconciler"
                           and "k8s.verb" in tags(s)]
    assert reconciler_requests
    for span in reconciler_requests:
        parent = spans[parent_id(span) or ""]
        if parent["operationName"].startswith("event "):
            parent = spans[parent_id(parent) or ""]
        assert parent["operationName"] == "reconcile process", (span["operationName"], parent["operationName"])

    # the worker's root is a child of the Releasing reconcile that applied the Job
    (export_span,) = [s for s in spans.values() if s["operationName"] == "export"]
    releasing = spans[parent_id(export_span) or ""]
    assert releasing["operationName"] == "reconcile process"
    assert tags(releasing)["tatara.phase.before"] == "Releasing"
    assert tags(releasing)["k8s.object.name"] == "traced"
    applies = [s for s in spans.values() if parent_id(s) == releasing["spanID"] and s["operationName"] == "apply jobs"]
    assert applies, "the export Job's apply is a child of the same reconcile"

    # the worker's steps are children of its root, its API requests children of its steps
    steps = {s["operationName"]: s for s in spans.values() if parent_id(s) == export_span["spanID"]}
    assert {"read source", "ship", "write receipt", "announce"} <= set(steps)
    receipt_writes = [s for s in spans.values() if parent_id(s) == steps["write receipt"]["spanID"]]
    assert [s["operationName"] for s in receipt_writes] == ["apply configmaps"]
    assert tags(receipt_writes[0])["http.response.status_code"] in (200, 201)

    # the sink's traceparent names the worker's ship span in this very trace
    assert ship_span_id == steps["ship"]["spanID"]
    print(render(trace), file=sys.stderr)

    # the metrics lead to the traces: each exemplar of the reconcile-time and work-queue histograms names a
    # reconcile span (of the Process or the ProcessTable controller) that Jaeger holds; scraped as Prometheus
    # does, asking for OpenMetrics first
    exemplars = await anyio.to_thread.run_sync(scrape_exemplars, reconciler.metrics)
    assert set(exemplars) == set(EXEMPLAR_FAMILIES), exemplars
    for family, found in exemplars.items():
        for trace_id_hex, span_id in found:
            async def holds_reconcile(trace_id_hex: str = trace_id_hex, span_id: str = span_id) -> bool:
                held = await anyio.to_thread.run_sync(jaeger.find_trace, trace_id_hex)
                names = {s["spanID"]: s["operationName"] for s in (held or {}).get("spans", [])}
                return str(names.get(span_id, "")).startswith("reconcile ")  # of any controller: process, processtable

            await wait_for(holds_reconcile, timeout=TIMEOUT, what=f"{family}'s exemplar {trace_id_hex} in Jaeger")

    # ... and so does Grafana's path through Prometheus: with exemplar storage it scrapes OpenMetrics and keeps
    # them, and each latency panel's exemplar query returns exemplars whose span Jaeger holds
    (tmp_path / "prometheus").mkdir()
    await exemplars_through_prometheus(reconciler, ns, tmp_path / "prometheus", jaeger)


async def exemplars_through_prometheus(reconciler: Daemon, ns: str, tmp: Path, jaeger: JaegerServer) -> None:
    """A real Prometheus (``--enable-feature=exemplar-storage``) scrapes ``reconciler`` under the labels the
    chart's ServiceMonitor gives it; every ``"exemplar": true`` target of the chart's dashboard, filled in as
    Grafana fills it, must return exemplars from ``/api/v1/query_exemplars``, each naming a reconcile span in
    ``jaeger``; ``tmp`` (a directory) holds its data. Skips when Prometheus is not installed (``make test``
    installs it)."""
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (make test installs it)")
    job = "rel-tatara-reconciler-metrics"
    (board,) = [dash.load(p) for p in dash.dashboard_files() if p.parents[1].name == "tatara-reconciler"]
    wanted = dash.exemplar_expressions(board)
    assert len(wanted) == 3, wanted
    began = time.time() - 3600  # exemplars carry the time they were observed, earlier in this test
    target = reconciler.metrics.removeprefix("http://").removesuffix("/metrics")
    async with prometheus(tmp, {job: [target]}, ns, features=["exemplar-storage"]) as url, \
            aiohttp.ClientSession() as session:
        for title, expr in wanted:
            filled = grafana(expr, job, ns)

            async def stored(filled: str = filled) -> list[dict[str, Any]] | None:
                try:
                    found = await query_exemplars(session, url, filled, start=began, end=time.time() + 60)
                except aiohttp.ClientError:
                    return None  # not listening yet
                return [e for s in found for e in s["exemplars"]] or None

            exemplars = await wait_for(stored, timeout=TIMEOUT, what=f"exemplars of {title!r} in Prometheus")
            for exemplar in exemplars:
                labels = exemplar["labels"]

                async def holds_reconcile(trace_id_hex: str = labels["trace_id"],
                                          span_id: str = labels["span_id"]) -> bool:
                    held = await anyio.to_thread.run_sync(jaeger.find_trace, trace_id_hex)
                    names = {s["spanID"]: s["operationName"] for s in (held or {}).get("spans", [])}
                    return str(names.get(span_id, "")).startswith("reconcile ")

                await wait_for(holds_reconcile, timeout=TIMEOUT,
                               what=f"{title!r}: exemplar {labels} as a reconcile span in Jaeger")


EXEMPLAR_FAMILIES = ("controller_runtime_reconcile_time_seconds", "workqueue_queue_duration_seconds",
                     "workqueue_work_duration_seconds")
"""The histograms whose observations keep their reconcile's trace as exemplar (docs/runtime.md#traces)."""


def scrape_exemplars(url: str) -> dict[str, set[tuple[str, str]]]:
    """(trace id, span id) of every exemplar of :data:`EXEMPLAR_FAMILIES` on ``url`` (``/metrics``, asked for
    OpenMetrics with the ``Accept`` Prometheus sends), parsed by prometheus-client's OpenMetrics parser."""
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept}), timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text"), response.headers
        body = response.read().decode()
    found: dict[str, set[tuple[str, str]]] = {}
    for family in text_fd_to_metric_families(io.StringIO(body)):  # type: ignore[no-untyped-call]
        if family.name not in EXEMPLAR_FAMILIES:
            continue
        for sample in family.samples:
            if sample.exemplar is not None:
                labels = sample.exemplar.labels
                found.setdefault(family.name, set()).add((labels["trace_id"], labels["span_id"]))
    return found


def render(trace: dict[str, Any]) -> str:
    """The trace as an indented tree: service, span name, duration (what the closing note shows)."""
    spans = trace["spans"]
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {s["spanID"] for s in spans}
    for span in sorted(spans, key=lambda s: s["startTime"]):
        parent = parent_id(span)
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = [f"trace {trace['traceID']}"]

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(f"{'  ' * depth}{service_of(trace, span)}: {span['operationName']} "
                         f"({span['duration'] / 1000:.1f} ms) span {span['spanID']}")
            walk(span["spanID"], depth + 1)

    walk(None, 1)
    return "\n".join(lines)
