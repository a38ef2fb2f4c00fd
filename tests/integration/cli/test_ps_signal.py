"""``tatara ps`` and ``tatara signal`` against the session's real API server (no reconciler: statuses are
written directly, as the reconciler would)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import msgspec
import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from shared.kube.patch import patch_status
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio


def process(name: str, parent: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": name},
        "spec": {
            "identity": {"parent": parent} if parent else {},
            "classification": {"pointType": "Gate", "substrate": "Compute", "horizon": {"kind": "Bounded"},
                               "calm": "Monotone", "dataClassification": "Internal"},
            "intent": {"flux": {"gitRepository": "infra", "path": "./"}},
        },
    }


def tatara(plane: LocalControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args, "--kubeconfig", str(plane.kubeconfig)],
                          capture_output=True, text=True, timeout=60, check=False)


async def test_ps_prints_the_pid_forest_of_a_namespace(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str) -> None:
    for name, parent, pid, phase in [("root", None, "fam.1", "Running"), ("kid", "fam.1", "fam.1.2", "Attested"),
                                     ("loner", None, None, None)]:
        await kc.create(PROCESSES, process(name, parent), namespace)
        if pid is not None:
            await patch_status(kc, PROCESSES, namespace, name,
                               {"pid": pid, "phase": phase, **({"parent": parent} if parent else {})})
    result = tatara(control_plane, "ps", "-n", namespace)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[:3] for line in lines[1:]] == [
        [namespace, "fam.1", "Running"], [namespace, "fam.1.2", "Attested"], [namespace, "-", "Pending"]]
    assert lines[1].endswith("root")
    assert lines[2].endswith(" \\_ kid")
    assert lines[3].endswith("loner")


async def test_signal_writes_the_canonical_annotation_and_rejects_unknown_signals_without_writing(
        control_plane: LocalControlPlane, kc: KubeClient, namespace: str) -> None:
    await kc.create(PROCESSES, process("target"), namespace)

    bad = tatara(control_plane, "signal", "target", "SIGINT", "-n", namespace)
    assert bad.returncode == 2
    assert "unknown signal 'SIGINT'" in bad.stderr
    obj = msgspec.json.decode(await kc.get(PROCESSES, "target", namespace))
    assert "tatara.pleme.io/signal" not in (obj["metadata"].get("annotations") or {})

    good = tatara(control_plane, "signal", "target", "hup", "-n", namespace)
    assert good.returncode == 0, good.stderr
    obj = msgspec.json.decode(await kc.get(PROCESSES, "target", namespace))
    assert obj["metadata"]["annotations"]["tatara.pleme.io/signal"] == "SIGHUP"

    missing = tatara(control_plane, "signal", "nope", "TERM", "-n", namespace)
    assert missing.returncode == 1
    assert f"Process {namespace}/nope not found" in missing.stderr
