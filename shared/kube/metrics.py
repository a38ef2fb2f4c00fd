"""Prometheus metrics with controller-runtime's names, labels and buckets, on one registry per process.

Names, label names and buckets: docs/runtime.md#metrics (controller-runtime ``pkg/internal/controller/
metrics``, ``pkg/internal/metrics/workqueue.go``, ``pkg/metrics/leaderelection.go``, ``client_go_adapter.go``),
so existing controller-runtime dashboards work unchanged.

- :data:`registry` is the process registry; domain code registers its ``tatara_*`` metrics on it.
- :func:`runtime_metrics` returns the standard metrics on :data:`registry` (created on first call);
  :class:`RuntimeMetrics` builds them on any registry (tests use a fresh one).
- :func:`render` gives the text exposition for ``/metrics``.

prometheus-client adds a ``*_created`` series to counters and histograms; controller-runtime has none, so this
module turns them off process-wide on import (:func:`prometheus_client.disable_created_metrics`).

The series touched on every queue operation, reconcile and request (``workqueue_*`` counters and
histograms, ``controller_runtime_reconcile_total``/``_time_seconds``, ``rest_client_requests_total``) are
:mod:`shared.kube.loopmetrics` collectors: the same exposition without prometheus-client's per-call lock,
since only the event loop thread observes them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics import exposition as openmetrics_exposition
from prometheus_client.registry import Collector

from shared.kube.loopmetrics import LoopCounter, LoopHistogram

__all__ = [
    "CONTENT_TYPE",
    "RECONCILE_RESULTS",
    "RECONCILE_TIME_BUCKETS",
    "WORKQUEUE_DURATION_BUCKETS",
    "RuntimeMetrics",
    "WorkQueueMetrics",
    "exponential_buckets",
    "registry",
    "render",
    "runtime_metrics",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` upper bounds ``start, start·factor, …`` computed by repeated multiplication, as Go's
    ``prometheus.ExponentialBuckets`` does (so the ``le`` labels print identically, e.g. ``9.999999999999999e-06``).

    Raises ValueError for start <= 0, factor <= 1 or count < 1.
    """
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError(f"need start > 0, factor > 1, count >= 1; got {start}, {factor}, {count}")
    bounds: list[float] = []
    bound = start
    for _ in range(count):
        bounds.append(bound)
        bound *= factor
    return tuple(bounds)


#: ``controller_runtime_reconcile_time_seconds`` buckets, seconds (controller-runtime).
RECONCILE_TIME_BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0,
    40.0, 50.0, 60.0,
)  # fmt: skip
#: ``workqueue_{queue,work}_duration_seconds`` buckets: ExponentialBuckets(10e-9, 10, 12) = 1e-8 s … 1e3 s.
WORKQUEUE_DURATION_BUCKETS: Final[tuple[float, ...]] = exponential_buckets(10e-9, 10, 12)
#: Values of the ``result`` label of ``controller_runtime_reconcile_total``, all pre-initialised to 0.
RECONCILE_RESULTS: Final[tuple[str, ...]] = ("success", "error", "requeue", "requeue_after")

_WQ_LABELS: Final = ("name", "controller")


class _QueueGaugeCollector(Collector):
    """``workqueue_depth``, ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``,
    read at scrape time from each queue's probe ``() -> (depth, unfinished seconds, longest seconds)``."""

    def __init__(self) -> None:
        self._probes: dict[str, Callable[[], tuple[int, float, float]]] = {}
        self._lock = threading.Lock()  # scrapes may come from another thread

    def track(self, name: str, probe: Callable[[], tuple[int, float, float]]) -> None:
        with self._lock:
            self._probes[name] = probe

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            probes = list(self._probes.items())
        depth, unfinished, longest = self._families()
        for name, probe in probes:
            ready, total, oldest = probe()
            depth.add_metric([name, name, ""], ready)  # priority "": a queue without priorities
            unfinished.add_metric([name, name], total)
            longest.add_metric([name, name], oldest)
        return [depth, unfinished, longest]

    @staticmethod
    def _families() -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily(
                "workqueue_depth", "Keys ready in the work queue.", labels=("name", "controller", "priority")
            ),
            GaugeMetricFamily(
                "workqueue_unfinished_work_seconds",
                "Seconds of work in progress not yet observed by work_duration; large values indicate stuck workers.",
                labels=_WQ_LABELS,
            ),
            GaugeMetricFamily(
                "workqueue_longest_running_processor_seconds",
                "Seconds the longest-running worker of the queue has been processing its key.",
                labels=_WQ_LABELS,
            ),
        ]


class RuntimeMetrics:
    """The controller-runtime metric set registered on ``registry``; raises ValueError if any name is taken.

    Label names per metric are controller-runtime's (docs/runtime.md#metrics); ``workqueue_*`` metrics set both
    ``name`` and ``controller`` to the controller name, and ``priority`` to "" (a queue without priorities).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        # controller
        self.reconcile_total = LoopCounter(
            "controller_runtime_reconcile_total",
            "Reconciliations per controller and result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors_total = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconciliations that returned an error.",
            ["controller"],
            registry=r,
        )
        self.terminal_reconcile_errors_total = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Reconciliations that returned a terminal (not retried) error.",
            ["controller"],
            registry=r,
        )
        self.reconcile_panics_total = Counter(
            "controller_runtime_reconcile_panics_total",
            "Reconciliations that raised unexpectedly.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time_seconds = LoopHistogram(
            "controller_runtime_reconcile_time_seconds",
            "Duration of one reconciliation, seconds.",
            ["controller"],
            buckets=RECONCILE_TIME_BUCKETS,
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Configured worker count per controller.",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers currently reconciling, per controller.",
            ["controller"],
            registry=r,
        )
        # work queue
        self.workqueue_adds_total = LoopCounter(
            "workqueue_adds_total",
            "Keys added to the work queue (deduplicated adds not counted).",
            _WQ_LABELS,
            registry=r,
        )
        self.workqueue_queue_duration_seconds = LoopHistogram(
            "workqueue_queue_duration_seconds",
            "Seconds a key waits in the queue before it is handed out.",
            _WQ_LABELS,
            buckets=WORKQUEUE_DURATION_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration_seconds = LoopHistogram(
            "workqueue_work_duration_seconds",
            "Seconds between a key's hand-out and its done.",
            _WQ_LABELS,
            buckets=WORKQUEUE_DURATION_BUCKETS,
            registry=r,
        )
        self.workqueue_retries_total = LoopCounter(
            "workqueue_retries_total",
            "Keys added with a non-zero delay (rate-limited requeues, add_after).",
            _WQ_LABELS,
            registry=r,
        )
        self._queue_gauges = _QueueGaugeCollector()  # workqueue_depth, _unfinished_work_, _longest_running_
        r.register(self._queue_gauges)
        # leader election
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "1 while this instance holds the lease `name`, else 0.",
            ["name"],
            registry=r,
        )
        self.leader_election_slowpath_total = Counter(
            "leader_election_slowpath_total",
            "Lease renewals that needed a full read-modify-write.",
            ["name"],
            registry=r,
        )
        # REST client
        self.rest_client_requests_total = LoopCounter(
            "rest_client_requests_total",
            "API server requests by status code, method and host.",
            ["code", "method", "host"],
            registry=r,
        )

    def init_controller(self, controller: str, *, max_concurrent_reconciles: int) -> None:
        """Create the controller's series at their initial values so they are exported before any reconcile:
        every ``result`` of ``reconcile_total`` and the error/panic counters at 0, active workers 0, and
        ``max_concurrent_reconciles`` set (controller-runtime does the same at controller start)."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(controller, result)
        self.reconcile_errors_total.labels(controller)
        self.terminal_reconcile_errors_total.labels(controller)
        self.reconcile_panics_total.labels(controller)
        self.active_workers.labels(controller).set(0)
        self.max_concurrent_reconciles.labels(controller).set(max_concurrent_reconciles)

    def workqueue(self, name: str) -> WorkQueueMetrics:
        """The ``workqueue_*`` series of the queue of controller ``name`` (a :class:`~shared.kube.workqueue.
        QueueMetrics` for ``WorkQueue(metrics=...)``). Asking twice for one name shares the series."""
        return WorkQueueMetrics(self, name)


class WorkQueueMetrics:
    """``workqueue_*`` series for one queue, ``name`` = ``controller`` = the controller name.

    Implements :class:`shared.kube.workqueue.QueueMetrics`; durations are in seconds.
    """

    def __init__(self, metrics: RuntimeMetrics, name: str) -> None:
        self.name = name
        self._adds = metrics.workqueue_adds_total.labels(name, name)
        self._queue_duration = metrics.workqueue_queue_duration_seconds.labels(name, name)
        self._work_duration = metrics.workqueue_work_duration_seconds.labels(name, name)
        self._retries = metrics.workqueue_retries_total.labels(name, name)
        self._gauges = metrics._queue_gauges
        self._gauges.track(name, lambda: (0, 0.0, 0.0))

    def added(self) -> None:
        self._adds.inc()

    def queued_for(self, seconds: float, exemplar: Mapping[str, str] | None = None) -> None:
        if exemplar:
            self._queue_duration.observe_with_exemplar(seconds, exemplar)
        else:
            self._queue_duration.observe(seconds)

    def worked_for(self, seconds: float, exemplar: Mapping[str, str] | None = None) -> None:
        if exemplar:
            self._work_duration.observe_with_exemplar(seconds, exemplar)
        else:
            self._work_duration.observe(seconds)

    def retried(self) -> None:
        self._retries.inc()

    def track(self, probe: Callable[[], tuple[int, float, float]]) -> None:
        self._gauges.track(self.name, probe)


#: The process-wide registry: ``/metrics`` renders it; register ``tatara_*`` domain metrics here.
registry: Final[CollectorRegistry] = CollectorRegistry()


@functools.cache
def runtime_metrics() -> RuntimeMetrics:
    """The standard metrics on :data:`registry`, plus the ``process_*`` and ``python_*`` collectors (one per
    process; created on the first call)."""
    prometheus_client.ProcessCollector(registry=registry)
    prometheus_client.PlatformCollector(registry=registry)
    prometheus_client.GCCollector(registry=registry)
    return RuntimeMetrics(registry)


#: Content-Type of :func:`render`'s output (Prometheus text format 0.0.4).
CONTENT_TYPE: Final[str] = prometheus_client.CONTENT_TYPE_LATEST


def render(target: CollectorRegistry | None = None) -> bytes:
    """The text exposition of ``target`` (default :data:`registry`) for a ``/metrics`` response body."""
    return prometheus_client.generate_latest(registry if target is None else target)


#: Content-Type of :func:`render_openmetrics`'s output (OpenMetrics 1.0.0 text).
OPENMETRICS_CONTENT_TYPE: Final[str] = openmetrics_exposition.CONTENT_TYPE_LATEST


def render_openmetrics(target: CollectorRegistry | None = None) -> bytes:
    """The OpenMetrics exposition of ``target`` (default :data:`registry`): the format that carries exemplars
    (the trace of a histogram observation, docs/runtime.md#traces)."""
    body: bytes = openmetrics_exposition.generate_latest(  # type: ignore[no-untyped-call]
        registry if target is None else target)
    return body


def wants_openmetrics(accept: str) -> bool:
    """Whether an ``Accept`` header asks for OpenMetrics (Prometheus offers it first, at q=0.5 over the text
    format's 0.3 unless told otherwise); a ``q=0`` refusal does not count."""
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        if kind == "application/openmetrics-text":
            return not any(param.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for param in params)
    return False
