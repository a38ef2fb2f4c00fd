"""PID allocation against a real API server: concurrent forks never share a PID (docs/behaviour.md#pid-allocation)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import msgspec
import pytest

from reconciler.pid import JSON_PATCH, PidRefused, SequenceAllocator, allocate_pid
from reconciler.table_keeper import TableKeeper, held_sequence
from reconciler.table_writer import TableStatusWriter
from shared.domain import finalizers
from shared.domain.api.codec import convert, decode_table, to_wire
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import EVENTS, KubeClient, Resource
from shared.kube.errors import Conflict, Invalid, NotFound
from tests.integration.reconciler.conftest import reconciler_running
from tests.support.kube import wait_for
from tests.support.wrapped_api import WrappedApi

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


async def held(kc: KubeClient) -> int:
    """The highest sequence number the Processes of the (shared) plane hold: where a new table starts."""
    return held_sequence(await TableKeeper(kc).processes())


async def test_missing_table_is_created_past_the_held_pids(kc: KubeClient, tname: str) -> None:
    first = await held(kc) + 1  # 1 on an empty plane
    assert await allocate_pid(kc, process("seph"), table_name=tname) == f"seph.{first}"
    created = await table(kc, tname)
    assert created.spec.next_sequence == first + 1
    assert (created.spec.sigterm_timeout_seconds, created.spec.zombie_timeout_seconds) == (480, 600)


async def test_20_concurrent_allocations_get_20_distinct_pids(kc: KubeClient, tname: str) -> None:
    # The table is created by the racing allocations themselves: concurrent creates must resolve too.
    first = await held(kc) + 1
    pids: list[str] = []

    async def fork(i: int) -> None:
        pids.append(await allocate_pid(kc, process(f"p{i}", parent="root.1"), table_name=tname))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(fork, i)

    assert len(set(pids)) == 20
    assert sorted(int(pid.rsplit(".", 1)[1]) for pid in pids) == list(range(first, first + 20))
    assert all(pid.startswith("root.1.") for pid in pids)
    assert (await table(kc, tname)).spec.next_sequence == first + 20


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


# ── the table deleted under a running reconciler (issue 13, item 3) ─────────────────────────────


def flux_doc(name: str) -> dict[str, Any]:
    """A Process that gets a PID (a root named ``same``, so equal sequence numbers mean equal PIDs)."""
    return {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": name},
            "spec": {"identity": {"nameOverride": "same"},
                     "classification": {"pointType": "Gate", "substrate": "Observability"},
                     "intent": {"flux": {"gitRepository": "infra", "path": f"./apps/{name}"}}}}


async def pid_of(kc: KubeClient, namespace: str, name: str) -> str | None:
    doc = msgspec.json.decode(await kc.get(PROCESSES, name, namespace))
    pid = (doc.get("status") or {}).get("pid")
    return pid if isinstance(pid, str) and pid else None


async def proc_doc(kc: KubeClient) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = msgspec.json.decode(await kc.get(PROCESS_TABLES, PROCESS_TABLE_NAME))
    except NotFound:
        return None
    return doc


async def test_a_deleted_table_is_kept_while_pids_are_held_and_recreated_past_them(kc: KubeClient,
                                                                                  namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_doc("a"), namespace)
        pid_a = await wait_for(lambda: pid_of(kc, namespace, "a"), timeout=30, what="a PID for a")

        async def protected() -> bool:
            doc = await proc_doc(kc)
            return doc is not None and finalizers.TABLE in (doc["metadata"].get("finalizers") or [])
        await wait_for(protected, timeout=30, what="our finalizer on the ProcessTable")

        # deleted while a PID is held: the table stays (Terminating) and still hands out numbers
        await kc.delete(PROCESS_TABLES, PROCESS_TABLE_NAME)
        terminating = await proc_doc(kc)
        assert terminating is not None
        assert terminating["metadata"].get("deletionTimestamp")
        await kc.create(PROCESSES, flux_doc("b"), namespace)
        pid_b = await wait_for(lambda: pid_of(kc, namespace, "b"), timeout=30, what="a PID for b")
        assert pid_b != pid_a

        # the protection bypassed (our finalizer removed by hand): the table goes, and comes back past
        # every held sequence number, with a Warning Event; the next PID is new
        held_before = await held(kc)
        await kc.merge_patch(PROCESS_TABLES, PROCESS_TABLE_NAME, {"metadata": {"finalizers": None}})

        async def recreated() -> dict[str, Any] | None:
            doc = await proc_doc(kc)
            return doc if doc is not None and not doc["metadata"].get("deletionTimestamp") else None
        table_doc = await wait_for(recreated, timeout=30, what="the ProcessTable recreated")
        assert table_doc["spec"]["nextSequence"] > held_before
        assert finalizers.TABLE in table_doc["metadata"]["finalizers"]

        await kc.create(PROCESSES, flux_doc("c"), namespace)
        pid_c = await wait_for(lambda: pid_of(kc, namespace, "c"), timeout=30, what="a PID for c")
        assert pid_c not in (pid_a, pid_b)
        assert int(pid_c.rsplit(".", 1)[1]) > held_before

        async def warned() -> bool:
            events = msgspec.json.decode(await kc.list(EVENTS, "default"))["items"]
            return any(e.get("reason") == "ProcessTableRecreated"
                       and (e.get("involvedObject") or {}).get("uid") == table_doc["metadata"]["uid"]
                       for e in events)
        await wait_for(warned, timeout=30, what="the ProcessTableRecreated Warning Event")


# ── the status writer does not fight the bump (issue 13, item 7) ───────────────────────────────


class StatusBetweenReadAndBump(WrappedApi):
    """The allocator's client: before every bump of the sequence it lets the table's status writer write
    (the worst interleaving for a resourceVersion-guarded bump, made deterministic), and counts the bumps
    the API server refused (409 Conflict, or 422 for a failed compare-and-swap test)."""

    def __init__(self, client: KubeClient, write_status: Callable[[], Awaitable[object]]) -> None:
        super().__init__(client)
        self.write_status = write_status
        self.bumps = 0
        self.refused = 0

    async def _bump(self, send: Callable[[], Awaitable[bytes]]) -> bytes:
        self.bumps += 1
        await self.write_status()
        try:
            return await send()
        except (Conflict, Invalid):
            self.refused += 1
            raise

    async def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                      body: bytes | None = None, content_type: str | None = None,
                      request_timeout: float | None = None) -> bytes:
        def send() -> Awaitable[bytes]:
            return super(StatusBetweenReadAndBump, self).request(
                method, path, query=query, body=body, content_type=content_type, request_timeout=request_timeout)

        if method == "PATCH" and content_type == JSON_PATCH:
            return await self._bump(send)
        return await send()

    async def merge_patch(self, resource: Resource, name: str, patch: Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes:
        if resource == PROCESS_TABLES and subresource is None and "spec" in patch:
            return await self._bump(lambda: self.inner.merge_patch(resource, name, patch, namespace))
        return await self.inner.merge_patch(resource, name, patch, namespace, subresource=subresource)


async def test_status_writes_between_every_read_and_bump_refuse_no_bump(kc: KubeClient, tname: str) -> None:
    rows: list[Process] = []
    writer = TableStatusWriter(kc, lambda: list(rows), table_name=tname)

    async def write_status() -> None:  # a status that differs every time: one more row
        rows.append(convert({**to_wire(process(f"row{len(rows)}")), "status": {"pid": f"r.{len(rows) + 1}"}},
                            Process))
        assert await writer.flush() is True

    client = StatusBetweenReadAndBump(kc, write_status)
    pids = [await allocate_pid(client, process(f"p{i}"), table_name=tname) for i in range(20)]

    assert writer.writes == client.bumps == 20  # every bump had a status write after its read
    assert client.refused == 0
    assert len(set(pids)) == 20
    # what the resourceVersion guard did instead: a status write between read and bump refuses it
    stale = await table(kc, tname)
    await write_status()
    with pytest.raises(Conflict):
        await kc.merge_patch(PROCESS_TABLES, tname, {"metadata": {"resourceVersion": stale.metadata.resource_version},
                                                     "spec": {"nextSequence": stale.spec.next_sequence + 1}})


# ── one allocator per replica (issue 16) ──────────────────────────────────────────────────────


async def test_one_allocator_serialises_its_bumps_and_reads_the_table_once(kc: KubeClient, tname: str) -> None:
    rows: list[Process] = []
    writer = TableStatusWriter(kc, lambda: list(rows), table_name=tname)

    async def write_status() -> None:  # the status writer between every bump, as in the test above
        rows.append(convert({**to_wire(process(f"row{len(rows)}")), "status": {"pid": f"r.{len(rows) + 1}"}},
                            Process))
        await writer.flush()

    client = StatusBetweenReadAndBump(kc, write_status)
    allocator = SequenceAllocator(client, TableKeeper(client, tname))
    first = await held(kc) + 1
    pids: list[str] = []

    async def fork(i: int) -> None:
        pids.append(await allocator.allocate(process(f"p{i}", parent="root.1")))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(fork, i)

    assert sorted(int(pid.rsplit(".", 1)[1]) for pid in pids) == list(range(first, first + 20))
    assert (allocator.reads, allocator.lost) == (1, 0)  # the first bump's read; then its own answers
    assert (client.bumps, client.refused) == (20, 0)
    assert (await table(kc, tname)).spec.next_sequence == first + 20


async def test_a_bump_by_another_writer_is_noticed_and_no_pid_is_handed_out_twice(kc: KubeClient,
                                                                                   tname: str) -> None:
    allocator = SequenceAllocator(kc, TableKeeper(kc, tname))
    mine = await allocator.allocate(process("a"))
    theirs = await allocate_pid(kc, process("b"), table_name=tname)  # another replica's allocator
    again = await allocator.allocate(process("c"))
    numbers = [int(pid.rsplit(".", 1)[1]) for pid in (mine, theirs, again)]
    assert numbers == [numbers[0], numbers[0] + 1, numbers[0] + 2]
    assert (allocator.reads, allocator.lost) == (2, 1)


async def test_limits_changed_by_hand_after_a_bump_are_honoured(kc: KubeClient, tname: str) -> None:
    await kc.create(PROCESS_TABLES, {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "ProcessTable",
                                     "metadata": {"name": tname}, "spec": {"nextSequence": 5}})
    allocator = SequenceAllocator(kc, TableKeeper(kc, tname))
    assert await allocator.allocate(process("kid", parent="seph.1")) == "seph.1.5"
    await kc.merge_patch(PROCESS_TABLES, tname, {"spec": {"maxDepth": 1}})  # a hand edit of spec, no bump
    with pytest.raises(PidRefused, match="maxDepth 1"):
        await allocator.allocate(process("kid2", parent="seph.1"))
    assert await allocator.allocate(process("seph")) == "seph.6"
    assert (await table(kc, tname)).spec.next_sequence == 7
