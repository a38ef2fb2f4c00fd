"""``tatara up`` on the node, its pure parts (tools/up_node.py): a pod shown as ``kubectl get pods`` shows it,
the sinks' URLs as pods see them, the hints, and the chart installs' failure reaching the caller as itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tools.controlplane.nodenet import NODE_IP
from tools.node_stack import ChartInstallError
from tools.up_node import (
    PodRow,
    PodsView,
    hints,
    install_controllers,
    node_otlp_endpoint,
    node_sink_urls,
    tracing_values,
)


def pod(name: str, *, phase: str = "Running", statuses: list[dict[str, Any]] | None = None,
        deleting: bool = False, node: str | None = "tatara-node", containers: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "tatara-system"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}"} for i in range(containers)]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "containerStatuses": statuses or []}}


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts", "node"),
    [
        (pod("a", statuses=[{"ready": True, "restartCount": 2, "state": {"running": {}}}]), "1/1", "Running", 2,
         "tatara-node"),
        (pod("b", phase="Pending", statuses=[{"ready": False, "restartCount": 5,
                                               "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
         "0/1", "CrashLoopBackOff", 5, "tatara-node"),
        (pod("c", deleting=True, statuses=[{"ready": True, "restartCount": 0, "state": {"running": {}}}]),
         "1/1", "Terminating", 0, "tatara-node"),
        (pod("d", phase="Pending", node=None, containers=2), "0/2", "Pending", 0, "-"),
        (pod("e", phase="Succeeded", statuses=[{"ready": False, "restartCount": 0,
                                                 "state": {"terminated": {"exitCode": 0}}}]),
         "0/1", "Succeeded", 0, "tatara-node"),
    ],
    ids=["running", "crash looping", "being deleted", "not scheduled yet", "a Job's finished pod"],
)
def test_a_pod_row_reads_as_kubectl_get_pods(obj: dict[str, Any], ready: str, status: str, restarts: int,
                                             node: str) -> None:
    row = PodRow.of(obj)
    assert (row.ready, row.status, row.restarts, row.node) == (ready, status, restarts, node)


def test_the_view_lists_the_controllers_then_the_export_pods() -> None:
    view = PodsView(["tatara-examples"])
    view.controllers = [PodRow.of(pod("tatara-reconciler-1"))]
    view.jobs = {"tatara-examples/x-export-0-abc": PodRow("tatara-examples", "x-export-0-abc", "0/1", "Succeeded", 0,
                                                           "tatara-node")}
    lines = view.render().splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "READY", "STATUS", "RESTARTS", "NODE"]
    assert [line.split()[1] for line in lines[1:]] == ["tatara-reconciler-1", "x-export-0-abc"]
    assert [entry["name"] for entry in view.summary()] == ["tatara-reconciler-1", "x-export-0-abc"]


def test_an_empty_view_renders_nothing() -> None:
    assert PodsView([]).render() == ""


def test_pods_reach_the_sinks_at_the_node_ip_on_the_hosts_ports() -> None:
    assert node_sink_urls(14222, 18090) == (f"nats://{NODE_IP}:14222", f"http://{NODE_IP}:18090")


@pytest.mark.parametrize("chart", ["tatara-reconciler", "tatara-pool-reconciler"])
def test_the_tracing_values_point_pods_at_jaeger_on_the_node_ip_and_set_only_each_charts_own_keys(
        chart: str) -> None:
    values = tracing_values(node_otlp_endpoint(4318))
    assert values["tracing"]["otlpEndpoint"] == f"http://{NODE_IP}:4318"
    assert float(values["tracing"]["samplerRatio"]) == 1.0
    defaults = yaml.safe_load((Path(__file__).resolve().parents[3] / "charts" / chart / "values.yaml").read_text())
    assert set(values["tracing"]) <= set(defaults["tracing"])
    assert all(type(v) is type(defaults["tracing"][k]) for k, v in values["tracing"].items())


def test_the_hints_name_the_built_kubectl_and_each_export_namespace() -> None:
    lines = hints(["a", "b"], "/cache/bin/kubectl")
    assert "/cache/bin/kubectl" in lines[0]
    assert sum("-l tatara.pleme.io/role=export" in line for line in lines) == 2


class FailingStack:
    """A NodeStack whose pool chart does not roll out."""

    image = "localhost/tatara/tatara:dev-1"

    def __init__(self) -> None:
        self.installed: list[str] = []

    def install(self, chart: str, values: dict[str, Any]) -> None:
        self.installed.append(chart)
        if chart == "tatara-pool-reconciler":
            raise ChartInstallError("helm upgrade --install tatara-pool-reconciler failed: timed out")


def test_a_chart_that_does_not_install_raises_its_own_error_after_both_were_tried() -> None:
    stack = FailingStack()
    with pytest.raises(ChartInstallError, match="tatara-pool-reconciler failed"):
        anyio.run(install_controllers, stack, ["tatara-examples"])  # type: ignore[arg-type]
    assert sorted(stack.installed) == ["tatara-pool-reconciler", "tatara-reconciler"]
