"""KubeClient's connections (docs/runtime.md#http) against a real API server: a closed client opens new ones
on its next request, and a watch in flight when the client closes ends as a broken watch, not a hang."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient, WatchBroken
from shared.kube.meta import ObjectMeta
from tools.controlplane import LocalControlPlane

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class _Named(msgspec.Struct):
    metadata: ObjectMeta


async def test_a_closed_client_opens_new_connections_on_its_next_request(private_plane: LocalControlPlane) -> None:
    client = await KubeClient.from_kubeconfig(private_plane.kubeconfig)
    try:
        before = msgspec.json.decode(await client.get(NAMESPACES, "default"), type=_Named)
        await client.close()
        after = msgspec.json.decode(await client.get(NAMESPACES, "default"), type=_Named)
    finally:
        await client.close()
    assert before.metadata.uid == after.metadata.uid


async def test_closing_the_client_breaks_a_watch_in_flight(kclient: KubeClient, ns: str) -> None:
    first_event = anyio.Event()
    ended: list[WatchBroken] = []

    async def watch() -> None:
        try:
            async for _event in kclient.watch(CONFIG_MAPS, ns, resource_version="", timeout_seconds=300,
                                              inactivity_timeout=300, send_initial_events=True):
                first_event.set()  # the initial-events-end bookmark at least
        except WatchBroken as err:
            ended.append(err)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await first_event.wait()
            await kclient.close()
    assert len(ended) == 1
    assert ended[0].status == 0
