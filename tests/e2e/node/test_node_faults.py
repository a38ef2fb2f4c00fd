"""The fault tier on the node (``faults`` and ``node`` markers): faults only a node has, injected at seeded
points of a burst of work, with the fault tier's invariants checked from the API afterwards
(tests/faults/harness.py):

- **container kills**: the leader container of each chart SIGKILLed through containerd, as an OOM kill or a
  crash would; the kubelet restarts it in the same pod (a new container, its restart count up) and nothing is
  lost;
- **a containerd restart**: the running containers outlive it (their shims are their parents), the kubelet
  reconnects, and a pod started afterwards becomes Ready.

The seed is the fault tier's (``TATARA_FAULT_SEED`` repeats a run)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
import pytest

from shared.kube.client import KubeClient
from tests.e2e.node.conftest import NodeEnv
from tests.e2e.node.support import PODS, chart_pods, flux_standin, live_leader
from tests.faults.conftest import SEED, SEED_VARIABLE
from tests.faults.harness import burst_documents, check_invariants, create
from tests.support.kube import wait_for
from tools.node_stack import CHARTS, POOL_RECONCILER, RELEASE_NAMESPACE

pytestmark = [pytest.mark.anyio, pytest.mark.faults]

PROCS = [f"p{i}" for i in range(6)]
ALLOCS = [f"a{i}" for i in range(2)]


@pytest.fixture
def node_rng(request: pytest.FixtureRequest) -> random.Random:
    print(f"fault seed {SEED} (repeat with {SEED_VARIABLE}={SEED})")
    return random.Random(f"{SEED}:{request.node.name}")


def container_of(pod: dict[str, Any]) -> tuple[str, int]:
    """The (containerd ID, restart count) of a one-container pod."""
    (status,) = pod["status"]["containerStatuses"]
    return str(status["containerID"]), int(status["restartCount"])


async def read_pod(kc: KubeClient, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = msgspec.json.decode(await kc.get(PODS, name, RELEASE_NAMESPACE))
    return pod


async def burst_with(kc: KubeClient, ns: str, rng: random.Random,
                     faults: dict[int, Callable[[], Awaitable[str]]], done: list[str]) -> None:
    for i, (resource, body) in enumerate(burst_documents(ns, PROCS, ALLOCS, pool_size=2)):
        if i in faults:
            done.append(f"before create {i}: {await faults[i]()}")
        await anyio.sleep(rng.uniform(0.0, 0.3))
        await create(kc, resource, body, ns)


async def test_killed_leader_containers_are_restarted_and_nothing_is_lost(
        node_env: NodeEnv, kc: KubeClient, node_ns: str, node_rng: random.Random) -> None:
    assert node_env.stack.node is not None
    node = node_env.stack.node
    killed: dict[str, tuple[str, int]] = {}

    def kill_leader(chart: str) -> Callable[[], Awaitable[str]]:
        async def fault() -> str:
            pod = await live_leader(kc, chart)
            container, restarts = container_of(await read_pod(kc, pod))
            killed[pod] = (container, restarts)
            await anyio.to_thread.run_sync(node.kill_container, container)
            return f"SIGKILL {chart}'s leader container in {pod}"
        return fault

    count = len(burst_documents(node_ns, PROCS, ALLOCS, pool_size=2))
    points = sorted(node_rng.sample(range(1, count), len(CHARTS)))
    faults = {point: kill_leader(chart) for point, chart in zip(points, CHARTS, strict=True)}
    done: list[str] = []
    async with flux_standin(kc, node_ns):
        await burst_with(kc, node_ns, node_rng, faults, done)
        note = f"seed {SEED}; " + "; ".join(done)
        await check_invariants(kc, node_ns, PROCS, ALLOCS, note=note)

    # the kubelet restarted each killed container in its pod: a new container, one more restart
    for pod, (container, restarts) in killed.items():
        async def restarted(pod: str = pod, restarts: int = restarts) -> dict[str, Any] | None:
            obj = await read_pod(kc, pod)
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in obj["status"]["conditions"])
            return obj if ready and container_of(obj)[1] > restarts else None

        obj = await wait_for(restarted, timeout=120, interval=0.5, what=f"{pod}'s container restarted")
        new_container, new_restarts = container_of(obj)
        assert new_container != container, note
        # one restart for the kill (more only if the restarted controller exited again, e.g. a Lease lost
        # under load, which the kubelet also restarts)
        assert new_restarts > restarts, note


async def test_a_containerd_restart_keeps_the_pods_and_the_node_starts_new_ones(
        node_env: NodeEnv, kc: KubeClient, node_ns: str, node_rng: random.Random) -> None:
    assert node_env.stack.node is not None
    node = node_env.stack.node
    survived: list[bool] = []

    async def restart_containerd() -> str:
        before = await anyio.to_thread.run_sync(node.tasks)
        await anyio.to_thread.run_sync(node.restart_containerd)
        after = await anyio.to_thread.run_sync(node.tasks)
        # every container that ran before runs on, the same process: its shim, not containerd, is its parent
        running = {cid: pid for cid, (pid, status) in before.items() if status == "RUNNING"}
        kept = {cid: pid for cid, (pid, status) in after.items() if status == "RUNNING" and cid in running}
        survived.append(kept == running)
        return f"containerd restarted ({len(kept)} of {len(running)} running containers kept)"

    count = len(burst_documents(node_ns, PROCS, ALLOCS, pool_size=2))
    done: list[str] = []
    async with flux_standin(kc, node_ns):
        await burst_with(kc, node_ns, node_rng, {node_rng.randrange(1, count): restart_containerd}, done)
        note = f"seed {SEED}; " + "; ".join(done)
        await check_invariants(kc, node_ns, PROCS, ALLOCS, note=note)
    assert survived == [True], note
    # and the node still starts pods: a standby replaced by its ReplicaSet becomes Ready
    leader = await live_leader(kc, POOL_RECONCILER)
    standby = next(iter({p["metadata"]["name"] for p in await chart_pods(kc, POOL_RECONCILER)} - {leader}))
    await kc.delete(PODS, standby, RELEASE_NAMESPACE)

    async def replaced() -> bool:
        pods = await chart_pods(kc, POOL_RECONCILER)
        return len(pods) == 2 and standby not in {p["metadata"]["name"] for p in pods} and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            for p in pods)

    try:
        await wait_for(replaced, timeout=120, interval=0.5, what="a new pool reconciler pod Ready after the restart")
    except TimeoutError as err:
        pods = node_env.kubectl("get", "pods", "-n", RELEASE_NAMESPACE, "-o", "wide", check=False)
        raise AssertionError(f"{note}: {err}\n{pods}") from err
