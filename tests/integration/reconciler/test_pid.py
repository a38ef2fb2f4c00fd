"""PID allocation against a real API server: concurrent forks never share a PID (docs/behaviour.md#pid-allocation)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from reconciler.pid import PidRefused, allocate_pid
from shared.domain.api.codec import convert, decode_table
from shared.domain.api.process import Process
from shared.domain.resources import PROCESS_TABLES
from shared.kube.client import KubeClient

pytestmark = pytest.mark.anyio


@pytest.fixture
def tname() -> str:
    """A table name of this test's own (the session plane is shared)."""
    return f"t-{uuid.uuid4().hex[:10]}"


def process(name: str, *, parent: str | None = None) -> Process:
    identity: dict[str, Any] = {"nameOverride": name}
    if parent:
        identity["parent"] = parent
    return convert({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"identity": identity,
                 "classification": {"pointType": "Gate", "substrate": "Observability"},
                 "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}},
    }, Process)


async def table(client: KubeClient, name: str) -> Any:
    return decode_table(await client.get(PROCESS_TABLES, name))


async def test_missing_table_is_created_and_the_first_pid_is_1(kc: KubeClient, tname: str) -> None:
    assert await allocate_pid(kc, process("seph"), table_name=tname) == "seph.1"
    created = await table(kc, tname)
    assert created.spec.next_sequence == 2
    assert (created.spec.sigterm_timeout_seconds, created.spec.zombie_timeout_seconds) == (480, 600)


async def test_20_concurrent_allocations_get_20_distinct_pids(kc: KubeClient, tname: str) -> None:
    # The table is created by the racing allocations themselves: concurrent creates must resolve too.
    pids: list[str] = []

    async def fork(i: int) -> None:
        pids.append(await allocate_pid(kc, process(f"p{i}", parent="root.1"), table_name=tname))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(fork, i)

    assert len(set(pids)) == 20
    assert sorted(int(pid.rsplit(".", 1)[1]) for pid in pids) == list(range(1, 21))
    assert all(pid.startswith("root.1.") for pid in pids)
    assert (await table(kc, tname)).spec.next_sequence == 21


async def test_max_depth_refuses_without_consuming_a_sequence(kc: KubeClient, tname: str) -> None:
    await kc.create(PROCESS_TABLES, {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "ProcessTable",
                                          "metadata": {"name": tname}, "spec": {"maxDepth": 1, "nextSequence": 5}})
    with pytest.raises(PidRefused, match="maxDepth 1"):
        await allocate_pid(kc, process("kid", parent="seph.1"), table_name=tname)
    assert await allocate_pid(kc, process("seph"), table_name=tname) == "seph.5"
    assert (await table(kc, tname)).spec.next_sequence == 6


async def test_max_children_counts_existing_children(kc: KubeClient, tname: str) -> None:
    await kc.create(PROCESS_TABLES, {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "ProcessTable",
                                          "metadata": {"name": tname}, "spec": {"maxChildren": 2}})

    async def two(parent: str) -> int:
        return 2 if parent == "seph.1" else 0

    with pytest.raises(PidRefused, match="maxChildren is 2"):
        await allocate_pid(kc, process("k3", parent="seph.1"), table_name=tname, children=two)
    assert await allocate_pid(kc, process("k1", parent="seph.2"), table_name=tname, children=two) == "seph.2.1"
