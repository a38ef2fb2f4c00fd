"""The Event recorder against a real API server: fields, aggregation of repeats, spam filter, RBAC denial."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, EVENTS, KubeClient
from shared.kube.events import (
    AGGREGATE_WINDOW,
    MAX_QUEUED,
    SENDERS,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    Event,
    EventRecorder,
    EventType,
)
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

CONTROLLER = "tatara-reconciler"
INSTANCE = "tatara-reconciler-0"


async def events_of(client: KubeClient, ns: str, name: str) -> list[dict[str, Any]]:
    raw = await client.list(EVENTS, ns, field_selector=f"involvedObject.name={name}")
    items: list[dict[str, Any]] = msgspec.json.decode(raw)["items"]
    return items


async def make_cm(client: KubeClient, ns: str, name: str) -> dict[str, Any]:
    created: dict[str, Any] = msgspec.json.decode(await client.create(CONFIG_MAPS, {"metadata": {"name": name}}, ns))
    return created


@pytest.fixture
def recorder(kclient: KubeClient) -> EventRecorder:
    return EventRecorder(kclient, CONTROLLER, INSTANCE)


async def test_an_event_appears_with_its_fields(kclient: KubeClient, ns: str, recorder: EventRecorder) -> None:
    cm = await make_cm(kclient, ns, "subject")
    before_ns = time.time_ns()
    await recorder.record(CONFIG_MAPS, cm, EventType.WARNING, "ForkFailed", "the image could not be pulled")
    [event] = await events_of(kclient, ns, "subject")
    meta = cm["metadata"]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": "subject",
                                       "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    assert (event["reason"], event["message"], event["type"]) == (
        "ForkFailed", "the image could not be pulled", "Warning")
    assert event["source"] == {"component": CONTROLLER}
    assert (event["reportingComponent"], event["reportingInstance"]) == (CONTROLLER, INSTANCE)
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"]
    name, _, suffix = event["metadata"]["name"].partition(".")
    assert name == "subject"
    assert int(suffix, 16) >= before_ns  # hex Unix nanoseconds, not before the call
    assert recorder.stats.created == 1


async def test_identical_records_fold_into_one_event_with_a_count(
    kclient: KubeClient, ns: str, recorder: EventRecorder
) -> None:
    cm = await make_cm(kclient, ns, "repeat")
    for _ in range(5):
        await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Reconverging", "spec changed")
    [event] = await events_of(kclient, ns, "repeat")
    assert event["count"] == 5
    assert event["lastTimestamp"] >= event["firstTimestamp"]  # RFC 3339 UTC text orders as time
    assert (recorder.stats.created, recorder.stats.aggregated) == (1, 4)


async def test_distinct_reasons_make_distinct_events(kclient: KubeClient, ns: str, recorder: EventRecorder) -> None:
    cm = await make_cm(kclient, ns, "many")
    for reason in ("Forking", "Execing", "Running"):
        await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, reason, "phase changed")
    await recorder.record(CONFIG_MAPS, cm, EventType.WARNING, "Running", "phase changed")
    events = await events_of(kclient, ns, "many")
    assert sorted((e["reason"], e["type"], e["count"]) for e in events) == [
        ("Execing", "Normal", 1), ("Forking", "Normal", 1), ("Running", "Normal", 1), ("Running", "Warning", 1)]


async def test_the_spam_filter_drops_records_past_the_burst(
    kclient: KubeClient, ns: str, recorder: EventRecorder
) -> None:
    cm = await make_cm(kclient, ns, "noisy")
    for i in range(SPAM_BURST + 3):
        await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", f"tick {i}")
    assert len(await events_of(kclient, ns, "noisy")) == SPAM_BURST
    assert (recorder.stats.created, recorder.stats.dropped) == (SPAM_BURST, 3)


class ManualClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_repeat_after_the_window_starts_a_new_event(kclient: KubeClient, ns: str) -> None:
    clock = ManualClock()
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE, monotonic=clock)
    cm = await make_cm(kclient, ns, "later")
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "same")
    clock.now += AGGREGATE_WINDOW
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "same")
    clock.now += AGGREGATE_WINDOW + 1
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "same")
    assert sorted(e["count"] for e in await events_of(kclient, ns, "later")) == [1, 2]


async def test_the_spam_filter_lets_one_more_through_per_refill_interval(kclient: KubeClient, ns: str) -> None:
    clock = ManualClock()
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE, monotonic=clock)
    cm = await make_cm(kclient, ns, "refill")
    for i in range(SPAM_BURST + 1):
        await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", f"tick {i}")
    clock.now += SPAM_REFILL_SECONDS
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "after refill")
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "too soon again")
    assert (recorder.stats.created, recorder.stats.dropped) == (SPAM_BURST + 1, 2)


async def test_a_repeat_of_a_deleted_event_recreates_it_with_the_count(
    kclient: KubeClient, ns: str, recorder: EventRecorder
) -> None:
    cm = await make_cm(kclient, ns, "expired")
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "same")
    [event] = await events_of(kclient, ns, "expired")
    await kclient.delete(EVENTS, event["metadata"]["name"], ns)  # as the API server's event TTL would
    await recorder.record(CONFIG_MAPS, cm, EventType.NORMAL, "Tick", "same")
    [again] = await events_of(kclient, ns, "expired")
    assert (again["metadata"]["name"], again["count"]) == (event["metadata"]["name"], 2)


@pytest.fixture
async def nobody(private_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    """A client authenticated as a user no RBAC rule grants anything."""
    client = await KubeClient.from_kubeconfig(private_plane.kubeconfig_for("tatara-test-nobody"))
    try:
        yield client
    finally:
        await client.close()


async def test_recording_denied_by_rbac_does_not_raise(kclient: KubeClient, nobody: KubeClient, ns: str) -> None:
    cm = await make_cm(kclient, ns, "denied")
    recorder = EventRecorder(nobody, CONTROLLER, INSTANCE)
    await recorder.record(CONFIG_MAPS, cm, EventType.WARNING, "Failed", "nobody may write this")
    assert recorder.stats.failed == 1
    assert await events_of(kclient, ns, "denied") == []


async def test_recording_on_an_object_without_a_name_does_not_raise(kclient: KubeClient) -> None:
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE)
    await recorder.record(CONFIG_MAPS, {"metadata": {}}, EventType.NORMAL, "Odd", "no name")
    assert recorder.stats.failed == 1


# ── background writing (the recorder as a manager runnable) ─────────────────────────────────


@asynccontextmanager
async def running(recorder: EventRecorder) -> AsyncIterator[None]:
    """``recorder.run()`` in the background from the moment its queue is open; cancelled on exit."""
    async def is_open() -> bool:
        return recorder._queue is not None

    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        await wait_for(is_open, what="the recorder's queue to open")
        yield
        tg.cancel_scope.cancel()


async def test_with_run_running_emit_queues_and_the_senders_write(kclient: KubeClient, ns: str) -> None:
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE)
    cm = await make_cm(kclient, ns, "queued")
    async with running(recorder):
        for reason in ("One", "Two", "Three"):
            await recorder.emit(CONFIG_MAPS, cm, Event.normal(reason, "queued"))

        async def written() -> bool:
            return {e["reason"] for e in await events_of(kclient, ns, "queued")} == {"One", "Two", "Three"}

        await wait_for(written, what="the three queued Events")
    assert recorder.stats.created == 3


async def test_what_is_queued_at_shutdown_is_still_written(kclient: KubeClient, ns: str) -> None:
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE)
    cm = await make_cm(kclient, ns, "flushed")
    async with running(recorder):
        for i in range(20):  # emit does not yield while it queues: all 20 wait when the run is cancelled
            await recorder.emit(CONFIG_MAPS, cm, Event.normal(f"Reason{i}", "at shutdown"))
    assert len(await events_of(kclient, ns, "flushed")) == 20


async def test_a_full_queue_drops_and_counts(kclient: KubeClient, ns: str) -> None:
    recorder = EventRecorder(kclient, CONTROLLER, INSTANCE)
    cm = await make_cm(kclient, ns, "overflow")
    async with running(recorder):
        # no checkpoint between emits: each waiting sender is handed one, MAX_QUEUED more wait, the rest drop
        for i in range(SENDERS + MAX_QUEUED + 5):
            await recorder.emit(CONFIG_MAPS, cm, Event.normal(f"R{i}", "overflow"))
        assert recorder.stats.dropped == 5
