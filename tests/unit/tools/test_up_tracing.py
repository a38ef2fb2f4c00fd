"""``tatara up``'s tracing settings (tools/up.py): the ``OTEL_*`` variables the subprocesses get (the names and
values the OpenTelemetry SDK's environment-variable specification defines) and the lines that say where the
traces are."""

from __future__ import annotations

from tools.up import traces_hint, tracing_env


def test_without_an_endpoint_no_variable_is_set() -> None:
    assert tracing_env(None) == {}


def test_an_endpoint_is_exported_to_with_every_new_trace_kept() -> None:
    assert tracing_env("http://127.0.0.1:4318") == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "1",
    }


def test_the_hints_are_jaegers_query_api_paths_on_the_given_url() -> None:
    lines = traces_hint("http://127.0.0.1:16686")
    assert lines[0] == "curl -s http://127.0.0.1:16686/api/services"
    assert "'http://127.0.0.1:16686/api/traces?service=tatara-reconciler&limit=20'" in lines[1]
    assert lines[2].startswith("curl -s http://127.0.0.1:16686/api/traces/<trace id>")
