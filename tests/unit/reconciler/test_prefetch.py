"""reconciler.prefetch: PromQL results from a fake Prometheus (aiohttp on 127.0.0.1) and referenced objects."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from reconciler.children import ChildRef
from reconciler.prefetch import Prefetcher, conditions_for_phase, parse_prometheus_response
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.kube.client import Resource
from shared.kube.discovery import UnknownKind
from shared.kube.errors import ApiError
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.anyio

JOBS = Resource("batch", "v1", "jobs", "Job")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")


def make(phase: str, *, pre: list[dict[str, Any]] | None = None, post: list[dict[str, Any]] | None = None) -> Process:
    return convert(
        {
            "metadata": {"name": "me", "namespace": "ns"},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"}, "intent": {},
                     "boundary": {"preconditions": pre or [], "postconditions": post or []}},
            "status": {"phase": phase},
        },
        Process,
    )


def promql(query: str) -> dict[str, Any]:
    return {"kind": "PromQL", "params": {"query": query}}


def success(result_type: str, result: Any) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": result_type, "result": result}}).encode()


# ── response parsing ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (success("scalar", [1717243200.0, "1"]), 1.0),
        (success("scalar", [1717243200.0, "0"]), 0.0),
        (success("vector", [{"metric": {"job": "a"}, "value": [1717243200.0, "0.5"]}]), 0.5),
        (success("vector", []), None),
        (success("string", [1717243200.0, "3"]), 3.0),
        (success("matrix", [{"metric": {}, "values": [[1, "1"]]}]), None),
        (success("scalar", "garbage"), None),
        (success("vector", [{"metric": {}, "value": [1, "not-a-number"]}]), None),
        (json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode(), None),
        (b"<html>proxy error</html>", None),
    ],
    ids=["scalar-1", "scalar-0", "vector", "empty-vector", "string", "matrix", "bad-scalar", "nan-text",
         "error", "not-json"],
)
def test_parse_prometheus_response(body: bytes, expected: float | None) -> None:
    assert parse_prometheus_response(body) == expected


def test_parse_keeps_nan() -> None:
    value = parse_prometheus_response(success("scalar", [1, "NaN"]))
    assert value is not None
    assert math.isnan(value)


# ── which conditions per phase ───────────────────────────────────────────────


@pytest.mark.parametrize(
    ("phase", "which"),
    [("Pending", None), ("Forking", None), ("Execing", "pre"), ("Running", "post"), ("Attested", "post"),
     ("Exiting", None), ("Failed", None)],
)
def test_conditions_for_phase(phase: str, which: str | None) -> None:
    process = make(phase, pre=[promql("pre")], post=[promql("post")])
    got = [c.params["query"] for c in conditions_for_phase(process) if c.params]
    assert got == ([] if which is None else [which])


# ── PromQL over HTTP ─────────────────────────────────────────────────────────


class FakePrometheus:
    """Answers ``/api/v1/query`` from a table; ``"slow"`` never answers, ``"500"`` fails."""

    def __init__(self) -> None:
        self.answers: dict[str, bytes] = {}
        self.queries: list[str] = []
        self.release = asyncio.Event()
        """Set at teardown so a held ``slow`` handler ends before the server shuts down."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = request.query.get("query", "")
        self.queries.append(query)
        if query == "500":
            return web.Response(status=500, text="boom")
        if query == "slow":
            await self.release.wait()
        return web.Response(body=self.answers.get(query, success("vector", [])), content_type="application/json")


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[FakePrometheus, str]]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_get("/api/v1/query", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield fake, f"http://127.0.0.1:{port}/"
    finally:
        fake.release.set()
        await runner.cleanup()


class NoKinds:
    """Stands in for the mapper where no object is referenced."""

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        raise AssertionError("no discovery expected")


def prefetcher(url: str, kube: FakeKube | None = None, *, timeout: float = 5.0) -> Prefetcher:
    mapper: Any = kube or NoKinds()
    return Prefetcher(kube.api if kube is not None else FakeApi(), mapper, url, timeout=timeout)


async def test_queries_of_the_phase_are_fetched(prometheus: tuple[FakePrometheus, str]) -> None:
    fake, url = prometheus
    fake.answers["up"] = success("scalar", [1, "1"])
    fake.answers["errors > 0"] = success("vector", [{"metric": {}, "value": [1, "0"]}])
    process = make("Running", pre=[promql("ignored")], post=[promql("up"), promql("errors > 0"), promql("up")])
    pre = prefetcher(url)
    try:
        values, referenced = await pre.boundary_inputs(process, owned=())
    finally:
        await pre.close()
    assert values == {"up": 1.0, "errors > 0": 0.0}
    assert referenced == {}
    assert sorted(fake.queries) == ["errors > 0", "up"]  # deduplicated; preconditions not fetched in Running


async def test_failures_become_none(prometheus: tuple[FakePrometheus, str]) -> None:
    _, url = prometheus
    pre = prefetcher(url, timeout=0.2)
    try:
        values = await pre.query_all(["500", "slow", "empty"])
    finally:
        await pre.close()
    assert values == {"500": None, "slow": None, "empty": None}


async def test_unreachable_prometheus_is_none() -> None:
    pre = prefetcher("http://127.0.0.1:1", timeout=1.0)
    try:
        assert await pre.query_all(["up"]) == {"up": None}
    finally:
        await pre.close()


async def test_no_url_leaves_the_map_empty() -> None:
    process = make("Running", post=[promql("up")])
    assert await prefetcher("").boundary_inputs(process, owned=()) == ({}, {})


async def test_no_conditions_no_io() -> None:
    assert await prefetcher("http://127.0.0.1:1").boundary_inputs(make("Running"), owned=()) == ({}, {})


# ── referenced objects ───────────────────────────────────────────────────────


class FakeKube:
    """The mapper (Jobs and ConfigMaps are served) and the in-memory API server holding ``objects``
    (``(plural, namespace, name)`` → document); a GET of ``broken`` fails with 500."""

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.api = FakeApi()
        for (plural, _, _), doc in objects.items():
            self.api.seed({"jobs": JOBS, "configmaps": CONFIG_MAPS}[plural], doc)
        self.api.fail[("get", "jobs/broken")] = ApiError(500, "InternalError", "boom")

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        if kind == "Job":
            return JOBS
        if kind == "ConfigMap":
            return CONFIG_MAPS
        raise UnknownKind(kind)

    @property
    def gets(self) -> list[tuple[str, str | None, str | None]]:
        return [(c.resource.plural, c.name, c.namespace) for c in self.api.calls_of("get")]


async def test_referenced_job_and_receipt_are_fetched_404_is_absent() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe", "namespace": "ns"},
           "status": {"succeeded": 1}}
    kube = FakeKube({("jobs", "ns", "probe"): job})
    process = make("Running", post=[
        {"kind": "JobAttested", "params": {"name": "probe", "expectReceipt": True}},
        {"kind": "JobAttested", "params": {"name": "broken"}},
        {"kind": "KustomizationHealthy", "params": {"name": "owned"}},
    ])
    owned = {ChildRef("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "ns", "owned")}
    values, referenced = await prefetcher("", kube).boundary_inputs(process, owned=owned)
    assert values == {}
    job_ref = ChildRef("batch/v1", "Job", "ns", "probe")
    assert list(referenced) == [job_ref]
    assert referenced[job_ref].object["status"] == {"succeeded": 1}
    assert sorted(kube.gets) == [("configmaps", "probe-receipt", "ns"), ("jobs", "broken", "ns"),
                                 ("jobs", "probe", "ns")]  # the owned Kustomization is not fetched again


async def test_foreign_kustomization_of_an_unserved_kind_is_absent() -> None:
    kube = FakeKube({})
    process = make("Execing", pre=[{"kind": "KustomizationHealthy", "params": {"name": "x", "namespace": "other"}}])
    assert await prefetcher("", kube).boundary_inputs(process, owned=()) == ({}, {})
    assert kube.gets == []
