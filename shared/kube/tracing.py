"""OpenTelemetry tracing: OTLP/HTTP export when configured, no-op otherwise.

:func:`configure_tracing` installs an SDK ``TracerProvider`` with a batch OTLP exporter
only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is
set; the exporter reads the standard ``OTEL_*`` variables itself. Without them the
global no-op provider stays, so spans cost next to nothing. The controller opens one
span per reconcile (:mod:`shared.kube.controller`).
"""

from __future__ import annotations

import os

from opentelemetry import trace

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def configure_tracing(service_name: str, environ: dict[str, str] | None = None) -> bool:
    """Export spans over OTLP/HTTP as ``service_name`` if an endpoint is configured.

    Returns True when an exporter was installed, False when tracing stays a no-op.
    """
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
    return True
