"""The charts ``tatara up`` serves real Flux on the local node (tools/up_flux.py): rendered by the pinned helm
the way helm-controller renders them (a chart version with the ``+<digest>`` build metadata it appends to an
OCI chart), they deploy the ``echo`` image with the example's ``replicaCount`` and ``service.port``, labels the
API server accepts, and a pod that Pod Security ``restricted`` admits; without a node, ConfigMaps only."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.controlplane.images import ECHO_IMAGE
from tools.flux_stack import chart_files
from tools.up_flux import chart_templates

pytestmark = pytest.mark.helm

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
"""A valid label value (k8s.io/apimachinery validation: at most 63 characters of this shape)."""


def render(helm: Path, tmp_path: Path, workload_image: str | None, *values: str) -> dict[str, dict[str, Any]]:
    root = tmp_path / "echo-server"
    for rel, text in chart_files("echo-server", "0.5.5+2ba9ed9cdc7d", chart_templates(workload_image)).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = subprocess.run([str(helm), "template", "sweep-1", str(root), "--namespace", "tatara-examples",
                          *(a for v in values for a in ("--set", v))],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {d["kind"]: d for d in yaml.safe_load_all(out) if d}


def test_on_the_node_the_chart_deploys_the_echo_image_as_the_example_asks(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, ECHO_IMAGE, "replicaCount=3", "service.port=9090")
    assert sorted(docs) == ["ConfigMap", "Deployment"]
    deployment = docs["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    labels = {**deployment["metadata"]["labels"], **deployment["spec"]["template"]["metadata"]["labels"]}
    assert all(len(v) <= 63 and LABEL_VALUE.fullmatch(v) for v in labels.values()), labels
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == ECHO_IMAGE
    assert container["ports"] == [{"name": "http", "containerPort": 9090}]
    assert {"name": "PORT", "value": "9090"} in container["env"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # what Pod Security `restricted` requires of a pod
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_defaults_are_one_replica_on_8080(helm: Path, tmp_path: Path) -> None:
    deployment = render(helm, tmp_path, ECHO_IMAGE)["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8080}]


def test_without_a_node_the_chart_is_configmaps_only(helm: Path, tmp_path: Path) -> None:
    assert sorted(render(helm, tmp_path, None, "replicaCount=3")) == ["ConfigMap"]
