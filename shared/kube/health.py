"""One HTTP server for ``/metrics``, ``/healthz`` and ``/readyz`` (docs/runtime.md#health).

Endpoint names and meaning follow controller-runtime's ``pkg/healthz``:

- ``/healthz`` (liveness): 200 when the event loop answers at all and every registered health check passes;
- ``/readyz`` (readiness): 200 only when every registered readiness check passes (e.g. informers synced, and —
  when electing — leading or standing by healthily), else 503;
- ``/metrics``: the Prometheus text exposition of :data:`shared.kube.metrics.registry` (or a given registry);
  with tracing on, OpenMetrics (with exemplars) to a scraper whose ``Accept`` asks for it.

Check bodies use controller-runtime's verbose format: one ``[+]name ok`` / ``[-]name failed: reason`` line per
check, then ``<endpoint> check passed`` or ``<endpoint> check failed``. Served by :class:`shared.kube.http.HttpServer`;
another path is 404, another method than GET or HEAD 405.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import anyio
from anyio.abc import TaskStatus
from prometheus_client import CollectorRegistry

from shared.kube import metrics, tracing
from shared.kube.http import HttpServer, Request

__all__ = ["CHECK_TIMEOUT", "Check", "HealthServer"]

log = logging.getLogger(__name__)

Check = Callable[[], bool | Awaitable[bool]]
"""A probe: returns (or resolves to) True when healthy. An exception or a False result fails it."""

CHECK_TIMEOUT: Final = 5.0
"""Seconds one asynchronous check may take before it counts as failed."""

_TEXT: Final = {"Content-Type": "text/plain; charset=utf-8"}

Answer = tuple[int, Mapping[str, str], bytes]


class HealthServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one address.

    Args:
        host: bind address (default all interfaces).
        port: TCP port; 0 picks a free one, readable as :attr:`port` once :meth:`run` has started.
        registry: the registry ``/metrics`` renders (default :data:`shared.kube.metrics.registry`).

    Run it inside a task group: ``await tg.start(server.run)`` returns once the socket is bound.
    """

    def __init__(self, host: str = "0.0.0.0", port: int = 8081, *,
                 registry: CollectorRegistry | None = None) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._registry = registry
        self._readiness: dict[str, Check] = {}
        self._health: dict[str, Check] = {}

    @property
    def port(self) -> int:
        """The bound TCP port. Raises RuntimeError before :meth:`run` has bound the socket."""
        if self._port is None:
            raise RuntimeError("HealthServer is not running")
        return self._port

    def add_readiness_check(self, name: str, check: Check) -> None:
        """Make ``/readyz`` depend on ``check`` (sync or async). Raises ValueError if ``name`` is taken."""
        _add(self._readiness, name, check)

    def add_health_check(self, name: str, check: Check) -> None:
        """Make ``/healthz`` depend on ``check`` (sync or async). Raises ValueError if ``name`` is taken."""
        _add(self._health, name, check)

    async def run(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the bound port through ``task_status`` (``tg.start`` returns it).

        Raises OSError when the address cannot be bound.
        """
        server = HttpServer(self._answer, self.host, self._requested_port)
        await server.start()
        try:
            self._port = server.port
            log.info("health and metrics server on %s:%d", self.host, self._port)
            task_status.started(self._port)
            await anyio.sleep_forever()
        finally:
            self._port = None
            with anyio.CancelScope(shield=True):
                await server.close()

    # -- handlers --------------------------------------------------------------------------------------------

    async def _answer(self, request: Request) -> Answer:
        if request.path not in ("/metrics", "/healthz", "/readyz"):
            return 404, _TEXT, b"404: Not Found\n"
        if request.method not in ("GET", "HEAD"):
            return 405, {**_TEXT, "Allow": "GET, HEAD"}, b"405: Method Not Allowed\n"
        if request.path == "/metrics":
            return self._metrics(request)
        return await _report(request.path[1:], self._health if request.path == "/healthz" else self._readiness)

    def _metrics(self, request: Request) -> Answer:
        if tracing.enabled and metrics.wants_openmetrics(request.headers.get("accept", "")):
            # with tracing on, a scraper that asks for OpenMetrics gets the exemplars; off, the text format always
            return 200, {"Content-Type": metrics.OPENMETRICS_CONTENT_TYPE}, metrics.render_openmetrics(self._registry)
        return 200, {"Content-Type": metrics.CONTENT_TYPE}, metrics.render(self._registry)


def _add(checks: dict[str, Check], name: str, check: Check) -> None:
    if name in checks:
        raise ValueError(f"a check named {name!r} is already registered")
    checks[name] = check


async def _run_check(check: Check) -> str | None:
    """None when ``check`` passes, else the reason it failed."""
    try:
        with anyio.fail_after(CHECK_TIMEOUT):
            result = check()
            if inspect.isawaitable(result):
                result = await result
    except TimeoutError:
        return f"timed out after {CHECK_TIMEOUT} s"
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None if result else "not ready"


async def _report(endpoint: str, checks: dict[str, Check]) -> Answer:
    """200 if every check passes, else 503; body lists each check (controller-runtime's verbose format)."""
    lines: list[str] = []
    failed = False
    for name, check in list(checks.items()):
        reason = await _run_check(check)
        if reason is None:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: {reason}")
    lines.append(f"{endpoint} check {'failed' if failed else 'passed'}")
    return 503 if failed else 200, _TEXT, ("\n".join(lines) + "\n").encode()
