"""ProcessTable status: exact counts, capped rows, coalesced writes (docs/behaviour.md#processtable-status)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
import pytest
from anyio import wait_all_tasks_blocked
from prometheus_client import CollectorRegistry

from reconciler.table_keeper import TableKeeper, table_existed
from reconciler.table_rows import claims_patch, is_ready, pid_sort_key, table_status
from reconciler.table_writer import TableStatusWriter
from shared.domain import finalizers
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.domain.api.table import ClaimRecord, ProcessTable
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.controller import Result
from shared.kube.errors import Conflict
from shared.kube.informer import Informer
from shared.kube.meta import as_json
from shared.kube.metrics import RuntimeMetrics
from tests.support.clock import FakeClock
from tests.support.fake_api import Call, FakeApi

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def process(name: str, *, pid: str | None = None, phase: str | None = None, ready: str | None = None,
            namespace: str = "ns") -> Process:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Observability"},
                 "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}},
    }
    status: dict[str, Any] = {}
    if pid is not None:
        status["pid"] = pid
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": "2025-01-01T00:00:00Z"}]
    if status:
        doc["status"] = status
    return convert(doc, Process)


@pytest.mark.parametrize(
    ("proc", "expected"),
    [
        (process("a"), False),
        (process("a", phase="Running"), False),
        (process("a", phase="Attested"), True),
        (process("a", phase="Attested", ready="False"), False),
        (process("a", phase="Running", ready="True"), True),
    ],
    ids=["no status is not ready", "Running is not ready", "Attested without conditions is ready",
         "a Ready=False condition wins over Attested", "a Ready=True condition is ready"],
)
def test_readiness(proc: Process, expected: bool) -> None:
    assert is_ready(proc) is expected


def test_pid_order_is_hierarchical_and_numeric() -> None:
    pids = ["seph.10", "seph.2", "seph.2.1", "alpha.3", "seph.1"]
    assert sorted(pids, key=pid_sort_key) == ["alpha.3", "seph.1", "seph.2", "seph.2.1", "seph.10"]


def test_status_has_exact_counts_one_row_per_process_and_last_reconciled() -> None:
    procs = [process("b", pid="seph.2", phase="Attested"), process("a", pid="seph.1", phase="Running"),
             process("c")]
    status = as_json(table_status(procs, NOW))
    assert status["processCount"] == 3
    assert status["readyCount"] == 1
    assert status["lastReconciled"] == "2025-01-02T03:04:05Z"
    assert [(r["name"], r["pid"], r["phase"]) for r in status["processes"]] == [
        ("a", "seph.1", "Running"), ("b", "seph.2", "Attested"), ("c", "", "Pending")]
    assert status["processes"][0] == {"name": "a", "namespace": "ns", "pid": "seph.1", "phase": "Running",
                                      "pointType": "Gate", "substrate": "Observability"}


def test_rows_are_capped_by_count_keeping_the_lowest_pids() -> None:
    procs = [process(f"p{i}", pid=f"r.{i}") for i in range(1, 11)]
    status = as_json(table_status(procs, NOW, max_rows=3))
    assert status["processCount"] == 10
    assert [r["pid"] for r in status["processes"]] == ["r.1", "r.2", "r.3"]


def test_rows_are_capped_by_bytes() -> None:
    procs = [process(f"p{i}", pid=f"r.{i}") for i in range(1, 11)]
    # the rows of r.1 … r.9 are this long, plus one byte each (the separator)
    row = '{"name":"p1","namespace":"ns","pid":"r.1","phase":"Pending","pointType":"Gate","substrate":"Observability"}'
    one = len(row) + 1
    assert [r.pid for r in table_status(procs, NOW, max_bytes=one * 4).processes] == ["r.1", "r.2", "r.3", "r.4"]
    assert [r.pid for r in table_status(procs, NOW, max_bytes=one * 4 - 1).processes] == ["r.1", "r.2", "r.3"]


def test_ten_thousand_processes_stay_far_below_the_etcd_limit() -> None:
    procs = [process("x" * 253, pid=f"{'n' * 26}.{i}", phase="Attested" if i % 3 else "Running",
                     namespace="y" * 63) for i in range(10_000)]
    status = table_status(procs, NOW)
    assert status.process_count == 10_000
    assert status.ready_count == 6666  # every i not divisible by 3 is Attested
    assert len(status.processes) == 500  # the row cap: 500 rows of about 450 bytes stay within 256 KiB
    assert len(msgspec.json.encode(as_json(status))) < 300 * 1024  # 1.5 MiB is etcd's limit


class FakeTableClient(FakeApi):
    """The in-memory API server (tests/support/fake_api.py) holding table ``proc`` (unless not ``exists``) and
    the ``listed`` Processes, read through the table and the writes of it."""

    def __init__(self, status: dict[str, Any] | None = None, *, exists: bool = True,
                 listed: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__()
        if exists:
            self.table = {"metadata": {"name": "proc"}, "spec": {}, **({"status": status} if status else {})}
        for doc in listed:
            self.seed(PROCESSES, doc)
        self.patched = anyio.Event()
        """Set when a status write of the table is sent."""

        async def status_written(call: Call) -> None:
            if call.verb == "merge_patch" and call.subresource == "status":
                self.patched.set()

        self.before.append(status_written)
        self.conflict = False
        """Answer every metadata patch of the table 409 (a PID bump landed first)."""

        async def bumped_first(call: Call) -> None:
            if (self.conflict and call.verb == "merge_patch" and call.subresource is None
                    and call.resource.plural == PROCESS_TABLES.plural):
                raise Conflict(409, "Conflict", "the object has been modified")

        self.before.append(bumped_first)

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        """No change ever arrives by watch: the tests change the caches themselves. A watch-list delivers its
        initial state (up to its initial-events-end bookmark) and then nothing more."""
        if kwargs.get("send_initial_events"):
            async for event in super().watch(*args, **kwargs):
                yield event
                if event.type == "BOOKMARK":
                    break
        await anyio.sleep_forever()

    @property
    def table(self) -> dict[str, Any] | None:
        """The stored table (a copy); set it to store another (None: delete it outright)."""
        return self.object(PROCESS_TABLES, "proc")

    @table.setter
    def table(self, doc: dict[str, Any] | None) -> None:
        if doc is None:
            self.remove(PROCESS_TABLES, "proc")
        else:
            self.seed(PROCESS_TABLES, {**doc, "metadata": {**doc["metadata"], "resourceVersion": None}})

    @property
    def patches(self) -> list[dict[str, Any]]:
        """The status merge patches sent, in order."""
        return [c.body for c in self.calls_of("merge_patch") if c.subresource == "status"]

    @property
    def meta_patches(self) -> list[dict[str, Any]]:
        """The merge patches of the table itself (its finalizer), in order."""
        return [c.body for c in self.calls_of("merge_patch")
                if c.subresource is None and c.resource.plural == PROCESS_TABLES.plural]


def writer(fake: FakeTableClient, procs: Iterable[Process], **kwargs: Any) -> TableStatusWriter:
    snapshot = list(procs)
    return TableStatusWriter(fake, lambda: snapshot, now=lambda: NOW, **kwargs)


@pytest.mark.anyio
async def test_a_write_that_changes_nothing_is_skipped() -> None:
    procs = [process("a", pid="seph.1", phase="Attested")]
    stored = {"processCount": 1, "readyCount": 1, "lastReconciled": "2020-01-01T00:00:00Z",
              "processes": [{"name": "a", "namespace": "ns", "pid": "seph.1", "phase": "Attested",
                             "pointType": "Gate", "substrate": "Observability"}]}
    fake = FakeTableClient(stored)
    w = writer(fake, procs)
    assert await w.flush() is False
    assert fake.patches == []


@pytest.mark.anyio
async def test_a_missing_table_is_created_then_written_once() -> None:
    fake = FakeTableClient(exists=False)
    w = writer(fake, [process("a", pid="seph.1")])
    assert await w.flush() is True
    assert await w.flush() is False
    assert fake.table is not None
    assert fake.table["metadata"]["name"] == "proc"
    assert [p["status"]["processCount"] for p in fake.patches] == [1]


def passes(registry: CollectorRegistry, result: str) -> float:
    value = registry.get_sample_value("controller_runtime_reconcile_total",
                                      {"controller": "processtable", "result": result})
    return value or 0.0


async def until(condition: Callable[[], bool]) -> None:
    """Let every task run until all are blocked, then check ``condition`` (no waiting on time)."""
    await wait_all_tasks_blocked()
    assert condition()


@pytest.mark.anyio
async def test_events_within_an_interval_make_one_write_and_the_next_comes_once_it_has_passed() -> None:
    """The writer as a Controller on an injected clock (docs/behaviour.md#processtable-status): a burst of
    Process events is one key and one write; events within ``interval`` of that pass only wait; once the
    interval has passed on the queue's clock, the next write carries what changed meanwhile."""
    fake = FakeTableClient(listed=[listed_doc(f"p{i}", f"r.{i}") for i in range(1, 51)])
    table = fake.table
    assert table is not None
    table["metadata"]["finalizers"] = [finalizers.TABLE]
    fake.table = table
    tables: Informer[ProcessTable] = Informer(fake, PROCESS_TABLES, ProcessTable)
    procs: Informer[Process] = Informer(fake, PROCESSES, Process)
    clock = FakeClock()
    w = TableStatusWriter(fake, procs.objects, table_name="proc", interval=2.0, now=lambda: NOW,
                          clock=clock)
    registry = CollectorRegistry()
    controller = w.watch(tables, procs, metrics=RuntimeMetrics(registry))
    async with anyio.create_task_group() as tg:
        tg.start_soon(tables.run)
        tg.start_soon(procs.run)
        tg.start_soon(controller.run)
        await until(lambda: len(fake.patches) == 1)  # the first pass writes at once, both caches synced
        for i in range(51, 61):  # ten more Processes, each an event, within the interval, one at a time
            procs.store.upsert(process(f"p{i}", pid=f"r.{i}"))
            await wait_all_tasks_blocked()
        await until(lambda: len(fake.patches) == 1)
        assert controller.queue.waiting == 1, "the one key waits out the interval"
        assert passes(registry, "requeue_after") == 1, "one pass parked the key; the other events only wait"
        clock.advance(1.9)
        await until(lambda: len(fake.patches) == 1)
        clock.advance(0.1)  # 2.0 s since the first pass: the interval has passed
        await until(lambda: len(fake.patches) == 2)
        clock.advance(60.0)  # nothing changed since: no further write, however long
        await until(lambda: len(fake.patches) == 2)
        tg.cancel_scope.cancel()
    assert [p["status"]["processCount"] for p in fake.patches] == [50, 60]


def listed_doc(name: str, pid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"pid": pid},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Observability"},
                     "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}}}}


@pytest.mark.anyio
async def test_a_missing_table_is_recreated_past_every_listed_pid_with_our_finalizer() -> None:
    fake = FakeTableClient(exists=False, listed=[listed_doc("a", "seph.4"), listed_doc("b", "seph.4.9")])
    keeper = TableKeeper(fake)
    keeper.handed_out(6)
    table = await keeper.read()
    assert table.spec.next_sequence == 10
    assert table.metadata.finalizers == [finalizers.TABLE]
    assert keeper.recreated == 1


def naming_parent(name: str, parent: str) -> dict[str, Any]:
    """A child declared under ``parent`` that holds no PID yet (as examples/upstream/observability-stack.yaml)."""
    doc = listed_doc(name, "")
    doc["spec"]["identity"] = {"parent": parent}
    del doc["status"]
    return doc


@pytest.mark.parametrize(
    ("listed", "seen", "existed"),
    [
        ([], False, False),
        ([naming_parent("c", "seph.1")], False, False),
        ([listed_doc("a", "seph.4")], False, True),
        ([], True, True),
    ],
    ids=[
        "an empty cluster never had a table",
        "a child naming a parent PID nobody holds proves no table (a fresh install with the examples)",
        "a PID held was handed out by a table",
        "a table this keeper read before existed",
    ],
)
def test_table_existed(listed: list[dict[str, Any]], seen: bool, existed: bool) -> None:
    assert table_existed([convert(d, Process) for d in listed], seen=seen) is existed


@pytest.mark.anyio
async def test_a_fresh_install_creates_the_table_past_named_pids_without_calling_it_recreated() -> None:
    fake = FakeTableClient(exists=False, listed=[naming_parent("c", "seph.3")])
    keeper = TableKeeper(fake)
    table = await keeper.read()
    assert table.spec.next_sequence == 4  # still past every number named, so none is handed out twice
    assert keeper.recreated == 0
    # deleted afterwards: this keeper saw it, so its next creation is a recreation
    fake.table = None
    await keeper.read()
    assert keeper.recreated == 1


@pytest.mark.anyio
async def test_the_finalizer_is_put_on_a_live_table_that_lacks_it_before_the_status_write() -> None:
    fake = FakeTableClient()
    w = writer(fake, [process("a", pid="seph.1")])
    assert await w.reconcile(w.request) == Result.done()
    assert fake.table is not None
    assert fake.table["metadata"]["finalizers"] == [finalizers.TABLE]
    assert [p["status"]["processCount"] for p in fake.patches] == [1]


def deleted(fake: FakeTableClient) -> str:
    """Mark the stored table deleted (held by our finalizer and another); its new resourceVersion."""
    table = fake.table
    assert table is not None
    table["metadata"].update(finalizers=["other", finalizers.TABLE], deletionTimestamp="2020-01-01T00:00:00Z")
    fake.table = table
    stored = fake.table
    assert stored is not None
    return str(stored["metadata"]["resourceVersion"])


@pytest.mark.anyio
@pytest.mark.parametrize(("listed", "kept"), [([], False), ([listed_doc("a", "seph.1")], True)],
                         ids=["released when no Process holds a PID", "kept while one does"])
async def test_a_deleted_table_keeps_its_finalizer_while_a_pid_is_held(listed: list[dict[str, Any]],
                                                                       kept: bool) -> None:
    fake = FakeTableClient(listed=listed)
    decided = deleted(fake)
    w = writer(fake, [])
    await w.reconcile(w.request)
    assert fake.table is not None
    assert fake.table["metadata"]["finalizers"] == (["other", finalizers.TABLE] if kept else ["other"])
    # released: the finalizer goes in one write guarded by the version decided on
    assert fake.meta_patches == ([] if kept else [{"metadata": {"finalizers": ["other"], "resourceVersion": decided}}])


@pytest.mark.anyio
async def test_a_release_that_meets_a_newer_table_is_not_retried_but_decided_again_after_the_interval() -> None:
    """A 409 on the guarded removal means the table changed since the release was decided (a PID bump):
    the removal is not retried on a re-read, which would drop the finalizer the bump still needs."""
    fake = FakeTableClient()
    deleted(fake)
    fake.conflict = True
    w = writer(fake, [], interval=5.0)
    assert await w.reconcile(w.request) == Result.after(5.0)
    assert len(fake.meta_patches) == 1
    assert fake.table is not None
    assert finalizers.TABLE in fake.table["metadata"]["finalizers"]


# ── the claims write (docs/behaviour.md#stable-name-claims) ─────────────────

GRANTED = datetime(2025, 1, 1, tzinfo=UTC)
A = ClaimRecord(holder="ns/a", pid="a.1", granted_at=GRANTED, priority=0)
A_WIRE = {"holder": "ns/a", "pid": "a.1", "grantedAt": "2025-01-01T00:00:00Z", "priority": 0}
META = {"uid": "u-1", "resourceVersion": "42"}
STORED = {"holder": "ns/b", "pid": "b.1", "grantedAt": "2024-12-31T23:59:59.5Z", "priority": 3}


@pytest.mark.parametrize(
    ("document", "new", "expected"),
    [
        ({"metadata": META, "status": {"processCount": 1, "claims": {"k": STORED}}}, {"k": A},
         [{"op": "test", "path": "/metadata/uid", "value": "u-1"},
          {"op": "test", "path": "/status/claims", "value": {"k": STORED}},
          {"op": "replace", "path": "/status/claims", "value": {"k": A_WIRE}}]),
        ({"metadata": META, "status": {"claims": {"k": STORED}}}, {},
         [{"op": "test", "path": "/metadata/uid", "value": "u-1"},
          {"op": "test", "path": "/status/claims", "value": {"k": STORED}},
          {"op": "remove", "path": "/status/claims"}]),
        ({"metadata": META, "status": {"processCount": 1}}, {"k": A},
         [{"op": "test", "path": "/metadata/uid", "value": "u-1"},
          {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
          {"op": "add", "path": "/status/claims", "value": {"k": A_WIRE}}]),
        ({"metadata": META}, {"k": A},
         [{"op": "test", "path": "/metadata/uid", "value": "u-1"},
          {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
          {"op": "add", "path": "/status", "value": {"claims": {"k": A_WIRE}}}]),
    ],
    ids=[
        "stored claims are tested as stored (their own bytes) and replaced",
        "an empty map removes the key",
        "no claims stored yet: the resourceVersion is tested instead",
        "no status at all: status is added with the claims",
    ],
)
def test_claims_patch(document: dict[str, Any], new: dict[str, ClaimRecord], expected: list[dict[str, Any]]) -> None:
    assert claims_patch(document, new) == expected
