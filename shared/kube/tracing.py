"""OpenTelemetry tracing: OTLP/HTTP export when configured, no-op otherwise (docs/runtime.md#traces).

:func:`configure_tracing` installs an SDK ``TracerProvider`` with a batch OTLP exporter
only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is
set; the exporter and the sampler read the standard ``OTEL_*`` variables themselves
(``OTEL_TRACES_SAMPLER``/``OTEL_TRACES_SAMPLER_ARG``: the SDK's default is ``parentbased_always_on``, the
charts set ``parentbased_traceidratio``). Without them the global no-op provider stays, the SDK is never
imported, and :data:`enabled` stays False: the code that would only feed spans (the client's request spans,
the attributes of a reconcile span, the ``traceparent`` of an export Job or a sink request, the
``trace_id`` of a log line) checks it first and does nothing else.

W3C trace context (the ``traceparent`` header, "Trace Context" recommendation) is written and read here
without the propagator registry (:mod:`opentelemetry.propagate` loads entry points at import).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace

log = logging.getLogger(__name__)

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

TRACEPARENT = "TRACEPARENT"
"""The environment variable an export Job's worker continues the trace from (the W3C ``traceparent`` value;
the name the OpenTelemetry "Environment Variables as Context Propagation Carriers" spec uses)."""

FORWARDED = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
             "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG")
"""The settings a process that starts another (the reconciler, an export Job) passes on with tracing on."""

enabled = False
"""Whether :func:`configure_tracing` installed an exporter in this process."""

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def configure_tracing(service_name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Export spans over OTLP/HTTP as ``service_name`` if an endpoint is configured.

    Returns True when an exporter was installed, False when tracing stays a no-op.
    """
    global enabled
    env = os.environ if environ is None else environ
    if not any(env.get(name) for name in _ENDPOINT_VARIABLES):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME", service_name)}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    enabled = True
    return True


SHUTDOWN_TIMEOUT = 3.0
"""Seconds :func:`shutdown_tracing` waits for the last spans to be exported. The OTLP exporter retries an
unreachable collector with backoff for up to its own timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s), which would
hold an export Job's pod, or a controller's shutdown, that long for spans nobody can receive."""


def shutdown_tracing(timeout: float = SHUTDOWN_TIMEOUT) -> bool:
    """Flush the spans still queued and stop the exporter (a short-lived process, the export worker, ends
    before the batch processor's next export otherwise), waiting at most ``timeout`` seconds.

    The SDK's shutdown runs in a daemon thread; past ``timeout`` the spans still queued are given up (logged)
    and the process may exit. Returns True when the flush finished (or tracing is off), False when given up.
    """
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if not enabled or shutdown is None:
        return True
    worker = threading.Thread(target=shutdown, name="otel-shutdown", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        log.warning("spans not exported within %.1f s (is the collector at OTEL_EXPORTER_OTLP_ENDPOINT "
                    "reachable?): given up", timeout)
        return False
    return True


def format_traceparent(span_context: trace.SpanContext) -> str:
    """``00-<trace id>-<span id>-<flags>`` for ``span_context``."""
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span; None when tracing is off or no span is active."""
    if not enabled:
        return None
    span_context = trace.get_current_span().get_span_context()
    return format_traceparent(span_context) if span_context.is_valid else None


def context_from_traceparent(value: str | None) -> otel_context.Context | None:
    """The context holding the remote parent ``value`` names; None when it is absent or malformed (the
    Trace Context recommendation: an unparsable header is ignored, and so is an all-zero id)."""
    match = _TRACEPARENT.match((value or "").strip().lower())
    if match is None:
        return None
    trace_id, span_id, flags = int(match.group(1), 16), int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        return None
    parent = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags & 1))
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def log_ids() -> dict[str, str]:
    """``trace_id`` and ``span_id`` of the current span, hex as Jaeger shows them; empty when tracing is off or
    no span is active."""
    if not enabled:
        return {}
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return {}
    return {"trace_id": f"{span_context.trace_id:032x}", "span_id": f"{span_context.span_id:016x}"}


def annotate(**attributes: str | int | float | bool) -> None:
    """Set ``attributes`` (``_`` in a keyword becomes ``.``: ``tatara_phase_before`` → ``tatara.phase.before``)
    on the current span; nothing when tracing is off."""
    if not enabled:
        return
    span = trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(key.replace("_", "."), value)


def forwarded_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The :data:`FORWARDED` variables set in ``environ`` (default ``os.environ``); empty with tracing off."""
    if not enabled:
        return {}
    env = os.environ if environ is None else environ
    return {name: env[name] for name in FORWARDED if env.get(name)}
