"""The claims write of the table status writer against a real API server
(docs/behaviour.md#stable-name-claims): holders read back from the table, a guarded JSON patch that a
concurrent claims change refuses and a PID bump or a counts write does not."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from reconciler.claims import in_phase
from reconciler.pid import JSON_PATCH
from reconciler.table_writer import TableStatusWriter
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.resources import PROCESS_TABLES
from shared.kube.client import KubeClient

pytestmark = pytest.mark.anyio

KEY = "pleme-dev/api"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def bidder(name: str, created: str, phase: str = "Attested") -> Process:
    return convert({
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"flux": {"gitRepository": "r", "path": "./a"}},
                 "routing": {"hostnames": [{"app": "api"}], "backend": {"service": "s", "port": 80},
                             "stableNameClaim": True}},
        "status": {"phase": phase, "pid": f"{name}.1"},
    }, Process)


A = bidder("a", "2026-01-01T10:00:00Z")
B = bidder("b", "2026-01-01T11:00:00Z")


def clock(start: datetime) -> Iterator[datetime]:
    now = start
    while True:
        yield now
        now += timedelta(minutes=1)


@pytest.fixture
def tname() -> str:
    return f"claims-{uuid.uuid4().hex[:8]}"


def version_of(process: Process, resource_version: str) -> Process:
    """``process`` as the cache shows it at another resourceVersion."""
    return msgspec.structs.replace(process, metadata=msgspec.structs.replace(process.metadata,
                                                                           resource_version=resource_version))


def writer(kc: KubeClient, tname: str, processes: list[Process], start: datetime = T0) -> TableStatusWriter:
    ticks = clock(start)
    return TableStatusWriter(kc, lambda: processes, table_name=tname, interval=0.01, now=lambda: next(ticks))


async def stored(kc: KubeClient, tname: str) -> dict[str, Any]:
    table = msgspec.json.decode(await kc.get(PROCESS_TABLES, tname))
    found: dict[str, Any] = (table.get("status") or {}).get("claims") or {}
    return found


async def test_the_holder_is_read_back_by_a_new_writer_and_kept(kc: KubeClient, tname: str) -> None:
    try:
        first = writer(kc, tname, [B, A])
        assert await first.flush()
        granted = await stored(kc, tname)
        assert granted == {KEY: {"holder": "ns/a", "pid": "a.1", "grantedAt": "2026-01-01T12:00:00Z", "priority": 0}}
        # a restart: a writer with no memory, an hour later, finds the same holder and writes nothing
        again = writer(kc, tname, [A, B], start=T0 + timedelta(hours=1))
        await again.flush()
        assert again.claim_writes == 0
        assert await stored(kc, tname) == granted
        # the holder leaves Running/Attested: the claim goes to the other bidder at once
        exiting = bidder("a", "2026-01-01T10:00:00Z", phase="Exiting")
        leaving = writer(kc, tname, [exiting, B], start=T0 + timedelta(hours=2))
        await leaving.flush()
        assert (await stored(kc, tname))[KEY]["holder"] == "ns/b"
        assert (await stored(kc, tname))[KEY]["grantedAt"] == "2026-01-01T14:00:00Z"
        # no bidder left: the key is vacated and `claims` left out
        gone = writer(kc, tname, [])
        await gone.flush()
        assert await stored(kc, tname) == {}
    finally:
        await kc.merge_patch(PROCESS_TABLES, tname, {"metadata": {"finalizers": None}})
        await kc.delete(PROCESS_TABLES, tname)


async def test_a_concurrent_claims_change_refuses_the_write_and_a_pid_bump_does_not(kc: KubeClient,
                                                                                      tname: str) -> None:
    try:
        w = writer(kc, tname, [A, B])
        await w.flush()  # a holds
        stale = await kc.get(PROCESS_TABLES, tname)
        # someone else moves the claim between our read and our write: our write must not clobber it
        hand = {"holder": "other/c", "pid": "c.1", "grantedAt": "2026-01-01T00:00:00Z", "priority": 9}
        await kc.merge_patch(PROCESS_TABLES, tname, {"status": {"claims": {KEY: hand}}}, subresource="status")
        assert not await w.arbitrate([B], stale, T0)
        assert (await stored(kc, tname))[KEY] == hand
        # a PID bump (spec) and a counts write (status) between the read and the write do not refuse it
        fresh = await kc.get(PROCESS_TABLES, tname)
        seq = msgspec.json.decode(fresh)["spec"]["nextSequence"]
        bump = [{"op": "replace", "path": "/spec/nextSequence", "value": seq + 1}]
        await kc.request("PATCH", PROCESS_TABLES.path(None, tname), body=msgspec.json.encode(bump),
                         content_type=JSON_PATCH)
        await kc.merge_patch(PROCESS_TABLES, tname, {"status": {"processCount": 7}}, subresource="status")
        assert await w.arbitrate([B], fresh, T0)
        assert (await stored(kc, tname))[KEY]["holder"] == "ns/b"
    finally:
        await kc.merge_patch(PROCESS_TABLES, tname, {"metadata": {"finalizers": None}})
        await kc.delete(PROCESS_TABLES, tname)


async def test_a_release_passes_the_claim_on_at_once_and_a_lagging_cache_does_not_give_it_back(
    kc: KubeClient, tname: str
) -> None:
    """docs/behaviour.md#handing-a-stable-name-over: the holder's step out of Running/Attested writes the
    claim to the next bidder before its own status write, and the writer's passes while the Process cache
    still shows it Attested (the status write not seen yet) keep it there."""
    try:
        cache = [A, B]
        ticks = clock(T0)
        w = TableStatusWriter(kc, lambda: cache, table_name=tname, interval=0.01, now=lambda: next(ticks))
        await w.flush()
        assert (await stored(kc, tname))[KEY]["holder"] == "ns/a"
        assert await w.release(A, ProcessPhase.EXITING)
        moved = (await stored(kc, tname))[KEY]
        assert moved["holder"] == "ns/b"
        # the cache still shows a Attested (same resourceVersion): a pass does not hand it back
        await w.flush()
        assert (await stored(kc, tname))[KEY] == moved
        # nothing names a any more: a second release writes nothing
        assert not await w.release(A, ProcessPhase.EXITING)
        # the cache shows a's next version still Attested: the executor's annotation write (a signal taken,
        # released-from) lands between the release and the phase write, so it is still leaving
        cache = [version_of(A, "2"), B]
        await w.flush()
        assert (await stored(kc, tname))[KEY] == moved
        # the cache shows the phase write (Exiting): no longer eligible, and no longer held out
        cache = [in_phase(version_of(A, "3"), ProcessPhase.EXITING), B]
        await w.flush()
        assert (await stored(kc, tname))[KEY] == moved
        # a later version of a back in Attested (a new life of the Process): a bidder as it stands again
        cache = [version_of(A, "4"), B]
        await w.flush()
        assert (await stored(kc, tname))[KEY]["holder"] == "ns/a"
    finally:
        await kc.merge_patch(PROCESS_TABLES, tname, {"metadata": {"finalizers": None}})
        await kc.delete(PROCESS_TABLES, tname)
