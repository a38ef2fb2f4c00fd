"""Write the Grafana dashboards shipped in each controller chart (``charts/<chart>/dashboards/*.json``).

Usage: ``python -m tools.dashboards [--check]`` — ``--check`` writes nothing and exits 1 when a dashboard
file differs from what this module generates.

Each dashboard has a ``datasource`` variable (any Prometheus), a ``job`` variable (the scrape job of this
binary: ``controller_runtime_reconcile_total`` of its own controllers), ``namespace``, ``shard`` and
``instance`` (replicas; all by default; ``shard`` narrows the instances listed) variables, and every query
selects ``job``, ``namespace`` and ``instance``, so two charts in one namespace never mix; its domain rows
(``tatara_*``, docs/behaviour.md#domain-metrics) and the controller-runtime rows (reconciles, work queue,
leader, API requests, process resources) with the usual queries over controller-runtime's metric names
(docs/runtime.md#metrics), filtered to our controllers. Gauges read from the informer cache
(``tatara_processes``, ``tatara_pool_members``, ``tatara_allocations``) are exported by every replica, the
standby ones too, so they are aggregated with ``max`` within a shard and summed over the shards (each counts
its own objects).

Every expression must name only metrics the binaries export: tests/unit/charts/test_dashboards.py parses each
one with ``promql_parser`` and compares with the registries, tests/integration/pool_reconciler/
test_dashboard_queries.py with ``/metrics`` of the running controllers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tools.generated import generator_main

ROOT = Path(__file__).resolve().parents[1]
DS: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'job="$job", namespace="$namespace", instance=~"$instance"'
"""Every query's selector: one binary (``job``: the Service a ServiceMonitor scrapes, one per chart), one
namespace, the chosen replicas."""
JOB = 'job="$job", namespace="$namespace"'
"""The selector of whole-binary panels (the leader count): every replica, whichever are chosen."""
RATE = "$__rate_interval"

# chart -> (dashboard file stem, title, uid, controller-name regex, lease-name hint)
DASHBOARDS: dict[str, tuple[str, str, str, str]] = {
    "tatara-reconciler": ("tatara-reconciler", "tatara / Process reconciler", "tatara-reconciler", "process"),
    "tatara-pool-reconciler": ("tatara-pool-reconciler", "tatara / Pool reconciler", "tatara-pool-reconciler",
                               "pool|allocation"),
}


class _Layout:
    """Places panels on Grafana's 24-column grid, rows of ``height`` units."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0
        self.x = 0
        self.next_id = 1
        self._height = 8

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def add(self, panel: dict[str, Any], width: int = 8, height: int = 8) -> None:
        if self.x + width > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": height, "w": width, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += width
        self._height = height

    def _newline(self) -> None:
        if self.x:
            self.y += self._height
        self.x = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


EXEMPLAR_HISTOGRAMS = ("controller_runtime_reconcile_time_seconds", "workqueue_queue_duration_seconds",
                       "workqueue_work_duration_seconds")
"""The histograms whose buckets carry a traced reconcile's ``trace_id``/``span_id`` as exemplar
(docs/runtime.md#traces): their latency panels ask Grafana for the exemplars (on the p99 target only, so each
exemplar is drawn once)."""


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    target: dict[str, Any] = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}
    if legend.startswith("p99") and any(f"{name}_bucket" in expr for name in EXEMPLAR_HISTOGRAMS):
        # Grafana queries /api/v1/query_exemplars with this expression and draws each exemplar as a point; the
        # Prometheus data source's exemplarTraceIdDestinations (label trace_id) turns it into a link to the trace
        target["exemplar"] = True
    return target


def timeseries(title: str, description: str, unit: str, targets: list[tuple[str, str]], *,
               stack: bool = False) -> dict[str, Any]:
    custom: dict[str, Any] = {"fillOpacity": 30 if stack else 10, "showPoints": "never"}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": {"unit": unit, "min": 0, "custom": custom}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def stat(title: str, description: str, expr: str, *, thresholds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": {"unit": "short", "thresholds": {"mode": "absolute", "steps": thresholds}},
                        "overrides": []},
        "options": {"colorMode": "background", "graphMode": "none", "reduceOptions": {"calcs": ["lastNotNull"]}},
        "targets": [_target(expr, "", "A")],
    }


def _quantiles(metric: str, by: str, legend: str) -> list[tuple[str, str]]:
    group = f"{by}, le" if by else "le"
    return [(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{SEL}}}[{RATE}])))",
             f"p{int(q * 100)} {legend}".strip()) for q in (0.5, 0.99)]


def _rate(metric: str, by: str, extra: str = "") -> str:
    return f"sum by ({by}) (rate({metric}{{{SEL}{extra}}}[{RATE}]))"


def process_panels(lay: _Layout) -> None:
    lay.row("Processes")
    lay.add(timeseries("Processes by phase", "Processes per status.phase, from the informer cache "
                       "(tatara_processes; max over a shard's replicas, summed over shards).", "short",
                       [(f"sum by (phase) (max by (shard, phase) (tatara_processes{{{SEL}}}))", "{{phase}}")],
                       stack=True))
    lay.add(timeseries("Phase transitions", "Phase changes written, per from → to "
                       "(tatara_process_phase_transitions_total).", "ops",
                       [(_rate("tatara_process_phase_transitions_total", 'from, to'), "{{from}} → {{to}}")]))
    lay.add(timeseries("Time in phase (p50 / p99)", "Seconds a Process spent in a phase, observed when it "
                       "left it (tatara_process_phase_seconds).", "s",
                       _quantiles("tatara_process_phase_seconds", "phase", "{{phase}}")))
    lay.add(timeseries("Signals", "Signals taken from the signal annotation, per signal and outcome "
                       "(tatara_signals_total).", "ops",
                       [(_rate("tatara_signals_total", "signal, outcome"), "{{signal}} {{outcome}}")]), width=24,
            height=7)


def pool_panels(lay: _Layout) -> None:
    lay.row("Pools")
    lay.add(timeseries("Members by state", "Pool members per pool and state, from the informer cache "
                       "(tatara_pool_members; max over a shard's replicas, summed over shards).", "short",
                       [(f"sum by (pool, state) (max by (shard, pool, state) (tatara_pool_members{{{SEL}}}))",
                         "{{pool}} {{state}}")],
                       stack=True), width=12)
    lay.add(timeseries("Allocations by phase", "EphemeralAllocations per phase (tatara_allocations; max over a "
                       "shard's replicas, summed over shards).", "short",
                       [(f"sum by (phase) (max by (shard, phase) (tatara_allocations{{{SEL}}}))", "{{phase}}")],
                       stack=True), width=12)
    lay.add(timeseries("Allocation wait (p50 / p99)", "Seconds from an allocation's creation to Bound "
                       "(tatara_allocation_bind_seconds).", "s",
                       _quantiles("tatara_allocation_bind_seconds", "", "")))
    lay.add(timeseries("Binds", "Bind attempts by outcome (tatara_pool_binds_total).", "ops",
                       [(_rate("tatara_pool_binds_total", "outcome"), "{{outcome}}")]))
    lay.add(timeseries("Releases", "Member returns and allocation releases by outcome "
                       "(tatara_pool_releases_total).", "ops",
                       [(_rate("tatara_pool_releases_total", "outcome"), "{{outcome}}")]))


def runtime_panels(lay: _Layout, controllers: str) -> None:
    ctl = f', controller=~"{controllers}"'
    lay.row("Reconciliation")
    lay.add(timeseries("Reconcile rate by result", "controller_runtime_reconcile_total per controller and "
                       "result.", "ops",
                       [(_rate("controller_runtime_reconcile_total", "controller, result", ctl),
                         "{{controller}} {{result}}")]))
    lay.add(timeseries("Reconcile errors", "Reconciliations that returned an error "
                       "(controller_runtime_reconcile_errors_total).", "ops",
                       [(_rate("controller_runtime_reconcile_errors_total", "controller", ctl), "{{controller}}")]))
    lay.add(timeseries("Reconcile latency (p50 / p99)", "controller_runtime_reconcile_time_seconds. With tracing "
                       "on, the points on p99 are exemplars: each names the trace of a reconcile in that bucket "
                       "(a link, once the data source maps trace_id to the tracing back end).", "s",
                       [(e.replace(f"{{{SEL}}}", f"{{{SEL}{ctl}}}"), legend) for e, legend in
                        _quantiles("controller_runtime_reconcile_time_seconds", "controller", "{{controller}}")]))
    lay.add(timeseries("Workers in use", "controller_runtime_active_workers against "
                       "controller_runtime_max_concurrent_reconciles.", "short",
                       [(f"sum by (controller) (controller_runtime_active_workers{{{SEL}{ctl}}})",
                         "active {{controller}}"),
                        (f"max by (controller) (controller_runtime_max_concurrent_reconciles{{{SEL}{ctl}}})",
                         "max {{controller}}")]), width=12)
    lay.add(timeseries("Kubernetes API requests", "rest_client_requests_total by status code and method.", "reqps",
                       [(_rate("rest_client_requests_total", "code, method"), "{{method}} {{code}}")]), width=12)

    wq = f', name=~"{controllers}"'
    lay.row("Work queue")
    lay.add(timeseries("Depth", "Keys ready in the queue (workqueue_depth).", "short",
                       [(f"sum by (name) (workqueue_depth{{{SEL}{wq}}})", "{{name}}")]))
    lay.add(timeseries("Queue latency (p50 / p99)", "Seconds a key waits before a worker takes it "
                       "(workqueue_queue_duration_seconds; with tracing on, p99's points are exemplars leading "
                       "to the reconcile that took the key).", "s",
                       [(e.replace(f"{{{SEL}}}", f"{{{SEL}{wq}}}"), legend) for e, legend in
                        _quantiles("workqueue_queue_duration_seconds", "name", "{{name}}")]))
    lay.add(timeseries("Work duration (p50 / p99)", "Seconds from hand-out to done "
                       "(workqueue_work_duration_seconds; with tracing on, p99's points are exemplars leading "
                       "to the reconcile).", "s",
                       [(e.replace(f"{{{SEL}}}", f"{{{SEL}{wq}}}"), legend) for e, legend in
                        _quantiles("workqueue_work_duration_seconds", "name", "{{name}}")]))
    lay.add(timeseries("Adds and retries", "workqueue_adds_total and workqueue_retries_total.", "ops",
                       [(_rate("workqueue_adds_total", "name", wq), "adds {{name}}"),
                        (_rate("workqueue_retries_total", "name", wq), "retries {{name}}")]), width=12)
    lay.add(timeseries("Unfinished work", "workqueue_unfinished_work_seconds and "
                       "workqueue_longest_running_processor_seconds: growing values mean a stuck worker.", "s",
                       [(f"max by (name) (workqueue_unfinished_work_seconds{{{SEL}{wq}}})", "unfinished {{name}}"),
                        (f"max by (name) (workqueue_longest_running_processor_seconds{{{SEL}{wq}}})",
                         "longest {{name}}")]), width=12)

    lay.row("Dynamic sharding")
    lay.add(timeseries("Ring members", "Alive members of each ring, as its sharder sees them "
                       "(controller_sharding_members; only the sharder exports it). Empty without --sharding=dynamic "
                       "(docs/architecture.md#dynamic-sharding).", "short",
                       [(f"max by (ring) (controller_sharding_members{{{SEL}}})", "{{ring}}")]))
    lay.add(timeseries("Sharder writes", "Label writes of the sharder by resource and reason: new (first "
                       "assignment), orphaned (member gone), rebalance (drain asked), cancelled "
                       "(controller_sharding_assignments_total).", "ops",
                       [(_rate("controller_sharding_assignments_total", "resource, reason"),
                         "{{resource}} {{reason}}")]))
    lay.add(timeseries("Hand-overs", "Objects members handed over after a drain request, per controller "
                       "(controller_sharding_handovers_total).", "ops",
                       [(_rate("controller_sharding_handovers_total", "controller"), "{{controller}}")]))

    lay.row("Leader and process")
    lay.add(stat("Leaders", "Holders of the least-held Lease of this binary (leader_election_master_status summed "
                 "per Lease: one per shard, and the ProcessTable writer's), whichever instances are selected; 1 is "
                 "healthy with one replica or several, 0 means a shard (or the table writer) has no leader.",
                 f"min(sum by (name) (leader_election_master_status{{{JOB}}}))",
                 thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1},
                             {"color": "red", "value": 2}]), width=4)
    lay.add(timeseries("Leader by instance", "leader_election_master_status per replica and Lease: 1 for the "
                       "replica that holds it.", "short",
                       [(f"max by (instance, name) (leader_election_master_status{{{SEL}}})",
                         "{{instance}} {{name}}")]),
            width=8)
    lay.add(timeseries("CPU", "process_cpu_seconds_total per replica (cores).", "cores",
                       [(f"sum by (instance) (rate(process_cpu_seconds_total{{{SEL}}}[{RATE}]))", "{{instance}}")]),
            width=6)
    lay.add(timeseries("Memory", "process_resident_memory_bytes per replica.", "bytes",
                       [(f"max by (instance) (process_resident_memory_bytes{{{SEL}}})", "{{instance}}")]), width=6)


def _query_variable(name: str, label: str, query: str, *, all_value: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "label": label, "type": "query", "datasource": DS,
                           "query": {"query": query, "refId": name}, "definition": query,
                           "current": {}, "hide": 0, "refresh": 2, "sort": 1, "includeAll": all_value,
                           "multi": all_value}
    if all_value:
        out["allValue"] = ".*"
    return out


def _variables(controllers: str) -> list[dict[str, Any]]:
    ctl = f'controller=~"{controllers}"'
    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": ""},
        _query_variable("job", "Job", f"label_values(controller_runtime_reconcile_total{{{ctl}}}, job)",
                        all_value=False),
        _query_variable("namespace", "Namespace",
                        'label_values(controller_runtime_reconcile_total{job="$job"}, namespace)', all_value=False),
        # the charts' ServiceMonitors label each sharded instance's targets `shard` (docs/architecture.md#sharding);
        # "All" (.*) also matches the unsharded instance, which has no such label
        _query_variable("shard", "Shard",
                        'label_values(process_resident_memory_bytes{job="$job", namespace="$namespace"}, shard)',
                        all_value=True),
        # every replica exports process_* (a standby one has no reconcile counters yet)
        _query_variable("instance", "Instance",
                        'label_values(process_resident_memory_bytes{job="$job", namespace="$namespace", '
                        'shard=~"$shard"}, instance)',
                        all_value=True),
    ]


def dashboard(chart: str) -> dict[str, Any]:
    """The dashboard of ``chart`` as a Grafana JSON model."""
    _, title, uid, controllers = DASHBOARDS[chart]
    lay = _Layout()
    if chart == "tatara-reconciler":
        process_panels(lay)
    else:
        pool_panels(lay)
    runtime_panels(lay, controllers)
    return {
        "title": title,
        "uid": uid,
        "tags": ["tatara", "kubernetes", "controller"],
        "timezone": "",
        "editable": False,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "schemaVersion": 39,
        "version": 1,
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": _variables(controllers)},
        "panels": lay.panels,
    }


def path(chart: str) -> Path:
    return ROOT / "charts" / chart / "dashboards" / f"{DASHBOARDS[chart][0]}.json"


def render(chart: str) -> str:
    return json.dumps(dashboard(chart), indent=2, ensure_ascii=False) + "\n"


def dashboard_files() -> dict[Path, str]:
    """``{dashboard path: JSON text}`` of every chart."""
    return {path(chart): render(chart) for chart in DASHBOARDS}


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.dashboards", __doc__, dashboard_files, argv)


if __name__ == "__main__":
    sys.exit(main())
