"""tools/jaeger_server.py: the real Jaeger v2 (built on first use) takes spans over OTLP/HTTP from the binaries'
own exporter setup (shared.kube.tracing) and returns them, parent links included, from its query API."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.kube import wait_for
from tools.jaeger_server import JaegerServer

ROOT = Path(__file__).resolve().parents[2]

SENDER = """
from opentelemetry import trace
from shared.kube import tracing
assert tracing.configure_tracing("jaeger-smoke")
tracer = trace.get_tracer("smoke")
with tracer.start_as_current_span("parent"):
    with tracer.start_as_current_span("child"):
        print(tracing.current_traceparent())
tracing.shutdown_tracing()
"""


@pytest.mark.anyio
async def test_spans_sent_over_otlp_come_back_from_the_query_api_with_their_parent() -> None:
    with JaegerServer() as jaeger:
        sent = await anyio.run_process([sys.executable, "-c", SENDER], cwd=ROOT, check=True,
                                       env={"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_url, "PATH": "/usr/bin"})
        _, trace_id, child_id, _ = sent.stdout.decode().strip().split("-")

        async def stored() -> dict[str, Any] | None:
            found = await anyio.to_thread.run_sync(jaeger.find_trace, trace_id)
            return found if found is not None and len(found["spans"]) == 2 else None

        trace: dict[str, Any] = await wait_for(stored, timeout=30, what="the two spans in Jaeger")
        spans = {s["operationName"]: s for s in trace["spans"]}
        assert spans["child"]["spanID"] == child_id
        assert spans["child"]["references"] == [{"refType": "CHILD_OF", "traceID": trace_id,
                                                 "spanID": spans["parent"]["spanID"]}]
        assert spans["parent"]["references"] == []
        assert {p["serviceName"] for p in trace["processes"].values()} == {"jaeger-smoke"}
        assert jaeger.services() == ["jaeger-smoke"]
        port = jaeger.query_port
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "nothing listens after stop"
