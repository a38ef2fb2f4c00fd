"""Each binary imports only what it uses at start (docs/runtime.md#start): not kubernetes-asyncio (its generated
models; the kubeconfig loader is ours), not the OpenTelemetry SDK and exporter unless tracing is configured, not
the CEL package (its ``__init__`` loads a command-line interface) until an expression is compiled, not aiohttp
(HTTP is shared/kube/http.py), not nats-py until a NATS export ships.

Checked in fresh interpreters, as tests/unit/test_rooms.py does: ``sys.modules`` after the import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BINARIES = ("reconciler.main", "reconciler.app", "pool_reconciler.main", "pool_reconciler.app", "export_worker.main")

NEVER_AT_START = (
    "kubernetes_asyncio",  # the generated OpenAPI client: a quarter of a second
    "opentelemetry.sdk",  # tracing off: the API's no-op provider only
    "opentelemetry.exporter",
    "cel",  # compiled on the first CEL condition
    "prompt_toolkit",  # cel's command-line interface
    "typer",
    "urllib3",
    "aiohttp",  # the HTTP client and server are shared/kube/http.py on asyncio and httptools
    "yarl",
    "multidict",
    "nats",  # the export worker's NATS client: imported by the first NATS export
)


def loaded_after(statement: str, env: dict[str, str] | None = None) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=env)
    return set(json.loads(out.stdout))


def packages(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted({prefix for prefix in prefixes for module in modules
                   if module == prefix or module.startswith(prefix + ".")})


@pytest.mark.parametrize("module", BINARIES)
def test_a_binary_imports_nothing_it_does_not_use_at_start(module: str) -> None:
    assert packages(loaded_after(f"import {module}"), NEVER_AT_START) == []


def test_the_otel_sdk_is_imported_when_tracing_is_configured() -> None:
    # the other side of the lazy import: with an endpoint, the SDK and the OTLP exporter are there
    loaded = loaded_after("from shared.kube.tracing import configure_tracing\n"
                          "assert configure_tracing('t', {'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:1'})")
    assert packages(loaded, ("opentelemetry.sdk", "opentelemetry.exporter")) == [
        "opentelemetry.exporter", "opentelemetry.sdk"]


def test_nats_is_imported_by_the_first_nats_export() -> None:
    loaded = loaded_after("import asyncio\n"
                          "from export_worker.channels import ship_nats\n"
                          "from shared.domain.api.export import NatsSubjectChannel\n"
                          "channel = NatsSubjectChannel(subject='s', stream='S', url='nats://127.0.0.1:1')\n"
                          "asyncio.run(ship_nats(channel, b'{}', 'run'))")
    assert packages(loaded, ("nats",)) == ["nats"]


def test_cel_is_imported_by_the_first_compile() -> None:
    loaded = loaded_after("from reconciler.cel import compile_expression\n"
                          "assert compile_expression('1 + 1 == 2') is not None")
    assert packages(loaded, ("cel",)) == ["cel"]


def test_a_cel_worker_loads_the_binding_before_its_cost_limits() -> None:
    # a fresh interpreter is what a CEL worker process is (reconciler/cel_runner.py); a CPU budget far below
    # the binding's import cost and far above a trivial evaluation's: the worker survives only if the
    # import ran before the budget was armed (SIGPROF would end it otherwise)
    out = subprocess.run([sys.executable, "-c", "from reconciler.cel import run_bounded\n"
                          "print(run_bounded('1 + 1 == 2', {}, cpu_seconds=0.02).value)"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr[-2000:]
