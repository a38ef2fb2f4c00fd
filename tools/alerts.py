"""Write the Prometheus alerting rules shipped in each controller chart (``charts/<chart>/alerts/rules.yaml``).

Usage: ``python -m tools.alerts [--check]`` — ``--check`` writes nothing and exits 1 when a rules file differs
from what this module generates.

The chart's ``templates/prometheusrule.yaml`` (``prometheusRule.enabled``, like the ServiceMonitor) reads the
file and replaces :data:`SELECTOR` with ``job="<fullname>-metrics", namespace="<release namespace>"``: the
scrape job a ServiceMonitor gives this chart's Service, so each chart's alerts read only its own binary.
Every alert has ``summary``, ``description`` and a ``runbook`` line (what to look at first). The rules are
checked by ``promtool check rules`` and unit-tested by ``promtool test rules``
(tests/integration/charts/test_alert_rules.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.generated import generator_main

ROOT = Path(__file__).resolve().parents[1]

SELECTOR = "__TATARA_SELECTOR__"
"""Placeholder the chart template replaces with this release's ``job`` and ``namespace`` matchers."""

S = SELECTOR

SETTLED = "Attested|Failed|Reaped"
"""Process phases a Process may rest in (docs/behaviour.md#phases); the others are passed through."""


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    runbook: str

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description, "runbook": self.runbook},
        }


def runtime_alerts(binary: str) -> list[Alert]:
    """The controller-runtime alerts both charts share; ``binary`` names the controllers in the text."""
    return [
        Alert("TataraReconcileErrors",
              f"sum by (controller) (rate(controller_runtime_reconcile_errors_total{{{S}}}[5m])) > 0", "15m",
              "warning",
              f"{binary}: controller {{{{ $labels.controller }}}} keeps failing to reconcile",
              "Reconciliations of {{ $labels.controller }} have returned errors for 15 minutes "
              "({{ $value | humanize }}/s).",
              "Read the controller's error logs and the Warning Events of the objects it reconciles "
              "(kubectl get events --field-selector type=Warning); a 403 means missing RBAC, a 409 storm a "
              "second writer."),
        Alert("TataraWorkQueueDepth", f"sum by (name) (workqueue_depth{{{S}}}) > 100", "15m", "warning",
              f"{binary}: work queue {{{{ $labels.name }}}} is not draining",
              "{{ $value }} keys have waited in the {{ $labels.name }} queue for 15 minutes.",
              "Compare controller_runtime_active_workers with max_concurrent_reconciles on the dashboard: all "
              "busy means slow reconciles (API latency, a slow boundary check); none busy means no leader."),
        Alert("TataraWorkQueueLatency",
              "histogram_quantile(0.99, sum by (name, le) "
              f"(rate(workqueue_queue_duration_seconds_bucket{{{S}}}[5m]))) > 60", "15m", "warning",
              f"{binary}: keys wait over a minute in work queue {{{{ $labels.name }}}}",
              "The 99th percentile of time in the {{ $labels.name }} queue is {{ $value | humanizeDuration }}.",
              "See the queue and work-duration panels; raise the worker count or find the slow reconcile "
              "(workqueue_longest_running_processor_seconds)."),
        Alert("TataraNoLeader", f"min(sum by (name) (leader_election_master_status{{{S}}})) < 1", "5m", "critical",
              f"{binary}: no replica holds a leader Lease",
              "With leader election on, no replica has held one of the Leases (a shard's, or the ProcessTable "
              "writer's) for 5 minutes: that shard, or the table's status, is not reconciled.",
              "kubectl get lease -n <lease namespace>; check that the pods run and can reach the API server, "
              "and the Role on coordination.k8s.io leases."),
    ]


def process_alerts() -> list[Alert]:
    return [
        Alert("TataraProcessesFailed", f'max(tatara_processes{{{S}, phase="Failed"}}) > 0', "10m", "warning",
              "{{ $value }} Processes are Failed",
              "Processes have stayed in Failed for 10 minutes; a Failed Process does not retry by itself.",
              "kubectl get processes -A -o wide shows Reason and Message; fix the spec (InvalidSpec), the child "
              "(ChildStalled) or the boundary checks (BoundaryTimeout), then change the spec or delete it."),
        Alert("TataraProcessesStuckInPhase",
              f'max by (phase) (tatara_processes{{{S}, phase!~"{SETTLED}"}}) > 0 unless on (phase) '
              'sum by (phase) (label_replace(increase(tatara_process_phase_transitions_total'
              f'{{{S}}}[30m]), "phase", "$1", "from", "(.*)")) > 0', "30m", "warning",
              "Processes sit in {{ $labels.phase }} and none has left it for 30 minutes",
              "{{ $value }} Processes are in {{ $labels.phase }} and no phase transition out of it happened in "
              "30 minutes.",
              "kubectl get processes -A -o wide | grep {{ $labels.phase }}: Stalled with a reason means an input "
              "error; otherwise look at dependsOn targets, the Flux children and the boundary conditions."),
    ]


def pool_alerts() -> list[Alert]:
    return [
        Alert("TataraAllocationsWaiting",
              f'sum(max by (phase) (tatara_allocations{{{S}, phase=~"Pending|Queued|NoMatchingPool"}})) > 0',
              "30m", "warning",
              "{{ $value }} EphemeralAllocations have waited for a pool member for 30 minutes",
              "Allocations stay Pending, Queued or NoMatchingPool.",
              "kubectl get ephemeralallocations -A -o wide: NoMatchingPool means no pool selector matches the "
              "requestor; Queued means the pool has no Free member (raise desiredSize or maxSize)."),
        Alert("TataraAllocationWaitHigh",
              "histogram_quantile(0.99, sum by (le) "
              f"(rate(tatara_allocation_bind_seconds_bucket{{{S}}}[30m]))) > 300", "15m", "warning",
              "Binding an allocation takes over 5 minutes (p99)",
              "The 99th percentile from an allocation's creation to Bound is {{ $value | humanizeDuration }}.",
              "Pools run out of warm members: compare Free members with allocations on the dashboard and raise "
              "desiredSize, or shorten how long members are held (ttl)."),
    ]


CHARTS: dict[str, tuple[str, list[Alert]]] = {
    "tatara-reconciler": ("tatara-reconciler", [*process_alerts(), *runtime_alerts("Process reconciler")]),
    "tatara-pool-reconciler": ("tatara-pool-reconciler", [*pool_alerts(), *runtime_alerts("Pool reconciler")]),
}


def rules(chart: str) -> dict[str, Any]:
    """``spec`` of the chart's PrometheusRule (one group), with :data:`SELECTOR` unreplaced."""
    group, alerts = CHARTS[chart]
    return {"groups": [{"name": group, "rules": [a.rule() for a in alerts]}]}


def path(chart: str) -> Path:
    return ROOT / "charts" / chart / "alerts" / "rules.yaml"


_HEADER = ("# Generated by `python -m tools.alerts`; do not edit. templates/prometheusrule.yaml replaces\n"
           f"# {SELECTOR} with this release's job and namespace matchers.\n")


def render(chart: str) -> str:
    return _HEADER + yaml.safe_dump(rules(chart), sort_keys=False, width=110, allow_unicode=True)


def rule_files() -> dict[Path, str]:
    return {path(chart): render(chart) for chart in CHARTS}


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.alerts", __doc__, rule_files, argv)


if __name__ == "__main__":
    sys.exit(main())
