"""Fixtures of the export worker's tests: a real NATS server with JetStream, a real HTTP receiver, and a
helper that runs the real ``tatara-export-worker`` binary as a subprocess and reads back its receipt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import yaml
from blake3 import blake3

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.errors import NotFound
from tools.http_receiver import HttpReceiver
from tools.nats_server import NatsServer

ROOT = Path(__file__).resolve().parents[3]
PROCESS = {
    "apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": "pr-1"},
    "spec": {"classification": {"pointType": "Gate", "substrate": "Compute", "horizon": {"kind": "Bounded"},
                                "calm": "Monotone", "dataClassification": "Internal"},
             "intent": {"flux": {"gitRepository": "infra", "path": "./apps/pr-1"}},
             "lifetime": {"ephemeral": {"ttl": "1h"}}},
}


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(store_dir=tmp_path_factory.mktemp("jetstream")) as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[HttpReceiver]:
    async with HttpReceiver() as server:
        yield server


def hexdigest(data: str | bytes) -> str:
    return str(blake3(data.encode() if isinstance(data, str) else data).hexdigest())


def canonical(value: Any) -> str:
    """Sorted-key compact JSON (the reference's canonical JSON for strings, bools, integers)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Run:
    """One run of the binary: its exit status and output, and the receipt ConfigMap it left."""

    returncode: int
    stdout: str
    stderr: str
    configmap: dict[str, Any]

    @property
    def receipt(self) -> dict[str, Any]:
        """The receipt YAML, every scalar read as text except ``evidence`` (read as YAML 1.2-like data)."""
        text = self.configmap["data"]["receipt.yaml"]
        strings: dict[str, Any] = yaml.load(text, Loader=yaml.BaseLoader)
        strings["evidence"] = yaml.safe_load(text)["evidence"]
        return strings

    def verify(self, spec: dict[str, Any], outcome: Any, shipped: bytes, previous: str = "") -> dict[str, Any]:
        """Check every pillar of the receipt against values computed here; return the evidence."""
        receipt = self.receipt
        assert receipt["version"] == "tatara-receipt/v1"
        assert receipt["kind"] == "tatara.export"
        assert receipt["intent_hash"] == hexdigest(canonical(spec))
        assert receipt["artifact_hash"] == hexdigest(shipped)
        assert receipt["control_hash"] == hexdigest(canonical(outcome))
        root = hexdigest(f"tatara-process/v1alpha1\n{receipt['artifact_hash']}\n{receipt['control_hash']}\n"
                         f"{receipt['intent_hash']}\n{previous}")
        assert receipt["composed_root"] == root
        evidence: dict[str, Any] = receipt["evidence"]
        # what the sink took: the event when shipped, nothing otherwise (docs/divergences.md#export-shipped-bytes)
        assert evidence["shipped_bytes_len"] == (len(shipped) if outcome == "shipped" else 0)
        return evidence


def worker_command(kubeconfig: Path, spec: dict[str, Any], namespace: str, *extra: str,
                   configmap: str = "pr-1-export-0-receipt", name: str = "pr-1") -> tuple[list[str], dict[str, str]]:
    """Arguments and environment of ``tatara-export-worker`` as the export Job runs it (``$KUBECONFIG`` pointing
    at ``kubeconfig``)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"}
    env.pop("TATARA_RECEIPT_KEY", None)
    args = [sys.executable, "-m", "export_worker.main", "--spec", json.dumps(spec), "--process-namespace", namespace,
            "--process-name", name, "--receipt-configmap", configmap, *extra]
    return args, env


async def receipt_configmap(kc: KubeClient, namespace: str, configmap: str) -> dict[str, Any]:
    """The receipt ConfigMap, or ``{}`` when there is none."""
    try:
        cm: dict[str, Any] = msgspec.json.decode(await kc.get(CONFIG_MAPS, configmap, namespace))
    except NotFound:
        return {}
    return cm


async def run_worker(kubeconfig: Path, kc: KubeClient, spec: dict[str, Any], namespace: str, *extra: str,
                     configmap: str = "pr-1-export-0-receipt", name: str = "pr-1") -> Run:
    """Run the worker to its end (:func:`worker_command`) and read back its receipt ConfigMap."""
    args, env = worker_command(kubeconfig, spec, namespace, *extra, configmap=configmap, name=name)
    with anyio.fail_after(120):
        proc = await anyio.run_process(args, cwd=ROOT, env=env, check=False, stdin=subprocess.DEVNULL)
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode(),
               await receipt_configmap(kc, namespace, configmap))
