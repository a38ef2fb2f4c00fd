"""ProcessTable status from an informer against a real API server: batched writes, exact counts (DESIGN §2.6)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from reconciler.table import TableStatusWriter
from shared.domain.api.codec import decode_table
from shared.domain.api.process import Process
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

def process_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": name},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Observability"},
                     "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}}}


async def test_50_processes_make_few_table_writes_with_exact_counts(kc: KubeClient, namespace: str) -> None:
    table_name = f"t-{uuid.uuid4().hex[:10]}"
    informer: Informer[Process] = Informer(kc, PROCESSES, Process, namespace=namespace)
    writer = TableStatusWriter(kc, informer.objects, table_name=table_name, interval=2.0)
    informer.add_handler(writer.notify)

    async def counts() -> tuple[int, int, int] | None:
        status = decode_table(await kc.get(PROCESS_TABLES, table_name)).status
        if status is None:
            return None
        return status.process_count, status.ready_count, len(status.processes)

    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        tg.start_soon(writer.run)
        await informer.wait_synced()
        for i in range(50):
            await kc.create(PROCESSES, process_doc(f"p{i}"), namespace)
        for i in range(10):
            await kc.merge_patch(PROCESSES, f"p{i}", {"status": {"phase": "Attested", "pid": f"root.{i + 1}"}},
                                      namespace, subresource="status")
        await wait_for(lambda: _equal(counts, (50, 10, 50)), timeout=30, what="table counts 50/10/50")
        tg.cancel_scope.cancel()

    # 60 object changes; at most one write per 2 s while they arrive.
    assert 1 <= writer.writes <= 5
    table = decode_table(await kc.get(PROCESS_TABLES, table_name))
    assert table.status is not None
    assert [row.pid for row in table.status.processes[:10]] == [f"root.{i}" for i in range(1, 11)]
    assert table.status.last_reconciled is not None


async def _equal(probe: Any, expected: tuple[int, int, int]) -> bool:
    return bool(await probe() == expected)
