"""shared.kube.finalizer.finalize and shared.kube.live.decide_on_live against a real API server.

ConfigMaps stand for any object: a finalizer holds a ConfigMap's deletion like any other kind's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.controller import Result
from shared.kube.errors import NotFound
from shared.kube.finalizer import Apply, Cleanup, Outcome, finalize
from shared.kube.live import decide_on_live
from tests.integration.kube.conftest import ConfigMap

pytestmark = pytest.mark.anyio

OURS = "example.com/ours-finalizer"
OTHER = "example.com/other-finalizer"


async def create(client: KubeClient, ns: str, name: str, *finalizers: str) -> ConfigMap:
    body = {"metadata": {"name": name, "finalizers": list(finalizers)}, "data": {"v": "1"}}
    return msgspec.json.decode(await client.create(CONFIG_MAPS, body, ns), type=ConfigMap)


async def read(client: KubeClient, ns: str, name: str) -> ConfigMap:
    return msgspec.json.decode(await client.get(CONFIG_MAPS, name, ns), type=ConfigMap)


class Recorder:
    """A reconcile that records the events it was given and answers with a fixed ``released``."""

    def __init__(self, released: bool = False) -> None:
        self.released = released
        self.events: list[str] = []

    async def __call__(self, event: Apply[ConfigMap] | Cleanup[ConfigMap]) -> Outcome:
        self.events.append(type(event).__name__)
        return Outcome(Result.after(7.0), released=self.released)


@contextmanager
def counting(client: KubeClient) -> Iterator[list[str]]:
    seen: list[str] = []

    def observe(method: str, code: str, host: str) -> None:
        seen.append(method)

    client.on_response.append(observe)
    try:
        yield seen
    finally:
        client.on_response.remove(observe)


# ── finalize ──


async def test_a_live_object_gets_the_finalizer_before_it_is_applied(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "live", OTHER)
    reconcile = Recorder()
    result = await finalize(kclient, CONFIG_MAPS, OURS, cm, reconcile)
    assert reconcile.events == ["Apply"]
    assert result == Result.after(7.0), "the reconcile's own result is returned"
    assert (await read(kclient, ns, "live")).metadata.finalizers == [OTHER, OURS]


async def test_an_object_that_needs_no_finalizer_is_applied_without_one(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "not-needed")
    reconcile = Recorder()
    await finalize(kclient, CONFIG_MAPS, OURS, cm, reconcile, needed=lambda _: False)
    assert reconcile.events == ["Apply"]
    assert (await read(kclient, ns, "not-needed")).metadata.finalizers == []


async def test_a_live_object_released_by_its_reconcile_loses_the_finalizer(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "done", OURS, OTHER)
    await finalize(kclient, CONFIG_MAPS, OURS, cm, Recorder(released=True), needed=lambda _: False)
    assert (await read(kclient, ns, "done")).metadata.finalizers == [OTHER]


async def test_a_deleting_object_is_cleaned_up_and_kept_until_released(kclient: KubeClient, ns: str) -> None:
    await create(kclient, ns, "dying", OURS)
    await kclient.delete(CONFIG_MAPS, "dying", ns)
    deleting = await read(kclient, ns, "dying")
    assert deleting.metadata.deletion_timestamp is not None

    busy = Recorder(released=False)
    await finalize(kclient, CONFIG_MAPS, OURS, deleting, busy)
    assert busy.events == ["Cleanup"]
    assert (await read(kclient, ns, "dying")).metadata.finalizers == [OURS], "cleanup not finished: still held"

    done = Recorder(released=True)
    await finalize(kclient, CONFIG_MAPS, OURS, await read(kclient, ns, "dying"), done)
    assert done.events == ["Cleanup"]
    with pytest.raises(NotFound):
        await read(kclient, ns, "dying")


async def test_a_deleting_object_without_our_finalizer_is_not_reconciled(kclient: KubeClient, ns: str) -> None:
    await create(kclient, ns, "theirs", OTHER)
    await kclient.delete(CONFIG_MAPS, "theirs", ns)
    reconcile, deleting = Recorder(released=True), await read(kclient, ns, "theirs")
    with counting(kclient) as seen:
        result = await finalize(kclient, CONFIG_MAPS, OURS, deleting, reconcile)
    assert (reconcile.events, seen, result) == ([], [], Result.done())
    assert (await read(kclient, ns, "theirs")).metadata.finalizers == [OTHER], "another controller's finalizer stays"


async def test_no_finalizer_is_added_to_an_object_deleted_after_it_was_cached(kclient: KubeClient, ns: str) -> None:
    stale = await create(kclient, ns, "raced", OTHER)
    await kclient.delete(CONFIG_MAPS, "raced", ns)
    reconcile = Recorder()
    result = await finalize(kclient, CONFIG_MAPS, OURS, stale, reconcile)
    assert (await read(kclient, ns, "raced")).metadata.finalizers == [OTHER], "the API server forbids it; we do not try"
    assert reconcile.events == [], "the stale live copy must not be applied: the object is being deleted"
    assert result == Result.done()


async def test_an_object_gone_since_it_was_cached_is_not_applied(kclient: KubeClient, ns: str) -> None:
    stale = await create(kclient, ns, "vanished")
    await kclient.delete(CONFIG_MAPS, "vanished", ns)
    reconcile = Recorder()
    result = await finalize(kclient, CONFIG_MAPS, OURS, stale, reconcile)
    assert reconcile.events == []
    assert result == Result.done()


# ── decide_on_live ──


def decode(raw: bytes) -> ConfigMap:
    return msgspec.json.decode(raw, type=ConfigMap)


def value_of(cm: ConfigMap) -> str:
    return cm.data.get("v", "")


async def test_a_decision_that_needs_no_live_read_sends_no_request(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "cached")
    with counting(kclient) as seen:
        basis = await decide_on_live(kclient, CONFIG_MAPS, cm, value_of, needs_live=lambda _: False, decode=decode)
    assert seen == []
    assert basis is not None
    assert (basis.obj, basis.decision, basis.live) == (cm, "1", False)


async def test_a_current_cache_is_confirmed_with_one_get(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "current")
    with counting(kclient) as seen:
        basis = await decide_on_live(kclient, CONFIG_MAPS, cm, value_of, needs_live=lambda _: True, decode=decode)
    assert seen == ["GET"]
    assert basis is not None
    assert (basis.obj, basis.decision, basis.live) == (cm, "1", True)


async def test_a_stale_cache_is_decided_again_on_the_live_object(kclient: KubeClient, ns: str) -> None:
    stale = await create(kclient, ns, "moved")
    await kclient.merge_patch(CONFIG_MAPS, "moved", {"data": {"v": "2"}}, ns)
    decided: list[str] = []

    def decide(cm: ConfigMap) -> str:
        decided.append(value_of(cm))
        return value_of(cm)

    basis = await decide_on_live(kclient, CONFIG_MAPS, stale, decide, needs_live=lambda d: d == "1", decode=decode)
    assert decided == ["1", "2"]
    assert basis is not None
    assert (basis.decision, basis.live) == ("2", True)
    live = await read(kclient, ns, "moved")
    assert basis.obj.metadata.resource_version == live.metadata.resource_version, "the guard is the live version"


async def test_an_object_gone_since_it_was_cached_gives_no_basis(kclient: KubeClient, ns: str) -> None:
    cm = await create(kclient, ns, "gone")
    await kclient.delete(CONFIG_MAPS, "gone", ns)
    assert await decide_on_live(kclient, CONFIG_MAPS, cm, value_of, needs_live=lambda _: True, decode=decode) is None
