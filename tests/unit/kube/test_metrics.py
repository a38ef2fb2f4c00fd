"""Metric names, types, label names and buckets as exposed on /metrics, checked against
controller-runtime's metric table (docs/runtime.md#metrics) by parsing the exposition text, not by reading
our own definitions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from shared.kube import metrics
from shared.kube.metrics import RuntimeMetrics, exponential_buckets, render

CONTROLLER = "toy"

# Exposed sample name, TYPE line, label names — controller-runtime's, written out by hand.
SPEC_ROWS = [
    ("controller_runtime_reconcile_total", "counter", {"controller", "result"}),
    ("controller_runtime_reconcile_errors_total", "counter", {"controller"}),
    ("controller_runtime_terminal_reconcile_errors_total", "counter", {"controller"}),
    ("controller_runtime_reconcile_panics_total", "counter", {"controller"}),
    ("controller_runtime_reconcile_time_seconds", "histogram", {"controller"}),
    ("controller_runtime_max_concurrent_reconciles", "gauge", {"controller"}),
    ("controller_runtime_active_workers", "gauge", {"controller"}),
    ("workqueue_depth", "gauge", {"name", "controller", "priority"}),
    ("workqueue_adds_total", "counter", {"name", "controller"}),
    ("workqueue_queue_duration_seconds", "histogram", {"name", "controller"}),
    ("workqueue_work_duration_seconds", "histogram", {"name", "controller"}),
    ("workqueue_unfinished_work_seconds", "gauge", {"name", "controller"}),
    ("workqueue_longest_running_processor_seconds", "gauge", {"name", "controller"}),
    ("workqueue_retries_total", "counter", {"name", "controller"}),
    ("leader_election_master_status", "gauge", {"name"}),
    ("leader_election_slowpath_total", "counter", {"name"}),
    ("rest_client_requests_total", "counter", {"code", "method", "host"}),
]

RECONCILE_TIME_BUCKETS_SPEC = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
    1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
]  # fmt: skip
WORKQUEUE_BUCKETS_SPEC = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0]


def exposed_samples() -> Iterator[tuple[str, str, Sample]]:
    """(TYPE, family name, sample) for every sample of a registry holding one touched controller."""
    registry = CollectorRegistry()
    m = RuntimeMetrics(registry)
    m.init_controller(CONTROLLER, max_concurrent_reconciles=4)
    m.reconcile_time_seconds.labels(CONTROLLER).observe(0.2)
    m.workqueue(CONTROLLER).queued_for(0.001)
    m.leader_election_master_status.labels(CONTROLLER).set(1)
    m.leader_election_slowpath_total.labels(CONTROLLER).inc()
    m.rest_client_requests_total.labels("200", "GET", "127.0.0.1:6443").inc()
    for family in text_string_to_metric_families(render(registry).decode()):
        for s in family.samples:
            yield family.type, family.name, s


SAMPLES = list(exposed_samples())


def samples_named(name: str) -> list[Sample]:
    return [s for _, _, s in SAMPLES if s.name == name]


@pytest.mark.parametrize(
    ("name", "kind", "labels"),
    [pytest.param(*row, id=f"{row[0]} is a {row[1]} labelled by {', '.join(sorted(row[2]))}") for row in SPEC_ROWS],
)
def test_every_spec_metric_is_exposed_with_its_type_and_labels(name: str, kind: str, labels: set[str]) -> None:
    found = [(t, s) for t, _, s in SAMPLES if s.name in {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}]
    assert found, f"{name} is not exposed"
    assert {t for t, _ in found} == {kind}
    for _, s in found:
        assert set(s.labels) - {"le"} == labels, s


def test_nothing_but_the_spec_metrics_is_exposed() -> None:
    allowed = {row[0] for row in SPEC_ROWS}
    stray = {s.name for _, _, s in SAMPLES if s.name not in allowed and s.name.rpartition("_")[0] not in allowed}
    assert stray == set(), "no *_created or other extra series (controller-runtime exposes none)"


def test_every_reconcile_result_starts_at_zero() -> None:
    results = {
        s.labels["result"]: s.value
        for s in samples_named("controller_runtime_reconcile_total")
        if s.labels["controller"] == CONTROLLER
    }
    assert results == {"success": 0, "error": 0, "requeue": 0, "requeue_after": 0}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "controller_runtime_reconcile_time_seconds",
            RECONCILE_TIME_BUCKETS_SPEC,
            id="reconcile time uses the 5 ms to 60 s list",
        ),
        pytest.param(
            "workqueue_queue_duration_seconds",
            WORKQUEUE_BUCKETS_SPEC,
            id="queue duration uses ten-fold buckets from 10 ns to 1000 s",
        ),
        pytest.param(
            "workqueue_work_duration_seconds",
            WORKQUEUE_BUCKETS_SPEC,
            id="work duration uses ten-fold buckets from 10 ns to 1000 s",
        ),
    ],
)
def test_histogram_buckets_match_the_spec(name: str, expected: list[float]) -> None:
    bounds = [s.labels["le"] for s in samples_named(f"{name}_bucket")]
    assert bounds[-1] == "+Inf"
    assert [float(b) for b in bounds[:-1]] == pytest.approx(expected, rel=1e-9)


def test_workqueue_bucket_labels_print_like_go() -> None:
    """Go's ExponentialBuckets multiplies repeatedly; dashboards keyed on ``le`` see the same strings."""
    bounds = [s.labels["le"] for s in samples_named("workqueue_queue_duration_seconds_bucket")]
    assert bounds[3:5] == ["9.999999999999999e-06", "9.999999999999999e-05"]


def test_workqueue_series_use_the_controller_name_for_name_and_controller() -> None:
    (depth,) = samples_named("workqueue_depth")
    assert depth.labels == {"name": CONTROLLER, "controller": CONTROLLER, "priority": ""}


def test_init_controller_sets_max_concurrency_and_zero_active_workers() -> None:
    (max_workers,) = samples_named("controller_runtime_max_concurrent_reconciles")
    (active,) = samples_named("controller_runtime_active_workers")
    assert (max_workers.value, active.value) == (4, 0)


@pytest.mark.parametrize(
    ("start", "factor", "count"),
    [
        pytest.param(0.0, 10.0, 3, id="a zero start is rejected"),
        pytest.param(1.0, 1.0, 3, id="a factor of one is rejected"),
        pytest.param(1.0, 2.0, 0, id="zero buckets are rejected"),
    ],
)
def test_exponential_buckets_reject_bad_arguments(start: float, factor: float, count: int) -> None:
    with pytest.raises(ValueError, match="need"):
        exponential_buckets(start, factor, count)


def test_registering_the_runtime_metrics_twice_on_one_registry_fails() -> None:
    registry = CollectorRegistry()
    RuntimeMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        RuntimeMetrics(registry)


def test_the_process_registry_renders_runtime_process_and_domain_metrics() -> None:
    runtime = metrics.runtime_metrics()
    assert metrics.runtime_metrics() is runtime, "one set per process"
    domain = Counter("tatara_test_phase_transitions_total", "test", ["from_phase", "to"], registry=metrics.registry)
    try:
        domain.labels("Pending", "Running").inc()
        names = {s.name for f in text_string_to_metric_families(render().decode()) for s in f.samples}
    finally:
        metrics.registry.unregister(domain)
    assert {"tatara_test_phase_transitions_total", "process_cpu_seconds_total"} <= names
    assert metrics.CONTENT_TYPE.startswith("text/plain")
