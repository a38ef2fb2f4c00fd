"""ProcessTable status from an informer against a real API server: batched writes, exact counts
(docs/behaviour.md#processtable-status)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import anyio
import pytest

from reconciler.table_writer import TableStatusWriter
from shared.domain.api.codec import decode_table
from shared.domain.api.process import Process
from shared.domain.api.table import ProcessTable
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.informer import Informer
from tests.support.kube import wait_for
from tests.support.wrapped_api import WrappedApi

pytestmark = pytest.mark.anyio

def process_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": name},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Observability"},
                     "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}}}


class RecordingClient(WrappedApi):
    """The writer's client, recording the body of every ProcessTable status patch it sends."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.status_patches: list[dict[str, Any]] = []

    async def merge_patch(self, resource: Resource, name: str, patch: Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes:
        if resource == PROCESS_TABLES and subresource == "status":  # (the finalizer write is not recorded)
            self.status_patches.append(patch)
        return await self.inner.merge_patch(resource, name, patch, namespace, subresource=subresource)


def compared(patch: dict[str, Any]) -> tuple[Any, ...]:
    status = patch["status"]
    return status["processCount"], status["readyCount"], status["processes"]


async def test_50_processes_give_exact_counts_in_coalesced_writes(kc: KubeClient, namespace: str) -> None:
    table_name = f"t-{uuid.uuid4().hex[:10]}"
    informer: Informer[Process] = Informer(kc, PROCESSES, Process, namespace=namespace)
    tables: Informer[ProcessTable] = Informer(kc, PROCESS_TABLES, ProcessTable)
    recording = RecordingClient(kc)
    writer = TableStatusWriter(recording, informer.objects, table_name=table_name, interval=2.0)
    controller = writer.watch(tables, informer)

    async def counts() -> tuple[int, int, int] | None:
        status = decode_table(await kc.get(PROCESS_TABLES, table_name)).status
        if status is None:
            return None
        return status.process_count, status.ready_count, len(status.processes)

    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        tg.start_soon(tables.run)
        tg.start_soon(controller.run)
        await informer.wait_synced()
        for i in range(50):
            await kc.create(PROCESSES, process_doc(f"p{i}"), namespace)
        for i in range(10):
            await kc.merge_patch(PROCESSES, f"p{i}", {"status": {"phase": "Attested", "pid": f"root.{i + 1}"}},
                                      namespace, subresource="status")
        await wait_for(lambda: _equal(counts, (50, 10, 50)), timeout=30, what="table counts 50/10/50")
        # the GET above can see a write before the writer has counted it: let it finish counting first
        await wait_for(lambda: _true(writer.writes == len(recording.status_patches)), timeout=30,
                       what="the writer to count its last write")
        tg.cancel_scope.cancel()

    # 60 object changes, coalesced: how many writes depends on how fast they arrived (bench/, not here);
    # what the writer decided does not: every write changed counts or rows, and the last one is exact.
    patches = recording.status_patches
    assert writer.writes == len(patches) >= 1
    assert all(compared(a) != compared(b) for a, b in itertools.pairwise(patches))
    assert compared(patches[-1])[:2] == (50, 10)
    assert all(set(p["status"]) == {"processCount", "readyCount", "processes", "lastReconciled", "conditions",
                                    "observedGeneration"} for p in patches)
    assert await writer.flush() is False  # settled: nothing changed, nothing sent
    assert len(recording.status_patches) == len(patches)
    table = decode_table(await kc.get(PROCESS_TABLES, table_name))
    assert table.status is not None
    assert [row.pid for row in table.status.processes[:10]] == [f"root.{i}" for i in range(1, 11)]
    assert table.status.last_reconciled is not None


async def _true(condition: bool) -> bool:
    return condition


async def _equal(probe: Any, expected: tuple[int, int, int]) -> bool:
    return bool(await probe() == expected)
