"""The write helpers against a real API server: finalizer races, status-only writes, no-op writes send nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any

import anyio
import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, CUSTOM_RESOURCE_DEFINITIONS, KubeClient, Resource
from shared.kube.errors import Conflict, NotFound, TooManyRequests
from shared.kube.finalizer import add_finalizer, remove_finalizer
from shared.kube.meta import ObjectRef
from shared.kube.patch import apply, get_or_create, patch_annotations, patch_status
from tests.support.kube import wait_for, widget_crd

pytestmark = pytest.mark.anyio

OTHER = "example.com/other-controller"
OURS = "example.com/ours-finalizer"
RACES = 15
"""Rounds per race test; each round is a fresh object read once (stale) by every racer."""

WIDGETS, WIDGET_CRD = widget_crd("patchtest.tatara.io")


def decode(raw: bytes) -> dict[str, Any]:
    value: dict[str, Any] = msgspec.json.decode(raw)
    return value


async def read(client: KubeClient, resource: Resource, ns: str, name: str) -> dict[str, Any]:
    return decode(await client.get(resource, name, ns))


async def make_cm(client: KubeClient, ns: str, name: str, **metadata: Any) -> dict[str, Any]:
    return decode(await client.create(CONFIG_MAPS, {"metadata": {"name": name, **metadata}}, ns))


@contextmanager
def counting(client: KubeClient, *, codes: bool = False) -> Iterator[list[str]]:
    """Methods (or ``METHOD code``) of every response the client gets while inside (KubeClient.on_response)."""
    seen: list[str] = []

    def observe(method: str, code: str, host: str) -> None:
        seen.append(f"{method} {code}" if codes else method)

    client.on_response.append(observe)
    try:
        yield seen
    finally:
        client.on_response.remove(observe)


# ── annotations ──


async def test_annotations_are_set_and_stripped_and_other_keys_kept(kclient: KubeClient, ns: str) -> None:
    cm = await make_cm(kclient, ns, "ann", annotations={"keep": "me", "drop": "me"})
    await patch_annotations(kclient, CONFIG_MAPS, cm, {"new": "1", "drop": None})
    assert (await read(kclient, CONFIG_MAPS, ns, "ann"))["metadata"]["annotations"] == {"keep": "me", "new": "1"}


async def test_annotations_already_present_send_no_request(kclient: KubeClient, ns: str) -> None:
    cm = await make_cm(kclient, ns, "ann-noop", annotations={"a": "1"})
    with counting(kclient) as seen:
        assert await patch_annotations(kclient, CONFIG_MAPS, cm, {"a": "1", "absent": None}) is None
    assert seen == []


async def test_annotations_by_reference_are_always_sent(kclient: KubeClient, ns: str) -> None:
    await make_cm(kclient, ns, "ann-ref")
    with counting(kclient) as seen:
        await patch_annotations(kclient, CONFIG_MAPS, ObjectRef(ns, "ann-ref"), {"a": "1"})
    assert seen == ["PATCH"]
    assert (await read(kclient, CONFIG_MAPS, ns, "ann-ref"))["metadata"]["annotations"] == {"a": "1"}


# ── finalizers ──


@pytest.mark.parametrize("racers", [2, 4], ids=["two controllers", "four controllers"])
async def test_controllers_racing_to_add_finalizers_all_survive(kclient: KubeClient, ns: str, racers: int) -> None:
    keys = [f"example.com/controller-{i}" for i in range(racers)]
    for round_ in range(RACES):
        name = f"race-add-{racers}-{round_}"
        stale = await make_cm(kclient, ns, name)
        with counting(kclient, codes=True) as seen:
            async with anyio.create_task_group() as tg:
                for key in keys:
                    tg.start_soon(partial(add_finalizer, current=stale), kclient, CONFIG_MAPS, ns, name, key)
        # every racer patched the same stale version, so all but one were refused with 409 at least once
        assert seen.count("PATCH 409") >= racers - 1, seen
        finalizers = (await read(kclient, CONFIG_MAPS, ns, name))["metadata"]["finalizers"]
        assert sorted(finalizers) == sorted(keys), f"round {round_}"


async def test_a_remove_racing_an_add_keeps_the_added_finalizer(kclient: KubeClient, ns: str) -> None:
    for round_ in range(RACES):
        name = f"race-mixed-{round_}"
        stale = await make_cm(kclient, ns, name, finalizers=[OURS])
        with counting(kclient, codes=True) as seen:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(remove_finalizer, current=stale), kclient, CONFIG_MAPS, ns, name, OURS)
                tg.start_soon(partial(add_finalizer, current=stale), kclient, CONFIG_MAPS, ns, name, OTHER)
        assert seen.count("PATCH 409") >= 1, seen
        assert (await read(kclient, CONFIG_MAPS, ns, name))["metadata"]["finalizers"] == [OTHER], f"round {round_}"


async def test_removing_with_a_stale_copy_keeps_a_finalizer_added_since(kclient: KubeClient, ns: str) -> None:
    stale = await make_cm(kclient, ns, "stale-remove", finalizers=[OURS])
    assert await add_finalizer(kclient, CONFIG_MAPS, ns, "stale-remove", OTHER)
    with counting(kclient) as seen:
        assert await remove_finalizer(kclient, CONFIG_MAPS, ns, "stale-remove", OURS, current=stale)
    assert seen == ["PATCH", "GET", "PATCH"]  # 409 on the stale version, re-read, retried
    assert (await read(kclient, CONFIG_MAPS, ns, "stale-remove"))["metadata"]["finalizers"] == [OTHER]


@pytest.mark.parametrize(
    ("initial", "write"),
    [([OURS], add_finalizer), ([OTHER], remove_finalizer)],
    ids=["adding a present finalizer", "removing an absent finalizer"],
)
async def test_a_finalizer_no_op_sends_no_request(kclient: KubeClient, ns: str, initial: list[str], write: Any) -> None:
    cm = await make_cm(kclient, ns, "fin-noop", finalizers=initial)
    with counting(kclient) as seen:
        assert await write(kclient, CONFIG_MAPS, ns, "fin-noop", OURS, current=cm) is False
    assert seen == []
    assert (await read(kclient, CONFIG_MAPS, ns, "fin-noop"))["metadata"]["finalizers"] == initial


async def test_a_deleting_object_gets_no_new_finalizer_and_goes_when_the_last_is_removed(
    kclient: KubeClient, ns: str
) -> None:
    await make_cm(kclient, ns, "dying", finalizers=[OURS])
    await kclient.delete(CONFIG_MAPS, "dying", ns)
    with counting(kclient) as seen:
        assert await add_finalizer(kclient, CONFIG_MAPS, ns, "dying", OTHER) is False
    assert seen == ["GET"]
    assert await remove_finalizer(kclient, CONFIG_MAPS, ns, "dying", OURS)

    async def gone() -> bool:
        try:
            await kclient.get(CONFIG_MAPS, "dying", ns)
        except NotFound:
            return True
        return False

    await wait_for(gone, timeout=10, what="the object to be deleted after its last finalizer went")
    assert await remove_finalizer(kclient, CONFIG_MAPS, ns, "dying", OURS) is False


# ── status ──


@pytest.fixture
async def widgets(kclient: KubeClient) -> Resource:
    with suppress(Conflict):  # already installed by an earlier test of this module
        await kclient.create(CUSTOM_RESOURCE_DEFINITIONS, WIDGET_CRD)

    async def established() -> bool:
        crd = decode(await kclient.get(CUSTOM_RESOURCE_DEFINITIONS, "widgets.patchtest.tatara.io"))
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    await wait_for(established, timeout=30, what="the Widget CRD to be established")

    async def served() -> bool:
        try:
            await kclient.list(WIDGETS, "default")
        except (NotFound, TooManyRequests):  # 429 "storage is (re)initializing" right after Established
            return False
        return True

    await wait_for(served, timeout=30, what="widgets to be served")
    return WIDGETS


async def test_status_patch_writes_status_only(kclient: KubeClient, ns: str, widgets: Resource) -> None:
    body = {"apiVersion": "patchtest.tatara.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"l": "1"}, "annotations": {"a": "1"}},
            "spec": {"size": 3}, "status": {"phase": "Pending", "keep": True}}
    before = decode(await kclient.create(widgets, body, ns))
    assert "status" not in before  # the main endpoint ignores status (docs/runtime.md#bug-status-via-main-resource)
    await patch_status(kclient, widgets, ns, "w", {"phase": "Pending", "keep": True})
    await patch_status(kclient, widgets, ns, "w", {"phase": "Running", "pid": "seph.1"})
    after = await read(kclient, widgets, ns, "w")
    assert after["status"] == {"phase": "Running", "keep": True, "pid": "seph.1"}
    assert after["spec"] == before["spec"]
    for field in ("labels", "annotations", "generation", "uid"):
        assert after["metadata"][field] == before["metadata"][field], field
    await patch_status(kclient, widgets, ns, "w", {"pid": None})
    assert (await read(kclient, widgets, ns, "w"))["status"] == {"phase": "Running", "keep": True}


@pytest.mark.parametrize(
    "status_patch",
    [{}, {"phase": "Running"}, {"phase": "Running", "gone": None}],
    ids=["an empty status patch", "a patch the cached status holds", "a patch stripping an absent key"],
)
async def test_a_no_op_status_patch_sends_no_request(
    kclient: KubeClient, ns: str, widgets: Resource, status_patch: dict[str, Any]
) -> None:
    await kclient.create(widgets, {"apiVersion": "patchtest.tatara.io/v1", "kind": "Widget",
                                   "metadata": {"name": "w"}, "spec": {}}, ns)
    cached = decode(await kclient.merge_patch(widgets, "w", {"status": {"phase": "Running"}}, ns,
                                              subresource="status"))
    with counting(kclient) as seen:
        assert await patch_status(kclient, widgets, ns, "w", status_patch, current=cached) is None
    assert seen == []


# ── server-side apply ──


async def test_apply_creates_then_an_unchanged_apply_keeps_the_version(kclient: KubeClient, ns: str) -> None:
    desired = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child", "namespace": ns},
               "data": {"k": "v"}}
    first = decode(await apply(kclient, CONFIG_MAPS, desired, field_manager="tatara-test"))
    again = decode(await apply(kclient, CONFIG_MAPS, desired, field_manager="tatara-test"))
    assert first["data"] == {"k": "v"}
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    managers = decode(await kclient.get(CONFIG_MAPS, "child", ns))["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in managers] == [("tatara-test", "Apply")]


async def test_apply_without_kind_sends_no_request(kclient: KubeClient, ns: str) -> None:
    with counting(kclient) as seen, pytest.raises(ValueError, match="apiVersion and kind"):
        await apply(kclient, CONFIG_MAPS, {"apiVersion": "v1", "metadata": {"name": "x", "namespace": ns}},
                    field_manager="tatara-test")
    assert seen == []


# ── get or create ──


async def test_get_or_create_creates_an_absent_object_once(kclient: KubeClient, ns: str) -> None:
    body = {"metadata": {"name": "table"}, "data": {"next": "1"}}
    with counting(kclient) as seen:
        first = decode(await get_or_create(kclient, CONFIG_MAPS, "table", body, ns))
    assert seen == ["GET", "POST"]
    with counting(kclient) as seen:
        again = decode(await get_or_create(kclient, CONFIG_MAPS, "table", {**body, "data": {"next": "9"}}, ns))
    assert seen == ["GET"]
    assert again["data"] == first["data"] == {"next": "1"}, "an existing object is returned as it is"


async def test_racing_creators_all_get_the_winners_object(kclient: KubeClient, ns: str) -> None:
    results: list[dict[str, Any]] = []

    async def racer(i: int) -> None:
        body = {"metadata": {"name": "contended"}, "data": {"by": str(i)}}
        results.append(decode(await get_or_create(kclient, CONFIG_MAPS, "contended", body, ns)))

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(racer, i)
    assert len({r["metadata"]["uid"] for r in results}) == 1
    assert len({r["data"]["by"] for r in results}) == 1
