"""The controller runtime in real processes: leader hand-over on SIGKILL, graceful SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.kube import wait_for
from tests.support.toy_operator import BY, SEEN
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


class Operator:
    """One toy operator process whose JSON log lines are read back from a file."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, identity: str) -> None:
        self.proc, self.log_path, self.identity = proc, log_path, identity

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log_path.read_text().splitlines():
            try:
                out.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
        return out

    def first(self, msg_prefix: str) -> dict[str, Any] | None:
        return next((line for line in self.lines() if line["msg"].startswith(msg_prefix)), None)


@contextmanager
def operators(plane: LocalControlPlane, namespace: str, tmp_path: Path, *extra: list[str],
              identities: tuple[str, ...]) -> Iterator[list[Operator]]:
    running: list[Operator] = []
    try:
        for identity, args in zip(identities, extra, strict=True):
            log_path = tmp_path / f"{identity}.log"
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.toy_operator", "--kubeconfig", str(plane.kubeconfig),
                 "--namespace", namespace, "--identity", identity, *args],
                stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"),  # noqa: SIM115 - closed with the process
                cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            running.append(Operator(proc, log_path, identity))
        yield running
    finally:
        for op in running:
            if op.proc.poll() is None:
                op.proc.kill()
            op.proc.wait()


def ts(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["ts"].replace("Z", "+00:00")).timestamp()


async def annotations_of(kube: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    cm = await client.CoreV1Api(kube).read_namespaced_config_map(name, namespace)
    return cm.metadata.annotations or {}


async def test_only_the_leader_reconciles_and_a_killed_leader_is_replaced_once_its_lease_expires(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube)
    timing = ["--elect", "toy-leader", "--lease", str(LEASE), "--renew", str(RENEW), "--retry", str(RETRY)]
    with operators(control_plane, namespace, tmp_path, timing, timing, identities=("alpha", "beta")) as (a, b):
        await wait_for(lambda: _async(a.first("became leader") or b.first("became leader")), timeout=60,
                       what="one instance to lead")
        leader, standby = (a, b) if a.first("became leader") else (b, a)
        await core.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}, "data": {"value": "1"}})

        async def annotated_by(name: str, identity: str) -> bool:
            return (await annotations_of(kube, namespace, name)).get(BY) == identity

        await wait_for(lambda: annotated_by("one", leader.identity), timeout=30, what="the leader to reconcile")
        assert standby.first("reconcile start") is None
        assert standby.first("became leader") is None

        leader.proc.send_signal(signal.SIGKILL)
        leader.proc.wait()
        await wait_for(lambda: _async(standby.first("became leader")), timeout=30, what="the standby to take over")
        took_over = standby.first("became leader")
        assert took_over is not None
        # A SIGKILLed leader cannot release: the standby acquired the expired Lease, one hand-over in all.
        lease = (await client.CoordinationV1Api(kube).read_namespaced_lease("toy-leader", namespace)).spec
        assert (lease.holder_identity, lease.lease_transitions) == (standby.identity, 1)

        await core.create_namespaced_config_map(namespace, {"metadata": {"name": "two"}, "data": {"value": "2"}})
        await wait_for(lambda: annotated_by("two", standby.identity), timeout=30, what="the new leader to reconcile")
        first_reconcile = standby.first("reconcile start")
        assert first_reconcile is not None
        assert ts(first_reconcile) >= ts(took_over)  # the standby never reconciled before it led


async def test_sigterm_finishes_the_in_flight_reconcile_and_exits_zero(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube)
    gate = tmp_path / "let-it-end"
    os.mkfifo(gate)
    args = ["--hold-until", str(gate), "--grace", "60", "--workers", "1"]
    with operators(control_plane, namespace, tmp_path, args, identities=("solo",)) as (op,):
        await core.create_namespaced_config_map(namespace, {"metadata": {"name": "slow"}, "data": {"value": "s"}})
        await wait_for(lambda: _async(op.first("reconcile start")), timeout=60, what="a reconcile to start")
        op.proc.send_signal(signal.SIGTERM)
        # the reconcile cannot end before the gate opens: the drain has begun with it in flight
        await wait_for(lambda: _async(op.first("shutting down")), timeout=30, what="the SIGTERM to start the drain")
        assert op.proc.poll() is None, "the process waits for its in-flight reconcile"
        assert op.first("reconcile end") is None
        with gate.open("wb"):  # the reconcile's read of the pipe ends when this end closes
            pass
        assert op.proc.wait(timeout=30) == 0
        assert op.first("reconcile end") is not None
        assert (await annotations_of(kube, namespace, "slow")).get(SEEN) == "s"


async def _async(value: Any) -> Any:
    return value
