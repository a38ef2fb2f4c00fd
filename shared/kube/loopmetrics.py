"""Counters and histograms for the hot path of a single-threaded asyncio controller.

prometheus-client's ``Counter`` and ``Histogram`` take a lock on every ``inc``/``observe`` (they must:
any thread may observe) and check on every call that the metric is observable; on a work queue's
hot path that halved its throughput (docs/runtime.md#metrics, ``bench.workqueue_bench``). Everything
that observes these is on the event loop thread, and so is the ``/metrics`` handler that reads them
(:mod:`shared.kube.health` serves from the same loop), so a plain ``+=`` is enough.

:class:`LoopCounter` and :class:`LoopHistogram` are prometheus-client collectors with the same
exposition as ``Counter``/``Histogram`` (names, ``_total``, ``_bucket{le}`` with Go-formatted bounds,
``_sum``, ``_count``; no ``_created``) and the ``labels(*values).inc()/observe()`` calls the runtime
uses, and ``observe_with_exemplar`` for the OpenMetrics exemplar of a traced reconcile (the text format
ignores exemplars, so it is unchanged). Not thread-safe: observe only from the event loop thread.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

__all__ = ["CounterChild", "HistogramChild", "LoopCounter", "LoopHistogram"]

C = TypeVar("C", "CounterChild", "HistogramChild")


class CounterChild:
    """One labelled counter series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0)."""
        self.value += amount


class HistogramChild:
    """One labelled histogram series over fixed upper bounds."""

    __slots__ = ("_bounds", "counts", "exemplars", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """Observations per bucket (not cumulative); the last is the +Inf bucket."""
        self.sum = 0.0
        self.exemplars: dict[int, Exemplar] | None = None
        """The latest exemplar per bucket index, once :meth:`observe_with_exemplar` gave one."""

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound is >= it (Prometheus ``le``)."""
        self.counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value

    def observe_with_exemplar(self, value: float, labels: Mapping[str, str]) -> None:
        """:meth:`observe`, and keep ``labels`` (e.g. the trace id) as the bucket's exemplar, as
        prometheus-client's ``Histogram.observe(value, exemplar)`` does (the latest one per bucket)."""
        index = bisect.bisect_left(self._bounds, value)
        self.counts[index] += 1
        self.sum += value
        if labels:
            if self.exemplars is None:
                self.exemplars = {}
            self.exemplars[index] = Exemplar(dict(labels), value, time.time())


class _Family(Collector, Generic[C]):
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry | None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        if registry is not None:
            registry.register(self)

    def _new_child(self) -> C:
        raise NotImplementedError

    def labels(self, *values: str) -> C:
        """The series of ``values`` (created empty on first use, so it is exported from then on).

        Raises:
            ValueError: not one value per label name.
        """
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            child = self._children[values] = self._new_child()
        return child


class LoopCounter(_Family[CounterChild]):
    """A counter family, exposed as ``<name>`` (``_total`` added if missing), like prometheus-client's ``Counter``."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry | None = None) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames, registry)

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def describe(self) -> Iterable[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children.items():
            family.add_metric(list(values), child.value)
        yield family


class LoopHistogram(_Family[HistogramChild]):
    """A histogram family over ``buckets`` (upper bounds, ascending; +Inf is added), like prometheus-client's
    ``Histogram``."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *, buckets: Sequence[float],
                 registry: CollectorRegistry | None = None) -> None:
        bounds = [float(b) for b in buckets if b != float("inf")]
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError(f"{name}: buckets must ascend strictly, got {buckets}")
        self.bounds = tuple(bounds)
        self._le = [floatToGoString(b) for b in self.bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children.items():
            running, cumulative = 0, []
            for le, count in zip(self._le, child.counts, strict=True):
                running += count
                cumulative.append((le, float(running)))
            if child.exemplars:
                exemplars = child.exemplars
                family.add_metric(list(values), [(le, n, exemplars[i]) if i in exemplars else (le, n)
                                                 for i, (le, n) in enumerate(cumulative)], child.sum)
            else:
                family.add_metric(list(values), cumulative, child.sum)
        yield family
