"""``tatara_*`` domain metrics of the Process reconciler (docs/behaviour.md#domain-metrics).

- ``tatara_process_phase_transitions_total{from,to}``: phase changes written;
- ``tatara_process_phase_seconds{phase}``: time spent in a phase, observed when it is left
  (histogram, seconds; from ``status.phaseSince`` to the transition);
- ``tatara_processes{phase}``: Processes per phase, read from the informer cache at scrape;
- ``tatara_signals_total{signal,outcome}``: signals taken from the annotation (outcome
  ``applied``, ``ignored`` or ``invalid``);
- ``tatara_pid_bump_races_total``: ProcessTable ``nextSequence`` bumps lost to another writer (a failed
  ``test``, re-read and retried; docs/architecture.md#one-processtable-many-shards).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shared.domain.api.phase import ProcessPhase

PHASE_SECONDS_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)
"""Histogram bounds for time in phase, seconds: sub-second steps up to a day in Attested."""


class _PhaseGauge(Collector):
    def __init__(self, phases: Callable[[], Iterable[ProcessPhase]]) -> None:
        self._phases = phases

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily("tatara_processes", "Processes per phase.", labels=["phase"])]

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("tatara_processes", "Processes per phase.", labels=["phase"])
        tally = Tally(self._phases())
        for phase in ProcessPhase:
            family.add_metric([phase.value], tally.get(phase, 0))
        return [family]


class ProcessMetrics:
    """The reconciler's domain metrics on ``registry``.

    Args:
        registry: where to register (the process registry in the binary, a fresh one in tests).
        phases: callable listing the phase of every cached Process (for ``tatara_processes``).
    """

    def __init__(self, registry: CollectorRegistry, phases: Callable[[], Iterable[ProcessPhase]]) -> None:
        self.transitions = Counter("tatara_process_phase_transitions_total", "Process phase transitions.",
                                   ["from", "to"], registry=registry)
        self.phase_seconds = Histogram("tatara_process_phase_seconds", "Seconds a Process spent in a phase.",
                                       ["phase"], buckets=PHASE_SECONDS_BUCKETS, registry=registry)
        self.signals = Counter("tatara_signals_total", "Signals taken from the signal annotation.",
                               ["signal", "outcome"], registry=registry)
        self.pid_bump_races = Counter("tatara_pid_bump_races",
                                      "ProcessTable nextSequence bumps lost to another writer.", registry=registry)
        registry.register(_PhaseGauge(phases))

    def transition(self, old: ProcessPhase, new: ProcessPhase, seconds_in_old: float | None) -> None:
        self.transitions.labels(old.value, new.value).inc()
        if seconds_in_old is not None and seconds_in_old >= 0:
            self.phase_seconds.labels(old.value).observe(seconds_in_old)
