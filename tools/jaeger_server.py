"""A real Jaeger v2 on loopback, with in-memory storage, for the tests and ``tatara up``
(docs/runtime.md#traces).

The binary is built from its Go module on first use (:mod:`tools.controlplane.jaeger`). Jaeger v2 is an
OpenTelemetry Collector distribution and takes a collector-style YAML config (``--config``); the one written
here is upstream's ``cmd/jaeger/internal/all-in-one.yaml`` cut down to what the tests use:

- the ``otlp`` receiver, gRPC and HTTP, each on a free 127.0.0.1 port (:attr:`JaegerServer.otlp_http_url` is
  what ``OTEL_EXPORTER_OTLP_ENDPOINT`` names for the binaries' OTLP/HTTP exporter);
- the ``jaeger_storage`` extension with one ``memory`` backend, written by ``jaeger_storage_exporter``;
- the ``jaeger_query`` extension's HTTP server (``/api/services``, ``/api/traces``) and gRPC server on free
  ports; no sampling, health-check or zpages extension, and the collector's own metrics off
  (``service.telemetry.metrics.level: none``), so no fixed port is bound.

Ready when ``/api/services`` answers 200. Stopped with SIGTERM, then SIGKILL after a grace period.

Usage::

    with JaegerServer() as jaeger:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = jaeger.otlp_http_url
        jaeger.traces("tatara-reconciler")

Standalone: ``python -m tools.jaeger_server`` runs one until interrupted and prints its URLs.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.controlplane import jaeger as jaeger_build
from tools.controlplane.cluster import free_port
from tools.processes import LoopbackServer, answers_ok, serve_until_signalled, start_server, wait_until_ready

START_TIMEOUT = 60.0
"""Seconds to wait for the query API after the start."""

class JaegerError(RuntimeError):
    """Jaeger exited early, did not become ready, or its query API refused a request (``status``: its HTTP
    status); the message says how."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def config_yaml(*, otlp_grpc: int, otlp_http: int, query_http: int, query_grpc: int) -> str:
    """The Jaeger v2 config: OTLP in, memory storage, the query API out, all on 127.0.0.1 (module docstring).

    JSON is YAML, so the document is written as JSON."""
    config = {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                     "exporters": ["jaeger_storage_exporter"]}},
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100000}}}},
            "jaeger_query": {"storage": {"traces": "memstore"},
                             "http": {"endpoint": f"127.0.0.1:{query_http}"},
                             "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"}},
        },
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{otlp_grpc}"},
                                             "http": {"endpoint": f"127.0.0.1:{otlp_http}"}}}},
        "processors": {"batch": {"timeout": "100ms"}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }
    return json.dumps(config, indent=2) + "\n"


@dataclass
class JaegerServer(LoopbackServer):
    """``jaeger --config <file>`` on 127.0.0.1; a context manager. After :meth:`start` the ports are set (the
    query port as given, when given)."""

    binary: Path | None = None
    query_port: int = 0
    """The query API's port on 127.0.0.1; 0 picks a free one at :meth:`start`."""
    otlp_grpc_port: int = field(default=0, init=False)
    otlp_http_port: int = field(default=0, init=False)
    query_grpc_port: int = field(default=0, init=False)

    TEMP_PREFIX = "tatara-jaeger-"
    LOG_NAME = "jaeger.log"

    @property
    def otlp_http_url(self) -> str:
        """``http://127.0.0.1:<port>``: the OTLP/HTTP receiver (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.otlp_http_port}"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """``127.0.0.1:<port>``: the OTLP/gRPC receiver."""
        return f"127.0.0.1:{self.otlp_grpc_port}"

    @property
    def query_url(self) -> str:
        """``http://127.0.0.1:<port>``: the query API (``/api/services``, ``/api/traces``)."""
        return f"http://127.0.0.1:{self.query_port}"

    def start(self) -> JaegerServer:
        """Build Jaeger if missing, start it and wait until the query API answers.

        Raises:
            tools.controlplane.build.BuildError: Jaeger could not be built.
            JaegerError: it exited or did not answer within :data:`START_TIMEOUT`.
        """
        binary = self.binary or jaeger_build.built().ensure_built()
        self.otlp_grpc_port, self.otlp_http_port = free_port(), free_port()
        self.query_port, self.query_grpc_port = self.query_port or free_port(), free_port()
        config = self._work_dir() / "config.yaml"
        config.write_text(config_yaml(otlp_grpc=self.otlp_grpc_port, otlp_http=self.otlp_http_port,
                                      query_http=self.query_port, query_grpc=self.query_grpc_port))
        self.process = start_server([str(binary), "--config", str(config)], self.log_path)

        def failed(why: str) -> JaegerError:
            return JaegerError(f"jaeger {why}:\n{self.log_tail()}")

        wait_until_ready(self.process, self._ready, timeout=START_TIMEOUT, failed=failed, stop=self.stop)
        return self

    def _ready(self) -> bool:
        return answers_ok(f"{self.query_url}/api/services")

    def query(self, path: str, **params: str | int) -> Any:
        """GET ``path`` of the query API with ``params``; its ``data`` field (the API's envelope).

        Raises:
            JaegerError: not a 200 answer.
        """
        url = f"{self.query_url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())["data"]
        except urllib.error.HTTPError as err:
            raise JaegerError(f"GET {url}: {err.code} {err.read()[:500]!r}", status=err.code) from err

    def services(self) -> list[str]:
        """The service names Jaeger holds spans of."""
        return list(self.query("/api/services") or [])

    def traces(self, service: str, *, limit: int = 1000, lookback: str = "1h") -> list[dict[str, Any]]:
        """The traces holding spans of ``service`` (Jaeger's JSON model: ``traceID``, ``spans``,
        ``processes``)."""
        return list(self.query("/api/traces", service=service, limit=limit, lookback=lookback) or [])

    def find_trace(self, trace_id: str) -> dict[str, Any] | None:
        """One whole trace by its hex id (Jaeger's JSON model); None while Jaeger holds no span of it (404)."""
        try:
            found = self.query(f"/api/traces/{trace_id}")
        except JaegerError as err:
            if err.status == 404:
                return None
            raise
        return dict(found[0]) if found else None



def main(argv: list[str] | None = None) -> int:
    """``python -m tools.jaeger_server``: run Jaeger until SIGINT/SIGTERM; print its URLs."""
    with JaegerServer() as jaeger:
        print(f"OTEL_EXPORTER_OTLP_ENDPOINT={jaeger.otlp_http_url}", flush=True)
        print(f"query API: {jaeger.query_url}/api/services", flush=True)
        serve_until_signalled(lambda: jaeger.process is not None and jaeger.process.poll() is None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
