"""``make run`` as a user gets it: ``tatara up --exit-when-settled`` (the defaults: the local node and real Flux)
builds the image, installs both charts, and every example settles as it declares with the controllers in pods,
the export Jobs run as pods by the real Job controller (shipping to NATS and HTTP from the node), the examples'
charts deploy real Deployments; then nothing is left: no process, mount, cgroup or folder
(docs/architecture.md#tatara-up-on-the-local-node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.flux.test_up_real_flux import processes_mentioning
from tests.e2e.test_up import EXPECTED_PHASES, ROOT
from tools.controlplane import jaeger as jaeger_build
from tools.controlplane.cluster import free_port
from tools.controlplane.flux import ensure_all_built
from tools.controlplane.nodenet import NODE_NAME

pytestmark = [pytest.mark.flux, pytest.mark.helm]


def processes_in(namespaces: set[str]) -> list[str]:
    """The PIDs of the running processes in any of ``namespaces`` (``pid:[…]``, ``mnt:[…]``, ``net:[…]``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        for kind in ("pid", "mnt", "net"):
            try:
                if os.readlink(proc / "ns" / kind) in namespaces:
                    found.append(proc.name)
                    break
            except OSError:
                continue
    return found


def test_up_runs_the_product_on_the_node_with_real_flux_and_leaves_nothing() -> None:
    ensure_all_built()  # built here on a clean machine, so the subprocess's timeout covers only the run
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    jaeger_build.built().ensure_built()
    nats_port, receiver_port, jaeger_port = free_port(), free_port(), free_port()
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "up", "--exit-when-settled", "--timeout", "300",
         "--nats-port", str(nats_port), "--receiver-port", str(receiver_port), "--jaeger-port", str(jaeger_port)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "STAND-IN" not in result.stdout, "a stand-in ran in the default mode"
    assert "real Flux running" in result.stdout
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")]
    summary = json.loads(line.removeprefix("SUMMARY "))
    assert summary["settled"] is True
    assert summary["mode"] == "node"
    assert {(e["kind"], e["name"]): e["phase"] for e in summary["examples"]} == EXPECTED_PHASES

    # the controllers: both charts, two replicas each, Running on the node
    pods = summary["node"]["pods"]
    controllers = [p for p in pods if p["namespace"] == "tatara-system"]
    assert sorted(p["name"].rsplit("-", 2)[0] for p in controllers) == [
        "tatara-pool-reconciler", "tatara-pool-reconciler", "tatara-reconciler", "tatara-reconciler"]
    assert all(p["status"] == "Running" and p["ready"] == "1/1" and p["node"] == NODE_NAME for p in controllers)
    # examples/ephemeral-exports.yaml: three export Jobs, each a pod the Job controller ran on the node,
    # each receipt Shipped; the HTTP and NATS exports reached the sinks on the host from that pod
    jobs = {j["name"]: (j["state"], j["receipt"]) for j in summary["exports"]["jobs"]}
    assert jobs == {f"release-train-export-{i}": ("Complete", "Shipped") for i in range(3)}
    job_pods = [p for p in pods if p["namespace"] == "tatara-examples"]
    assert sorted(p["name"].rsplit("-", 1)[0] for p in job_pods) == sorted(jobs)
    assert all(p["status"] == "Succeeded" and p["node"] == NODE_NAME for p in job_pods), job_pods
    assert summary["exports"]["http_requests"] == 1
    assert summary["exports"]["stream_messages"] == {"TATARA_RECEIPTS": 1}
    # Jaeger on the host received spans from the controllers' pods and the export Jobs' pods (over the node IP)
    assert summary["traces"]["query"] == f"http://127.0.0.1:{jaeger_port}"
    assert {"tatara-reconciler", "tatara-pool-reconciler", "tatara-export-worker"} <= set(
        summary["traces"]["services"]), summary["traces"]

    # real Flux: kustomize-controller applied the git paths of the Processes still alive (tools/up_flux.py
    # names them <process>-<last path segment>), helm-controller installed the pool members' chart, whose
    # Deployment of the echo image is Ready on the node
    applied = set(summary["flux"]["applied"])
    assert {"tatara-examples/podinfo-podinfo", "tatara-examples/family-family", "tatara-examples/family-web-web",
            "tatara-examples/family-worker-worker"} <= applied
    assert any(name.endswith("-release") for name in applied), applied
    workloads = summary["node"]["workloads"]
    assert workloads, "helm-controller installed no Deployment"
    assert all(w.split()[1].split("/")[0] == w.split()[1].split("/")[1] != "0" for w in workloads), workloads

    # nothing is left: the plane's and the node's folders, their processes, the node's cgroups
    assert not Path(summary["kubeconfig"]).exists()
    assert not Path(summary["flux"]["dir"]).exists()
    assert not Path(summary["node"]["dir"]).exists()
    assert not processes_mentioning(summary["node"]["dir"]), "a node process outlived tatara up"
    assert not processes_mentioning(summary["flux"]["dir"]), "a Flux process outlived tatara up"
    cgroup = summary["node"]["cgroup"]
    assert cgroup.startswith("tatara-")
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup}")), "the node's cgroups were left behind"
    # no process is left in the sandbox's namespaces (containers and their shims included), so its mounts and
    # network are gone with them
    namespaces = summary["node"]["namespaces"]
    assert sorted(namespaces) == ["mnt", "net", "pid"]
    assert not processes_in(set(namespaces.values())), "processes outlived the node's sandbox"
