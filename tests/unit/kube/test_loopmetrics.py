"""shared.kube.loopmetrics: the same text exposition as prometheus-client's own Counter and Histogram
for the same observations (the expected text comes from prometheus-client, not from our code)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from shared.kube.loopmetrics import LoopCounter, LoopHistogram
from shared.kube.metrics import WORKQUEUE_DURATION_BUCKETS

LABELS = st.sampled_from([("a", "x"), ("b", "y"), ("c", "")])


@given(st.lists(st.tuples(LABELS, st.floats(min_value=0, max_value=1e6, allow_nan=False)), max_size=50))
def test_a_counter_exposes_what_prometheus_client_exposes(incs: list[tuple[tuple[str, str], float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    mine = LoopCounter("demo_adds_total", "Adds.", ["name", "controller"], registry=ours)
    reference = Counter("demo_adds_total", "Adds.", ["name", "controller"], registry=theirs)
    for labels, amount in incs:
        mine.labels(*labels).inc(amount)
        reference.labels(*labels).inc(amount)
    assert generate_latest(ours) == generate_latest(theirs)


@given(st.lists(st.tuples(LABELS, st.floats(min_value=0, max_value=2e4, allow_nan=False)), max_size=50))
def test_a_histogram_exposes_what_prometheus_client_exposes(observations: list[tuple[tuple[str, str], float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    mine = LoopHistogram("demo_seconds", "Waits.", ["name", "controller"], buckets=WORKQUEUE_DURATION_BUCKETS,
                         registry=ours)
    reference = Histogram("demo_seconds", "Waits.", ["name", "controller"], buckets=WORKQUEUE_DURATION_BUCKETS,
                          registry=theirs)
    for labels, value in observations:
        mine.labels(*labels).observe(value)
        reference.labels(*labels).observe(value)
    assert generate_latest(ours) == generate_latest(theirs)


def test_a_value_on_a_bound_falls_in_that_bucket_and_bad_input_is_refused() -> None:
    registry = CollectorRegistry()
    h = LoopHistogram("edge_seconds", "Edges.", [], buckets=(0.5, 1.0), registry=registry)
    h.labels().observe(1.0)  # le="1.0" includes 1.0 itself
    text = generate_latest(registry).decode()
    assert 'edge_seconds_bucket{le="0.5"} 0.0' in text
    assert 'edge_seconds_bucket{le="1.0"} 1.0' in text
    with pytest.raises(ValueError, match="expected labels"):
        LoopCounter("c_total", "C.", ["a"]).labels()
    with pytest.raises(ValueError, match="ascend"):
        LoopHistogram("h", "H.", [], buckets=(1.0, 0.5))
    with pytest.raises(ValueError, match="Duplicated"):  # the registry refuses a taken name, as for Counter
        LoopCounter("edge_seconds_count", "Clash.", [], registry=registry)


def test_an_exemplar_shows_in_openmetrics_as_prometheus_client_shows_it_and_the_text_format_is_unchanged() -> None:
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    trace = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
    ours, theirs, plain = CollectorRegistry(), CollectorRegistry(), CollectorRegistry()
    mine = LoopHistogram("demo_seconds", "Waits.", ["controller"], buckets=(0.01, 0.1, 1.0), registry=ours)
    reference = Histogram("demo_seconds", "Waits.", ["controller"], buckets=(0.01, 0.1, 1.0), registry=theirs)
    without = LoopHistogram("demo_seconds", "Waits.", ["controller"], buckets=(0.01, 0.1, 1.0), registry=plain)
    for value, exemplar in ((0.05, trace), (0.5, None), (0.07, {**trace, "span_id": "1" * 16})):
        if exemplar is None:
            mine.labels("c").observe(value)
            reference.labels("c").observe(value)
        else:
            mine.labels("c").observe_with_exemplar(value, exemplar)
            reference.labels("c").observe(value, exemplar=exemplar)
        without.labels("c").observe(value)

    def buckets(registry: CollectorRegistry) -> dict[str, tuple[float, dict[str, str] | None, float | None]]:
        (family,) = [f for f in parse_openmetrics(openmetrics(registry).decode()) if f.name == "demo_seconds"]
        return {s.labels["le"]: (s.value, s.exemplar.labels if s.exemplar else None,
                                 s.exemplar.value if s.exemplar else None)
                for s in family.samples if s.name == "demo_seconds_bucket"}

    assert buckets(ours) == buckets(theirs) == {
        "0.01": (0.0, None, None), "0.1": (2.0, {**trace, "span_id": "1" * 16}, 0.07), "1.0": (3.0, None, None),
        "+Inf": (3.0, None, None)}
    # the Prometheus text format has no exemplars: the same bytes as without them
    assert generate_latest(ours) == generate_latest(plain)
