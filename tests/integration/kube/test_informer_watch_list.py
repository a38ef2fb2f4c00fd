"""The informer's initial state on a real API server (docs/runtime.md#informer): a watch-list on v1.36 as it
serves them by default, the paginated LIST on one started with the WatchList feature gate off, and 410 Gone
on the resume restarting the sync. Which path ran is read from the requests the informer's own client sent
(the ``on_response`` callback sees each request's method: ``GET`` for a LIST page, ``WATCH`` for a watch), not
from the informer's counters alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient
from shared.kube.informer import Informer, WatchEventType
from tests.integration.kube.conftest import ConfigMap
from tests.integration.kube.test_informer import cm, converged, fresh_list, running
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def no_watch_list_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """A kube-apiserver without the WatchList feature: it refuses ``sendInitialEvents`` on a watch."""
    plane = LocalControlPlane(controller_manager=False, work_dir=Path(tmp_path_factory.mktemp("plane")),
                              apiserver_flags=("--feature-gates=WatchList=false",))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def requests_of(client: KubeClient) -> list[tuple[str, str]]:
    """The (method, status code) of every response ``client`` gets from now on."""
    sent: list[tuple[str, str]] = []
    client.on_response.append(lambda method, code, _host: sent.append((method, code)))
    return sent


async def test_v1_36_streams_the_initial_state_with_a_watch_list_and_no_list(
        kclient: KubeClient, ns: str, private_plane: LocalControlPlane) -> None:
    for i in range(7):
        await cm(kclient, ns, f"pre-{i}", n=str(i))
    events: list[tuple[WatchEventType, str]] = []
    async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
        sent = requests_of(client)
        informer = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns, page_size=2)
        informer.add_handler(lambda t, old, new: events.append((t, new.metadata.name or "")))
        async with running(informer):
            assert {cm.metadata.name: cm.data for cm in informer.objects()} == {
                f"pre-{i}": {"n": str(i)} for i in range(7)}
            assert sent == [("WATCH", "200")]  # one watch-list, no LIST page
            await cm(kclient, ns, "later")
            await kclient.delete(CONFIG_MAPS, "pre-0", ns)
            await converged(kclient, informer, ns)
            assert sent == [("WATCH", "200")]  # the same stream went on as the watch
    assert informer.synced_by == "watch-list"
    assert (informer.stats.watch_lists, informer.stats.lists, informer.stats.watch_list_fallbacks) == (1, 0, 0)
    assert sorted(events[:7]) == [(WatchEventType.ADDED, f"pre-{i}") for i in range(7)]
    assert events[7:] == [(WatchEventType.ADDED, "later"), (WatchEventType.DELETED, "pre-0")]


async def test_without_the_feature_the_server_refuses_and_the_informer_lists(
        no_watch_list_plane: LocalControlPlane) -> None:
    async with await KubeClient.from_kubeconfig(no_watch_list_plane.kubeconfig) as admin, \
            await KubeClient.from_kubeconfig(no_watch_list_plane.kubeconfig) as client:
        ns = "fallback"
        await admin.create(NAMESPACES, {"metadata": {"name": ns}})
        for i in range(5):
            await cm(admin, ns, f"pre-{i}")
        sent = requests_of(client)
        informer = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns, page_size=2)
        async with running(informer):
            assert sorted(informer.keys()) == [f"{ns}/pre-{i}" for i in range(5)]
            await cm(admin, ns, "later")
            await converged(admin, informer, ns)
        (refused_code,) = {code for method, code in sent[:1]}
        assert refused_code in ("400", "422"), sent
        # then three LIST pages of two, and the watch from the list's resourceVersion
        assert sent[1:] == [("GET", "200")] * 3 + [("WATCH", "200")], sent
    assert informer.synced_by == "list"
    assert not informer.watch_list
    assert (informer.stats.watch_lists, informer.stats.lists, informer.stats.watch_list_fallbacks) == (0, 1, 1)


async def test_watch_list_off_lists_on_a_server_that_serves_them(kclient: KubeClient, ns: str,
                                                                 private_plane: LocalControlPlane) -> None:
    await cm(kclient, ns, "a")
    async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
        sent = requests_of(client)
        informer = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns, watch_list=False)
        async with running(informer):
            assert informer.keys() == [f"{ns}/a"]
            await cm(kclient, ns, "b")
            await converged(kclient, informer, ns)  # by the watch
        assert sent == [("GET", "200"), ("WATCH", "200")]
    assert informer.synced_by == "list"


async def test_410_on_the_resume_restarts_the_watch_list_and_synthesizes_deletes(
        private_plane: LocalControlPlane, kclient: KubeClient, ns: str) -> None:
    for name in ("keep", "doomed"):
        await cm(kclient, ns, name)
    deleted: list[str] = []
    async with await KubeClient.from_kubeconfig(private_plane.kubeconfig) as client:
        sent = requests_of(client)
        informer = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns)
        informer.add_handler(
            lambda t, old, new: deleted.append(new.metadata.name or "") if t is WatchEventType.DELETED else None)
        async with running(informer):
            pass  # synced by a watch-list; stopped with its resourceVersion in hand
        await kclient.delete(CONFIG_MAPS, "doomed", ns)
        for i in range(5):
            await cm(kclient, ns, f"churn-{i}")
        await anyio.to_thread.run_sync(private_plane.restart_apiserver)  # a fresh watch cache ...
        await anyio.to_thread.run_sync(private_plane.compact_etcd)  # ... and etcd past the informer's version
        sent.clear()
        async with running(informer):
            await converged(kclient, informer, ns)
    assert informer.stats.relists_after_gone >= 1
    assert deleted == ["doomed"]
    assert informer.stats.synthesized_deletes == 1
    assert informer.synced_by == "watch-list"
    assert ("GET", "200") not in sent  # the resync after 410 was a watch-list too
    assert sorted(cm.metadata.name or "" for cm in informer.objects()) == sorted(
        (await fresh_list(kclient, ns)).keys())
