"""Three shards allocating PIDs from one ProcessTable at once (docs/architecture.md#one-processtable-many-shards):
three SequenceAllocators, each with its own client (its own connections, as three instances have), race on
one table on a real API server. The guarded bump (a JSON patch that tests ``spec.nextSequence``) lets exactly
one writer win each sequence number, so no PID is handed out twice, and every won number moved the counter
once."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from reconciler.pid import SequenceAllocator
from reconciler.table_keeper import TableKeeper
from shared.domain.api.codec import convert, decode_table
from shared.domain.api.process import Process
from shared.domain.resources import PROCESS_TABLES
from shared.kube.client import KubeClient
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

INSTANCES = 3
PER_INSTANCE = 25
START = 1000
"""The table's ``nextSequence`` before the race (its own table: the session plane is shared)."""


def process(name: str) -> Process:
    return convert({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"identity": {"nameOverride": "same", "parent": "root.1"},
                 "classification": {"pointType": "Gate", "substrate": "Observability"},
                 "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}},
    }, Process)


async def _race(control_plane: LocalControlPlane, kc: KubeClient, block: int,
                per_instance: int) -> tuple[str, list[tuple[int, str]], list[SequenceAllocator]]:
    """Three allocators (own client, own keeper, as in app.py) racing on a fresh table: its name, the
    ``(instance, pid)`` won and the allocators."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kc.create(PROCESS_TABLES, {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "ProcessTable",
                                     "metadata": {"name": name}, "spec": {"nextSequence": START}})
    clients = [await KubeClient.from_kubeconfig(control_plane.kubeconfig) for _ in range(INSTANCES)]
    allocators = [SequenceAllocator(c, TableKeeper(c, name), block_size=block) for c in clients]
    won: list[tuple[int, str]] = []
    try:
        async def worker(instance: int, index: int) -> None:
            won.append((instance, await allocators[instance].allocate(process(f"s{instance}-{index}"))))

        async with anyio.create_task_group() as tg:
            for index in range(per_instance):
                for instance in range(INSTANCES):
                    tg.start_soon(worker, instance, index)
    finally:
        for c in clients:
            await c.close()
    return name, won, allocators


async def test_three_instances_allocating_at_once_never_share_a_pid(
        kc: KubeClient, control_plane: LocalControlPlane) -> None:
    name, won, allocators = await _race(control_plane, kc, 1, PER_INSTANCE)
    pids = [pid for _, pid in won]
    total = INSTANCES * PER_INSTANCE
    assert len(pids) == total
    assert len(set(pids)) == total, "a PID was handed out twice"
    # every allocation won one bump and nothing else bumped: the numbers are exactly START … START+total-1
    assert sorted(int(pid.rsplit(".", 1)[1]) for pid in pids) == list(range(START, START + total))
    stored: Any = decode_table(await kc.get(PROCESS_TABLES, name))
    assert stored.spec.next_sequence == START + total
    assert {instance for instance, _ in won} == set(range(INSTANCES))
    # the three really raced: some bump met another instance's first (a lost test, re-read and retried)
    assert sum(a.lost for a in allocators) > 0


BLOCK = 8
MANY = 60
"""PIDs per instance with blocks."""


async def test_blocks_keep_pids_unique_with_fewer_lost_races(kc: KubeClient, control_plane: LocalControlPlane) -> None:
    lost: dict[int, int] = {}
    for block in (BLOCK, 1):
        _, won, allocators = await _race(control_plane, kc, block, MANY)
        pids = [pid for _, pid in won]
        assert len(pids) == INSTANCES * MANY
        assert len(set(pids)) == len(pids), "a PID was handed out twice"
        lost[block] = sum(a.lost for a in allocators)
        # each instance won one bump per block it used up: ceil(MANY / block) of them
        assert [a.bumps for a in allocators] == [-(-MANY // block)] * INSTANCES
    # one bump per BLOCK numbers: fewer bumps, so fewer of them lost
    assert lost[BLOCK] < lost[1]
