"""The informer against a real API server: list+watch, restarts, 410 relists, stalled watches (the initial
state's two paths, watch-list and LIST: test_informer_watch_list.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import anyio
import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import ObjectMeta
from shared.kube.ratelimit import Backoff
from tests.integration.kube.conftest import ConfigMap
from tests.support.kube import install_crds, wait_for, widget_crd
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio


class _List(msgspec.Struct):
    items: list[ConfigMap]


async def fresh_list(client: KubeClient, namespace: str) -> dict[str, str]:
    """name → resourceVersion from a LIST made now, independent of the informer."""
    page = msgspec.json.decode(await client.list(CONFIG_MAPS, namespace), type=_List)
    return {cm.metadata.name or "": cm.metadata.resource_version or "" for cm in page.items}


def cached(informer: Informer[ConfigMap]) -> dict[str, str]:
    return {cm.metadata.name or "": cm.metadata.resource_version or "" for cm in informer.objects()}


async def converged(client: KubeClient, informer: Informer[ConfigMap], namespace: str) -> None:
    async def same() -> bool:
        return cached(informer) == await fresh_list(client, namespace)

    await wait_for(same, timeout=30, what="informer cache to equal a fresh LIST")


@asynccontextmanager
async def running(informer: Informer[ConfigMap]) -> AsyncIterator[Informer[ConfigMap]]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(30):
            await informer.wait_synced()
        yield informer
        tg.cancel_scope.cancel()


async def cm(client: KubeClient, namespace: str, name: str, **data: str) -> None:
    await client.create(CONFIG_MAPS, {"metadata": {"name": name}, "data": data}, namespace)


@pytest.mark.parametrize("watch_list", [True, False], ids=["by watch-list", "by LIST"])
async def test_lists_then_watches_adds_updates_and_deletes(kclient: KubeClient, ns: str, watch_list: bool) -> None:
    for i in range(3):
        await cm(kclient, ns, f"pre-{i}")
    events: list[tuple[WatchEventType, str]] = []
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns, page_size=2, watch_list=watch_list)
    informer.add_handler(lambda t, old, new: events.append((t, new.metadata.name or "")))
    async with running(informer):
        assert sorted(informer.keys()) == [f"{ns}/pre-0", f"{ns}/pre-1", f"{ns}/pre-2"]
        await cm(kclient, ns, "later", colour="red")
        await kclient.merge_patch(CONFIG_MAPS, "pre-0", {"data": {"x": "1"}}, ns)
        await kclient.delete(CONFIG_MAPS, "pre-1", ns)
        await converged(kclient, informer, ns)
        assert informer.get(f"{ns}/later") is not None
        assert informer.get(f"{ns}/later").data == {"colour": "red"}  # type: ignore[union-attr]
    assert (informer.stats.lists, informer.stats.watch_lists) == ((0, 1) if watch_list else (1, 0))
    assert (WatchEventType.ADDED, "later") in events
    assert (WatchEventType.MODIFIED, "pre-0") in events
    assert (WatchEventType.DELETED, "pre-1") in events


async def test_indexer_files_objects_by_a_label(kclient: KubeClient, ns: str) -> None:
    await kclient.create(CONFIG_MAPS, {"metadata": {"name": "a", "labels": {"team": "x"}}}, ns)
    await kclient.create(CONFIG_MAPS, {"metadata": {"name": "b", "labels": {"team": "y"}}}, ns)
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    informer.add_indexer("team", lambda o: [o.metadata.labels["team"]] if "team" in o.metadata.labels else [])
    async with running(informer):
        assert [o.metadata.name for o in informer.by_index("team", "x")] == ["a"]
        await kclient.merge_patch(CONFIG_MAPS, "b", {"metadata": {"labels": {"team": "x"}}}, ns)

        async def both_in_x() -> bool:
            return [o.metadata.name for o in informer.by_index("team", "x")] == ["a", "b"]

        await wait_for(both_in_x, what="b re-indexed under team=x")
        assert informer.by_index("team", "y") == []


async def test_restarting_the_apiserver_mid_watch_loses_no_event(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str
) -> None:
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    async with running(informer):
        await cm(kclient, ns, "before")
        await anyio.to_thread.run_sync(private_plane.restart_apiserver)
        await cm(kclient, ns, "after")
        await kclient.merge_patch(CONFIG_MAPS, "before", {"data": {"k": "v"}}, ns)
        await converged(kclient, informer, ns)
        assert informer.stats.watches >= 2


async def test_an_expired_resource_version_relists_and_synthesizes_deletes(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str
) -> None:
    for name in ("keep", "doomed"):
        await cm(kclient, ns, name)
    deleted: list[str] = []
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    informer.add_handler(
        lambda t, old, new: deleted.append(new.metadata.name or "") if t is WatchEventType.DELETED else None)
    async with running(informer):
        pass  # synced; the informer is now stopped with a resourceVersion in hand
    await kclient.delete(CONFIG_MAPS, "doomed", ns)
    for i in range(5):
        await cm(kclient, ns, f"churn-{i}")
    await anyio.to_thread.run_sync(private_plane.restart_apiserver)
    await anyio.to_thread.run_sync(private_plane.compact_etcd)
    async with running(informer):
        await converged(kclient, informer, ns)
    assert informer.stats.relists_after_gone >= 1
    assert deleted == ["doomed"]
    assert informer.stats.synthesized_deletes == 1


@pytest.mark.parametrize("watch_list", [True, False], ids=["by watch-list", "by LIST"])
async def test_a_resync_keeps_the_cached_objects_whose_resource_version_did_not_change(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str, watch_list: bool
) -> None:
    for name in ("keep-a", "keep-b", "changed"):
        await cm(kclient, ns, name)
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns, watch_list=watch_list)
    async with running(informer):
        await converged(kclient, informer, ns)
    before = {cm.metadata.name: cm for cm in informer.objects()}
    await kclient.merge_patch(CONFIG_MAPS, "changed", {"data": {"k": "v"}}, ns)
    await anyio.to_thread.run_sync(private_plane.restart_apiserver)
    await anyio.to_thread.run_sync(private_plane.compact_etcd)  # the informer's resourceVersion is gone: a resync
    async with running(informer):
        await converged(kclient, informer, ns)
    after = {cm.metadata.name: cm for cm in informer.objects()}
    assert informer.stats.relists_after_gone >= 1
    assert after["keep-a"] is before["keep-a"]
    assert after["keep-b"] is before["keep-b"]
    assert after["changed"] is not before["changed"]
    assert after["changed"].data == {"k": "v"}
    assert informer.stats.resync_reused >= 2  # each resync reuses the two unchanged ones


async def test_a_stalled_watch_is_detected_and_restarted(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str
) -> None:
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns, inactivity_timeout=1.0)
    async with running(informer):
        with private_plane.apiserver_paused():
            await wait_for(lambda: _true_if(informer.stats.stalls >= 1), timeout=30, what="stall detection")
        await cm(kclient, ns, "after-stall")
        await converged(kclient, informer, ns)


async def test_an_idle_watch_on_an_empty_resource_is_ended_by_the_server_not_reported_stalled(
    kclient: KubeClient, ns: str
) -> None:
    # a fresh namespace of this control plane (no controller-manager) holds no ConfigMap, and the API
    # server sends no bookmark on it: only the server's timeoutSeconds (here 2-3 s) ends each watch
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns, min_watch_timeout=2)
    async with running(informer):
        assert len(informer) == 0
        await wait_for(lambda: _true_if(informer.stats.watches >= 3), timeout=60,
                       what="two watches ended by the server and a third started")
    assert informer.stats.stalls == 0
    assert informer.stats.errors == 0
    # one sync (a watch-list, which ends with a bookmark even on an empty resource); each watch resumed from it
    assert (informer.stats.lists, informer.stats.watch_lists) == (0, 1)


async def _true_if(condition: bool) -> bool:
    return condition


class DigitsOnly(msgspec.Struct):
    """A type stricter than the API server: data values must be digits."""

    metadata: ObjectMeta
    data: dict[str, Annotated[str, msgspec.Meta(pattern="^[0-9]+$")]] = {}


async def test_an_object_that_does_not_decode_is_skipped_not_fatal(kclient: KubeClient, ns: str) -> None:
    await cm(kclient, ns, "good-1", n="1")
    await cm(kclient, ns, "bad", n="not digits")
    rejected: list[bytes] = []
    informer = Informer(kclient, CONFIG_MAPS, DigitsOnly, namespace=ns)
    informer.on_decode_error = lambda raw, err: rejected.append(raw)
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(30):
            await informer.wait_synced()
        await cm(kclient, ns, "good-2", n="2")
        await cm(kclient, ns, "bad-2", n="x")
        await wait_for(lambda: _true_if(informer.get(f"{ns}/good-2") is not None and informer.stats.decode_errors == 2),
                       what="the watch to deliver good-2 past bad-2")
        tg.cancel_scope.cancel()
    assert sorted(informer.keys()) == [f"{ns}/good-1", f"{ns}/good-2"]
    assert [msgspec.json.decode(r)["metadata"]["name"] for r in rejected] == ["bad", "bad-2"]


@pytest.mark.parametrize(
    "error",
    [ValueError("a domain rule refused it"), msgspec.DecodeError("not JSON the decoder takes"),
     RecursionError("maximum recursion depth exceeded")],
    ids=["a ValueError", "a msgspec DecodeError", "a RecursionError from deep nesting"],
)
async def test_a_decoder_refusing_an_object_skips_it(kclient: KubeClient, ns: str, error: Exception) -> None:
    await cm(kclient, ns, "good", n="1")
    await cm(kclient, ns, "refused", n="boom")
    plain = msgspec.json.Decoder(ConfigMap)

    def decoder(raw: bytes) -> ConfigMap:
        obj = plain.decode(raw)
        if obj.data.get("n") == "boom":
            raise error
        return obj

    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns, decoder=decoder)
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(30):
            await informer.wait_synced()
        tg.cancel_scope.cancel()
    assert (informer.keys(), informer.stats.decode_errors) == ([f"{ns}/good"], 1)


async def test_an_event_larger_than_half_a_mebibyte_is_delivered(kclient: KubeClient, ns: str) -> None:
    big = "x" * 700_000  # > 512 KiB (a common line limit, aiohttp's readline default), < etcd's 1.5 MiB limit
    informer = Informer(kclient, CONFIG_MAPS, ConfigMap, namespace=ns)
    async with running(informer):
        await cm(kclient, ns, "big", blob=big)
        await converged(kclient, informer, ns)
        stored = informer.get(f"{ns}/big")
        assert stored is not None
        assert len(stored.data["blob"]) == 700_000
    assert informer.stats.errors == 0


async def test_a_resource_that_is_not_served_syncs_empty_and_appears_when_installed(
    private_plane: LocalControlPlane, kclient: KubeClient, ns: str
) -> None:
    gadgets, crd = widget_crd("gadgets.tatara.test")
    informer = Informer(kclient, gadgets, ConfigMap, namespace=ns, backoff=Backoff(initial=0.05, cap=0.2))
    async with running(informer):
        assert informer.has_synced
        assert len(informer) == 0
        await anyio.to_thread.run_sync(install_crds, private_plane.kubeconfig, [crd])
        await kclient.create(gadgets, {"apiVersion": "gadgets.tatara.test/v1", "kind": "Widget",
                                       "metadata": {"name": "g"}}, ns)
        await wait_for(lambda: _true_if(informer.get(f"{ns}/g") is not None), timeout=30,
                       what="the new kind's object in the cache")
