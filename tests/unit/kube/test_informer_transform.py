"""The informer's transform (client-go's SetTransform): applied to every object before it is cached, by the
initial sync and by the watch; the default drops kubectl's last-applied annotation and nothing else."""

from __future__ import annotations

import json

import anyio
import msgspec
import pytest
from anyio import wait_all_tasks_blocked

from shared.kube.client import CONFIG_MAPS
from shared.kube.informer import LAST_APPLIED, Informer
from tests.support.fake_api import FakeApi
from tests.unit.kube.test_informer_watch_list import ConfigMap

pytestmark = pytest.mark.anyio


def applied(name: str) -> dict[str, object]:
    """A ConfigMap as ``kubectl apply`` leaves it: its own JSON in the last-applied annotation."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"},
            "data": {"k": "v" * 100}}
    meta = {**body["metadata"], "annotations": {LAST_APPLIED: json.dumps(body), "team": "a"}}  # type: ignore[dict-item]
    return {**body, "metadata": meta}


async def run_until_blocked(informer: Informer[ConfigMap], api: FakeApi, later: str) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        await informer.wait_synced()
        await api.create(CONFIG_MAPS, applied(later), "ns")  # delivered by the watch
        await wait_all_tasks_blocked()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("watch_list", [True, False], ids=["watch-list", "LIST"])
async def test_the_default_transform_drops_the_last_applied_annotation_only(watch_list: bool) -> None:
    api = FakeApi()
    api.seed(CONFIG_MAPS, applied("first"))
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns", watch_list=watch_list)
    await run_until_blocked(informer, api, "second")
    for key in ("ns/first", "ns/second"):
        cached = informer.get(key)
        assert cached is not None
        assert cached.metadata.annotations == {"team": "a"}
        assert cached.data == {"k": "v" * 100}


async def test_without_a_transform_objects_are_cached_as_decoded() -> None:
    api = FakeApi()
    api.seed(CONFIG_MAPS, applied("first"))
    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns", transform=None)
    await run_until_blocked(informer, api, "second")
    cached = informer.get("ns/second")
    assert cached is not None
    assert json.loads(cached.metadata.annotations[LAST_APPLIED])["metadata"]["name"] == "second"


async def test_a_transform_of_ones_own_sees_every_object() -> None:
    api = FakeApi()
    api.seed(CONFIG_MAPS, applied("first"))
    seen: list[str] = []

    def mark(obj: ConfigMap) -> ConfigMap:
        seen.append(obj.metadata.name or "")
        return msgspec.structs.replace(obj, data={"marked": "yes"})

    informer = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns", transform=mark)
    await run_until_blocked(informer, api, "second")
    assert seen == ["first", "second"]
    assert [o.data for o in informer.objects()] == [{"marked": "yes"}] * 2
