"""The charts' PrometheusRules: rendered by helm, accepted by ``promtool check rules``, and each alert unit-tested
by ``promtool test rules`` (fires on the condition after its ``for``, with the summary it promises; stays quiet
when healthy or when the series belong to another scrape job).

promtool comes from Debian's ``prometheus`` package, which .ci/run installs; without it these tests skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")

NAMESPACE = "tatara-system"
JOB = {"tatara-reconciler": "rel-tatara-reconciler-metrics",
       "tatara-pool-reconciler": "rel-tatara-pool-reconciler-metrics"}  # the Service a ServiceMonitor scrapes


NO_LEADER = ("With leader election on, no replica has held one of the Leases (a shard's, or the ProcessTable "
             "writer's) for 5 minutes: that shard, or the table's status, is not reconciled.")

def _rules(helm: Path, chart: str, tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The chart's rendered PrometheusRule spec as a rule file, and its rules by alert name."""
    out = subprocess.run([str(helm), "template", "rel", str(ROOT / "charts" / chart), "-n", NAMESPACE,
                          "--set", "prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    doc = yaml.safe_load(out)
    assert doc["kind"] == "PrometheusRule"
    path = tmp_path / f"{chart}.rules.yaml"
    path.write_text(yaml.safe_dump(doc["spec"]))
    rules = {r["alert"]: r for g in doc["spec"]["groups"] for r in g["rules"]}
    return path, rules


def _series(chart: str, metric: str, labels: str, values: str, *, job: str | None = None) -> dict[str, str]:
    scope = f'job="{job or JOB[chart]}",namespace="{NAMESPACE}"'
    return {"series": f"{metric}{{{scope}{',' + labels if labels else ''}}}", "values": values}


def _expect(rules: dict[str, dict[str, Any]], alert: str, labels: dict[str, str], summary: str,
            description: str) -> dict[str, Any]:
    runbook = rules[alert]["annotations"]["runbook"]  # static advice, but it may name a label of the alert
    for name, value in labels.items():
        runbook = runbook.replace(f"{{{{ $labels.{name} }}}}", value)
    return {"exp_labels": {"severity": rules[alert]["labels"]["severity"], **labels},
            "exp_annotations": {"summary": summary, "description": description, "runbook": runbook}}


def _promtool_test(rule_file: Path, tests: list[dict[str, Any]], tmp_path: Path) -> None:
    spec = tmp_path / f"{rule_file.stem}.test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rule_file.name], "evaluation_interval": "1m", "tests": tests}))
    proc = subprocess.run([str(PROMTOOL), "test", "rules", spec.name], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("chart", list(JOB))
def test_promtool_accepts_the_rendered_rules(helm: Path, chart: str, tmp_path: Path) -> None:
    path, rules = _rules(helm, chart, tmp_path)
    proc = subprocess.run([str(PROMTOOL), "check", "rules", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(set(r["annotations"]) == {"summary", "description", "runbook"} for r in rules.values())
    assert all(f'job="{JOB[chart]}", namespace="{NAMESPACE}"' in r["expr"] for r in rules.values())


def _runtime_tests(chart: str, rules: dict[str, dict[str, Any]], binary: str, controller: str) -> list[dict[str, Any]]:
    s = chart
    return [
        {"interval": "1m", "input_series": [
            _series(s, "controller_runtime_reconcile_errors_total", f'controller="{controller}"', "0+60x40"),
            _series(s, "controller_runtime_reconcile_errors_total", 'controller="other"', "0+60x40", job="other"),
        ], "alert_rule_test": [
            {"eval_time": "10m", "alertname": "TataraReconcileErrors", "exp_alerts": []},
            {"eval_time": "25m", "alertname": "TataraReconcileErrors", "exp_alerts": [_expect(
                rules, "TataraReconcileErrors", {"controller": controller},
                f"{binary}: controller {controller} keeps failing to reconcile",
                f"Reconciliations of {controller} have returned errors for 15 minutes (1/s).")]},
        ]},
        {"interval": "1m", "input_series": [
            _series(s, "workqueue_depth", f'name="{controller}"', "150x30"),
            _series(s, "workqueue_depth", 'name="calm"', "3x30"),
        ], "alert_rule_test": [
            {"eval_time": "20m", "alertname": "TataraWorkQueueDepth", "exp_alerts": [_expect(
                rules, "TataraWorkQueueDepth", {"name": controller},
                f"{binary}: work queue {controller} is not draining",
                f"150 keys have waited in the {controller} queue for 15 minutes.")]},
        ]},
        {"interval": "1m", "input_series": [
            # every key waits between 30 s and 130 s: p99 = 30 + 0.99 × 100 = 129 s
            _series(s, "workqueue_queue_duration_seconds_bucket", f'name="{controller}",le="30"', "0x40"),
            _series(s, "workqueue_queue_duration_seconds_bucket", f'name="{controller}",le="130"', "0+10x40"),
            _series(s, "workqueue_queue_duration_seconds_bucket", f'name="{controller}",le="+Inf"', "0+10x40"),
        ], "alert_rule_test": [
            {"eval_time": "25m", "alertname": "TataraWorkQueueLatency", "exp_alerts": [_expect(
                rules, "TataraWorkQueueLatency", {"name": controller},
                f"{binary}: keys wait over a minute in work queue {controller}",
                f"The 99th percentile of time in the {controller} queue is 2m 9s.")]},
        ]},
        {"interval": "1m", "input_series": [
            _series(s, "leader_election_master_status", 'name="lease",instance="a"', "0x20"),
            _series(s, "leader_election_master_status", 'name="lease",instance="b"', "0x20"),
        ], "alert_rule_test": [
            {"eval_time": "10m", "alertname": "TataraNoLeader", "exp_alerts": [_expect(
                rules, "TataraNoLeader", {}, f"{binary}: no replica holds a leader Lease", NO_LEADER)]},
        ]},
        {"interval": "1m", "input_series": [  # one leader of two replicas: healthy
            _series(s, "leader_election_master_status", 'name="lease",instance="a"', "1x20"),
            _series(s, "leader_election_master_status", 'name="lease",instance="b"', "0x20"),
        ], "alert_rule_test": [{"eval_time": "10m", "alertname": "TataraNoLeader", "exp_alerts": []}]},
        {"interval": "1m", "input_series": [  # shards (docs/architecture.md#sharding): one Lease led, one not
            _series(s, "leader_election_master_status", 'name="lease-shard1",instance="a"', "1x20"),
            _series(s, "leader_election_master_status", 'name="lease-shard2",instance="b"', "0x20"),
        ], "alert_rule_test": [
            {"eval_time": "10m", "alertname": "TataraNoLeader", "exp_alerts": [_expect(
                rules, "TataraNoLeader", {}, f"{binary}: no replica holds a leader Lease", NO_LEADER)]},
        ]},
    ]


def test_the_process_reconciler_alerts_fire_as_documented(helm: Path, tmp_path: Path) -> None:
    chart = "tatara-reconciler"
    path, rules = _rules(helm, chart, tmp_path)
    s = chart
    tests: list[dict[str, Any]] = [
        {"interval": "1m", "input_series": [
            _series(s, "tatara_processes", 'phase="Failed"', "2x20"),
            _series(s, "tatara_processes", 'phase="Failed"', "9x20", job="other"),
        ], "alert_rule_test": [
            {"eval_time": "5m", "alertname": "TataraProcessesFailed", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "TataraProcessesFailed", "exp_alerts": [_expect(
                rules, "TataraProcessesFailed", {}, "2 Processes are Failed",
                "Processes have stayed in Failed for 10 minutes; a Failed Process does not retry by itself.")]},
        ]},
        {"interval": "1m", "input_series": [
            _series(s, "tatara_processes", 'phase="Execing"', "1x60"),
            _series(s, "tatara_process_phase_transitions_total", 'from="Execing",to="Running"', "0x60"),
            # Running moves on (a transition out of it every minute): not stuck
            _series(s, "tatara_processes", 'phase="Running"', "4x60"),
            _series(s, "tatara_process_phase_transitions_total", 'from="Running",to="Attested"', "0+1x60"),
            _series(s, "tatara_processes", 'phase="Attested"', "7x60"),  # settled
        ], "alert_rule_test": [
            {"eval_time": "20m", "alertname": "TataraProcessesStuckInPhase", "exp_alerts": []},
            {"eval_time": "45m", "alertname": "TataraProcessesStuckInPhase", "exp_alerts": [_expect(
                rules, "TataraProcessesStuckInPhase", {"phase": "Execing"},
                "Processes sit in Execing and none has left it for 30 minutes",
                "1 Processes are in Execing and no phase transition out of it happened in 30 minutes.")]},
        ]},
        *_runtime_tests(chart, rules, "Process reconciler", "process"),
    ]
    _promtool_test(path, tests, tmp_path)


def test_the_pool_reconciler_alerts_fire_as_documented(helm: Path, tmp_path: Path) -> None:
    chart = "tatara-pool-reconciler"
    path, rules = _rules(helm, chart, tmp_path)
    s = chart
    tests: list[dict[str, Any]] = [
        {"interval": "1m", "input_series": [
            _series(s, "tatara_allocations", 'phase="Queued"', "3x60"),
            _series(s, "tatara_allocations", 'phase="Bound"', "5x60"),
        ], "alert_rule_test": [
            {"eval_time": "20m", "alertname": "TataraAllocationsWaiting", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "TataraAllocationsWaiting", "exp_alerts": [_expect(
                rules, "TataraAllocationsWaiting", {},
                "3 EphemeralAllocations have waited for a pool member for 30 minutes",
                "Allocations stay Pending, Queued or NoMatchingPool.")]},
        ]},
        {"interval": "1m", "input_series": [
            # every bind takes between 100 s and 600 s: p99 = 100 + 0.99 × 500 = 595 s
            _series(s, "tatara_allocation_bind_seconds_bucket", 'le="100"', "0x60"),
            _series(s, "tatara_allocation_bind_seconds_bucket", 'le="600"', "0+1x60"),
            _series(s, "tatara_allocation_bind_seconds_bucket", 'le="+Inf"', "0+1x60"),
        ], "alert_rule_test": [
            {"eval_time": "40m", "alertname": "TataraAllocationWaitHigh", "exp_alerts": [_expect(
                rules, "TataraAllocationWaitHigh", {}, "Binding an allocation takes over 5 minutes (p99)",
                "The 99th percentile from an allocation's creation to Bound is 9m 55s.")]},
        ]},
        *_runtime_tests(chart, rules, "Pool reconciler", "pool"),
    ]
    _promtool_test(path, tests, tmp_path)
