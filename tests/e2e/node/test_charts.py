"""Both charts, installed by ``helm install --wait`` from the image built out of the ``Containerfile``, run as
pods on the real node under Pod Security ``restricted``: Ready through their real probes, as UID 65532 on a
read-only root with no capability and the runtime's default seccomp filter, talking to the API server through
in-cluster configuration (the Lease is held by one of the pods)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.node.conftest import NodeEnv
from tools.controlplane.nodenet import NODE_NAME, SERVICE_VIP
from tools.node_stack import CHARTS, RELEASE_NAMESPACE

pytestmark = pytest.mark.helm


def pods_of(env: NodeEnv, chart: str) -> list[dict[str, Any]]:
    out = env.kubectl("get", "pods", "-n", RELEASE_NAMESPACE, "-l", f"app.kubernetes.io/name={chart}", "-o", "json")
    pods: list[dict[str, Any]] = json.loads(out)["items"]
    return pods


def exec_in(env: NodeEnv, pod: str, *command: str, check: bool = True) -> str:
    return env.kubectl("exec", "-n", RELEASE_NAMESPACE, pod, "--", *command, check=check)


@pytest.mark.parametrize("chart", CHARTS)
def test_the_chart_runs_two_ready_pods_on_the_node(node_env: NodeEnv, chart: str) -> None:
    deployment = json.loads(node_env.kubectl("get", "deployment", "-n", RELEASE_NAMESPACE, chart, "-o", "json"))
    assert deployment["status"].get("readyReplicas") == 2
    pods = [p for p in pods_of(node_env, chart) if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE_NAME
        assert pod["status"]["phase"] == "Running"
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", pod["status"]
        (container,) = pod["spec"]["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["image"] == node_env.stack.image
        assert container["imagePullPolicy"] == "Never"


@pytest.mark.parametrize("chart", CHARTS)
def test_the_pods_run_as_the_restricted_profile_requires(node_env: NodeEnv, chart: str) -> None:
    pod = pods_of(node_env, chart)[0]["metadata"]["name"]
    # PID 1 of the container is the controller itself: its credentials and confinement, as the kernel sees them
    status = dict(line.split(":", 1) for line in exec_in(node_env, pod, "cat", "/proc/1/status").splitlines()
                  if ":" in line)
    assert status["Uid"].split() == ["65532"] * 4
    assert status["Gid"].split() == ["65532"] * 4
    assert int(status["CapEff"], 16) == 0
    assert int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2", "the RuntimeDefault seccomp filter is not applied"
    writable = exec_in(node_env, pod, "python", "-c", "open('/tmp/written', 'w'); print('ok')")
    assert writable.strip() == "ok"
    env = dict(line.split("=", 1) for line in exec_in(node_env, pod, "printenv").splitlines() if "=" in line)
    assert env["KUBERNETES_SERVICE_HOST"] == SERVICE_VIP


def test_the_root_file_system_refuses_writes(node_env: NodeEnv) -> None:
    pod = pods_of(node_env, CHARTS[0])[0]["metadata"]["name"]
    code = exec_in(node_env, pod, "python", "-c",
                   "import errno\ntry:\n open('/written', 'w')\nexcept OSError as e:\n print(errno.errorcode[e.errno])")
    assert code.strip() == "EROFS"


@pytest.mark.parametrize("chart", CHARTS)
def test_one_pod_of_each_chart_holds_its_lease(node_env: NodeEnv, chart: str) -> None:
    lease = json.loads(node_env.kubectl("get", "lease", "-n", RELEASE_NAMESPACE, chart, "-o", "json"))
    holder = lease["spec"]["holderIdentity"]
    names = {p["metadata"]["name"] for p in pods_of(node_env, chart)}
    assert holder.split("_", 1)[0] in names, (holder, names)


def test_the_release_namespace_enforces_pod_security_restricted(node_env: NodeEnv) -> None:
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged", "namespace": RELEASE_NAMESPACE},
                  "spec": {"containers": [{"name": "c", "image": node_env.stack.image, "imagePullPolicy": "Never",
                                           "securityContext": {"privileged": True}}]}}
    proc = node_env.kubectl_run("apply", "-f", "-", stdin=json.dumps(privileged))
    assert proc.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in proc.stderr, proc.stderr
    listed = node_env.kubectl("get", "pods", "-n", RELEASE_NAMESPACE, "-o", "name")
    assert "pod/privileged" not in listed.split()
