"""The informer's initial state: a watch-list when the server serves one, the paginated LIST when it refuses one
(for good) or when the stream ends before its initial-events-end bookmark (for that sync), as client-go's
reflector decides (docs/runtime.md#informer). On the in-memory API server (tests/support/fake_api.py), which
serves watch-lists as kube-apiserver does; tests/integration/kube/test_informer_watch_list.py runs the same
paths on the real one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest
from anyio import wait_all_tasks_blocked

from shared.kube.client import CONFIG_MAPS, WatchEvent
from shared.kube.errors import Gone
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import ObjectMeta
from tests.support.fake_api import Call, FakeApi

pytestmark = pytest.mark.anyio


class ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


def seeded(api: FakeApi, *names: str) -> FakeApi:
    for name in names:
        api.seed(CONFIG_MAPS, {"metadata": {"name": name, "namespace": "ns"}, "data": {"n": name}})
    return api


async def synced(informer: Informer[ConfigMap]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.wait_synced()
        await wait_all_tasks_blocked()
        tg.cancel_scope.cancel()


async def test_the_initial_state_comes_from_a_watch_list_and_no_list_is_sent() -> None:
    api = seeded(FakeApi(), "a", "b")
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    await synced(informer)
    assert sorted(informer.keys()) == ["ns/a", "ns/b"]
    assert informer.synced_by == "watch-list"
    assert api.calls_of("list") == []
    (watch,) = api.calls_of("watch")  # the watch-list went on as the watch
    assert watch.options == {"resource_version": "", "label_selector": None, "send_initial_events": True}
    assert (informer.stats.watch_lists, informer.stats.lists, informer.stats.watch_list_fallbacks) == (1, 0, 0)


async def test_a_server_refusing_watch_lists_is_listed_and_not_asked_again() -> None:
    api = seeded(FakeApi(watch_list=False), "a")
    gone_once: list[Call] = []

    async def expire_the_first_plain_watch(call: Call) -> None:
        if call.verb == "watch" and "send_initial_events" not in call.options and not gone_once:
            gone_once.append(call)
            raise Gone(410, "Expired", "too old resource version")

    api.before.append(expire_the_first_plain_watch)
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    await synced(informer)
    assert informer.keys() == ["ns/a"]
    assert informer.synced_by == "list"
    assert not informer.watch_list
    # the resync after 410 Gone listed at once, without trying a watch-list again
    assert informer.stats.relists_after_gone == 1
    assert [c.options.get("send_initial_events", False) for c in api.calls_of("watch")] == [True, False, False]
    assert (informer.stats.lists, informer.stats.watch_list_fallbacks) == (2, 1)


class CutShort(FakeApi):
    """Ends the first watch-list after its first object, before the bookmark (a server timeout mid-way)."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = 0

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[WatchEvent]:  # type: ignore[override]
        async for event in super().watch(*args, **kwargs):
            if kwargs.get("send_initial_events") and self.cut == 0:
                self.cut += 1
                yield event
                return
            yield event


async def test_a_watch_list_ending_before_its_bookmark_falls_back_to_a_list_for_that_sync_only() -> None:
    api = seeded(CutShort(), "a", "b")
    seen: list[tuple[WatchEventType, str]] = []
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    informer.add_handler(lambda t, old, new: seen.append((t, new.metadata.name or "")))
    await synced(informer)
    assert sorted(informer.keys()) == ["ns/a", "ns/b"]
    assert informer.synced_by == "list"
    assert informer.watch_list  # the server serves them: the next sync tries again
    # the cut watch-list told the handlers nothing: each object once, by the LIST
    assert sorted(seen, key=lambda e: e[1]) == [(WatchEventType.ADDED, "a"), (WatchEventType.ADDED, "b")]
    assert (informer.stats.watch_list_fallbacks, informer.stats.lists, informer.stats.watch_lists) == (1, 1, 0)


class Held(FakeApi):
    """A watch-list whose events are released one by one by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.release: anyio.abc.ObjectSendStream[None]
        self._gate: anyio.abc.ObjectReceiveStream[None]
        self.release, self._gate = anyio.create_memory_object_stream[None](100)

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[WatchEvent]:  # type: ignore[override]
        async for event in super().watch(*args, **kwargs):
            await self._gate.receive()
            yield event


async def test_the_cache_is_replaced_at_the_bookmark_at_once_with_deletes_synthesized() -> None:
    api = seeded(Held(), "kept", "new")
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    # the cache as an earlier sync left it: "gone" was deleted while the informer was away, "kept" is older
    informer.store.replace([ConfigMap(ObjectMeta(name="gone", namespace="ns", resource_version="1")),
                            ConfigMap(ObjectMeta(name="kept", namespace="ns", resource_version="1"))])
    seen: list[tuple[WatchEventType, str]] = []
    informer.add_handler(lambda t, old, new: seen.append((t, new.metadata.name or "")))
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        for _ in range(2):  # both objects of the initial state arrive ...
            await api.release.send(None)
            await wait_all_tasks_blocked()
        assert (seen, sorted(informer.keys()), informer.has_synced) == ([], ["ns/gone", "ns/kept"], False)
        await api.release.send(None)  # ... then the bookmark: one replace
        await wait_all_tasks_blocked()
        assert informer.has_synced
        tg.cancel_scope.cancel()
    assert sorted(informer.keys()) == ["ns/kept", "ns/new"]
    assert sorted(seen, key=lambda e: e[1]) == [(WatchEventType.DELETED, "gone"), (WatchEventType.MODIFIED, "kept"),
                                                (WatchEventType.ADDED, "new")]
    assert informer.stats.synthesized_deletes == 1
    stored = informer.get("ns/kept")
    assert stored is not None
    assert stored.metadata.resource_version == api.object(CONFIG_MAPS, "kept", "ns")["metadata"]["resourceVersion"]


async def test_a_resync_after_a_broken_watch_asks_for_a_state_no_older_than_the_last_seen() -> None:
    api = seeded(FakeApi(), "a")
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    await synced(informer)
    last = informer.resource_version
    assert last
    informer._resync()  # what a broken stream does
    await synced(informer)
    assert [c.options["resource_version"] for c in api.calls_of("watch")] == ["", last]


async def test_410_on_a_watch_list_from_the_last_resource_version_restarts_it_from_a_consistent_read() -> None:
    api = seeded(FakeApi(), "a")

    async def expired(call: Call) -> None:
        if call.verb == "watch" and call.options.get("resource_version"):
            raise Gone(410, "Expired", "too old resource version")

    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    await synced(informer)
    last = informer.resource_version
    informer._resync()
    api.before.append(expired)
    await synced(informer)
    assert [c.options["resource_version"] for c in api.calls_of("watch")] == ["", last, ""]
    assert (informer.stats.relists_after_gone, informer.stats.watch_lists, informer.stats.lists) == (1, 2, 0)
