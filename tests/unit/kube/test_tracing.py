"""shared.kube.tracing and what it feeds: W3C ``traceparent`` written and read, the Kubernetes verb and resource
of a request span, the trace ids of a log line, the ``TRACEPARENT`` of an export Job (docs/runtime.md#traces).

Expected values are the W3C Trace Context recommendation's (its ``traceparent`` example and its rules for an
invalid header) and the API server's audit verbs, written out by hand.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry import trace

from reconciler.exports import ExportJobConfig, applicable, export_job, tracing_env_of, with_traceparent
from shared.domain.api.phase import ProcessPhase as P
from shared.kube import tracing
from shared.kube.client import APPLY_PATCH, MERGE_PATCH, request_attributes
from shared.kube.logcontext import JsonFormatter
from shared.kube.meta import as_json
from tests.unit.reconciler.test_exports import MARKER, process

W3C_EXAMPLE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
"""The recommendation's example header (section "traceparent Header", "Examples of HTTP traceparent Headers")."""


def test_a_traceparent_is_read_and_written_back_unchanged() -> None:
    ctx = tracing.context_from_traceparent(W3C_EXAMPLE)
    assert ctx is not None
    span_context = trace.get_current_span(ctx).get_span_context()
    assert (span_context.trace_id, span_context.span_id, span_context.is_remote, int(span_context.trace_flags)) == (
        0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, True, 1)
    assert tracing.format_traceparent(span_context) == W3C_EXAMPLE


@pytest.mark.parametrize("value", [
    None, "", "garbage",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id: invalid
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent id: invalid
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # 31 hex digits
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is forbidden
])
def test_an_invalid_traceparent_is_ignored(value: str | None) -> None:
    assert tracing.context_from_traceparent(value) is None


def test_with_tracing_off_nothing_is_propagated_or_logged() -> None:
    assert tracing.enabled is False  # the unit tests never configure an exporter
    ctx = tracing.context_from_traceparent(W3C_EXAMPLE)
    with trace.use_span(trace.get_current_span(ctx)):
        assert tracing.current_traceparent() is None
        assert tracing.log_ids() == {}


@pytest.mark.parametrize(("method", "path", "query", "content_type", "span_name", "extra"), [
    ("GET", "/apis/tatara.pleme.io/v1alpha1/namespaces/ns/processes/p", None, None, "get processes",
     {"k8s.namespace.name": "ns", "k8s.object.name": "p"}),
    ("GET", "/apis/tatara.pleme.io/v1alpha1/namespaces/ns/processes", {"limit": 500}, None, "list processes",
     {"k8s.namespace.name": "ns"}),
    ("GET", "/apis/batch/v1/jobs", {"watch": True}, None, "watch jobs", {}),
    ("POST", "/api/v1/namespaces/ns/events", None, "application/json", "create events", {"k8s.namespace.name": "ns"}),
    ("PATCH", "/apis/batch/v1/namespaces/ns/jobs/j", {"fieldManager": "m"}, APPLY_PATCH, "apply jobs",
     {"k8s.namespace.name": "ns", "k8s.object.name": "j"}),
    ("PATCH", "/apis/tatara.pleme.io/v1alpha1/namespaces/ns/processes/p/status", None, MERGE_PATCH,
     "patch processes/status", {"k8s.namespace.name": "ns", "k8s.object.name": "p"}),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", None, "application/json", "update leases",
     {"k8s.namespace.name": "ns", "k8s.object.name": "l"}),
    ("DELETE", "/api/v1/namespaces/gone", None, "application/json", "delete namespaces", {"k8s.object.name": "gone"}),
    ("GET", "/api/v1/namespaces", None, None, "list namespaces", {}),
    ("GET", "/apis/batch/v1", None, None, "get /apis/batch/v1", {}),  # discovery
])
def test_a_request_span_names_the_kubernetes_verb_and_resource(
        method: str, path: str, query: dict[str, Any] | None, content_type: str | None, span_name: str,
        extra: dict[str, str]) -> None:
    verb, attributes = request_attributes(method, path, query, content_type)
    assert f"{verb} {attributes['k8s.resource']}" == span_name
    assert attributes == {"k8s.verb": verb, "k8s.resource": span_name.split(" ", 1)[1], "http.request.method": method,
                          "url.path": path, **extra}


def test_a_log_line_carries_the_ids_of_the_active_span_when_tracing_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "enabled", True)
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "hello", None, None)
    ctx = tracing.context_from_traceparent(W3C_EXAMPLE)
    with trace.use_span(trace.get_current_span(ctx)):
        inside = json.loads(JsonFormatter().format(record))
    outside = json.loads(JsonFormatter().format(record))
    assert (inside["trace_id"], inside["span_id"]) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert {"trace_id", "span_id"}.isdisjoint(outside)


def test_an_export_job_carries_the_traceparent_only_when_given_one() -> None:
    p = process([MARKER])
    index, export = applicable(p, P.ATTESTED)[0]
    job = export_job(p, index, export, owner_uid="u-1", config=ExportJobConfig())
    traced = with_traceparent(job, W3C_EXAMPLE)
    container = as_json(traced)["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "TRACEPARENT", "value": W3C_EXAMPLE}]
    assert tracing_env_of(json.dumps(as_json(traced)).encode()) == (W3C_EXAMPLE, {})
    # without one (tracing off, or a Job created without it): the rendered manifest, byte for byte
    assert as_json(with_traceparent(traced, None)) == as_json(job)
    assert tracing_env_of(json.dumps(as_json(job)).encode()) == (None, {})
    # the forwarded settings come before it, sorted, and are read back with it
    forwarded = {"OTEL_TRACES_SAMPLER": "parentbased_always_on", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4318"}
    both = as_json(with_traceparent(job, W3C_EXAMPLE, forwarded))
    assert [e["name"] for e in both["spec"]["template"]["spec"]["containers"][0]["env"]] == [
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "TRACEPARENT"]
    assert tracing_env_of(json.dumps(both).encode()) == (W3C_EXAMPLE, forwarded)
    # replacing keeps one variable
    again = with_traceparent(traced, "00-" + "1" * 32 + "-" + "2" * 16 + "-00")
    assert as_json(again)["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "TRACEPARENT", "value": "00-" + "1" * 32 + "-" + "2" * 16 + "-00"}]


SHUTDOWN_PROBE = """
import sys
from opentelemetry import trace
from shared.kube import tracing
assert tracing.configure_tracing("probe")
with trace.get_tracer("probe").start_as_current_span("one"):
    pass
print("flushed" if tracing.shutdown_tracing(timeout=0.5) else "given up")
"""


def test_a_shutdown_with_the_collector_unreachable_gives_up_after_its_timeout_instead_of_retrying_on() -> None:
    # a fresh interpreter: the global tracer provider can be set once per process. Nothing listens on the
    # port (bound, then closed), so every export attempt is refused and the exporter backs off and retries
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
    result = subprocess.run([sys.executable, "-c", SHUTDOWN_PROBE], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "given up", result.stdout + result.stderr
    assert "spans not exported within 0.5 s" in result.stderr
