"""What the API server does, as a table: each :class:`Case` runs a few requests through a
:class:`~shared.kube.api.KubeApi` and answers what it observed; ``expected`` is what a kube-apiserver answers
(Kubernetes API conventions: resourceVersion, 409 Conflict/AlreadyExists, RFC 7386/6902 patches, status
subresource, finalizers, server-side apply).

The same table runs against :class:`tests.support.fake_api.FakeApi` (tests/unit/support/test_fake_api.py)
and against a real kube-apiserver (tests/integration/kube/test_fake_api_parity.py), so the fake is held
to the real thing. Each case gets a namespace of its own objects (names are per case) and two resources:
ConfigMaps (core, no status subresource) and :data:`WIDGETS` (a CRD with a status subresource).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import CONFIG_MAPS, Resource
from shared.kube.errors import ApiError
from tests.support.fake_api import JSON_PATCH
from tests.support.kube import widget_crd

WIDGETS, WIDGET_CRD = widget_crd("fakeapi.tatara.io")
MANAGER_A, MANAGER_B = "manager-a", "manager-b"


@dataclass(frozen=True)
class Case:
    id: str
    run: Callable[[KubeApi, str], Awaitable[Any]]
    expected: Any


def doc(raw: bytes) -> dict[str, Any]:
    value: dict[str, Any] = msgspec.json.decode(raw)
    return value


def rv(raw: bytes) -> int:
    return int(doc(raw)["metadata"]["resourceVersion"])


async def refusal(call: Awaitable[bytes]) -> tuple[str, int, str] | str:
    """(error class, HTTP status, Status reason) of a refused call; ``"accepted"`` when it was not."""
    try:
        await call
    except ApiError as err:
        return type(err).__name__, err.status, err.reason
    return "accepted"


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": WIDGETS.api_version, "kind": "Widget", "metadata": {"name": name}, "spec": spec}


# ── the cases ──


async def get_missing(api: KubeApi, ns: str) -> Any:
    return await refusal(api.get(CONFIG_MAPS, "absent", ns))


async def create_taken(api: KubeApi, ns: str) -> Any:
    await api.create(CONFIG_MAPS, cm("taken"), ns)
    return await refusal(api.create(CONFIG_MAPS, cm("taken"), ns))


async def versions_rise(api: KubeApi, ns: str) -> Any:
    versions = [rv(await api.create(CONFIG_MAPS, cm("rising", a="1"), ns))]
    for value in ("2", "3"):
        versions.append(rv(await api.merge_patch(CONFIG_MAPS, "rising", {"data": {"a": value}}, ns)))
    versions.append(rv(await api.get(CONFIG_MAPS, "rising", ns)))
    return versions[0] < versions[1] < versions[2] == versions[3]


async def noop_patch_keeps_version(api: KubeApi, ns: str) -> Any:
    before = rv(await api.create(CONFIG_MAPS, cm("same", a="1"), ns))
    return rv(await api.merge_patch(CONFIG_MAPS, "same", {"data": {"a": "1"}}, ns)) == before


async def stale_merge_patch(api: KubeApi, ns: str) -> Any:
    stale = doc(await api.create(CONFIG_MAPS, cm("stale", a="1"), ns))["metadata"]["resourceVersion"]
    await api.merge_patch(CONFIG_MAPS, "stale", {"data": {"a": "2"}}, ns)
    return await refusal(api.merge_patch(CONFIG_MAPS, "stale", {"metadata": {"resourceVersion": stale},
                                                                "data": {"a": "3"}}, ns))


async def current_merge_patch(api: KubeApi, ns: str) -> Any:
    current = doc(await api.create(CONFIG_MAPS, cm("current", a="1"), ns))["metadata"]["resourceVersion"]
    answer = doc(await api.merge_patch(CONFIG_MAPS, "current", {"metadata": {"resourceVersion": current},
                                                                "data": {"a": "2"}}, ns))
    return answer["data"], answer["metadata"]["resourceVersion"] != current


async def other_uid_merge_patch(api: KubeApi, ns: str) -> Any:
    await api.create(CONFIG_MAPS, cm("uid"), ns)
    return await refusal(api.merge_patch(CONFIG_MAPS, "uid", {"metadata": {"uid": "not-its-uid"}}, ns))


async def stale_replace(api: KubeApi, ns: str) -> Any:
    first = doc(await api.create(CONFIG_MAPS, cm("put", a="1"), ns))
    await api.merge_patch(CONFIG_MAPS, "put", {"data": {"a": "2"}}, ns)
    return await refusal(api.replace(CONFIG_MAPS, "put", {**first, "data": {"a": "3"}}, ns))


async def merge_null_deletes_lists_replace(api: KubeApi, ns: str) -> Any:
    await api.create(WIDGETS, widget("merge", keep=1, drop=2, nested={"x": 1, "y": 2}, items=[1, 2, 3]), ns)
    patch = {"spec": {"drop": None, "nested": {"y": None, "z": 3}, "items": [4]}}
    return doc(await api.merge_patch(WIDGETS, "merge", patch, ns))["spec"]


async def main_write_keeps_status(api: KubeApi, ns: str) -> Any:
    await api.create(WIDGETS, widget("scoped", size=1), ns)
    await api.merge_patch(WIDGETS, "scoped", {"status": {"phase": "Up"}}, ns, subresource="status")
    after_main = doc(await api.merge_patch(WIDGETS, "scoped", {"spec": {"size": 2}, "status": {"phase": "X"}}, ns))
    after_status = doc(await api.merge_patch(WIDGETS, "scoped", {"spec": {"size": 3}, "status": {"phase": "Down"}},
                                             ns, subresource="status"))
    return after_main["spec"], after_main["status"], after_status["spec"], after_status["status"]


async def create_drops_status(api: KubeApi, ns: str) -> Any:
    created = doc(await api.create(WIDGETS, {**widget("nostatus"), "status": {"phase": "Up"}}, ns))
    return "status" in created


async def generation_follows_spec(api: KubeApi, ns: str) -> Any:
    generations = [doc(await api.create(WIDGETS, widget("gen", size=1), ns))["metadata"]["generation"]]
    generations.append(doc(await api.merge_patch(WIDGETS, "gen", {"status": {"phase": "Up"}}, ns,
                                                 subresource="status"))["metadata"]["generation"])
    generations.append(doc(await api.merge_patch(WIDGETS, "gen", {"metadata": {"labels": {"a": "b"}}},
                                                 ns))["metadata"]["generation"])
    generations.append(doc(await api.merge_patch(WIDGETS, "gen", {"spec": {"size": 2}}, ns))["metadata"]["generation"])
    return generations


async def delete_missing(api: KubeApi, ns: str) -> Any:
    return await refusal(api.delete(CONFIG_MAPS, "absent", ns))


async def delete_stale_precondition(api: KubeApi, ns: str) -> Any:
    stale = doc(await api.create(CONFIG_MAPS, cm("pre", a="1"), ns))["metadata"]["resourceVersion"]
    await api.merge_patch(CONFIG_MAPS, "pre", {"data": {"a": "2"}}, ns)
    refused = await refusal(api.delete(CONFIG_MAPS, "pre", ns, resource_version=stale))
    return refused, "data" in doc(await api.get(CONFIG_MAPS, "pre", ns))


async def finalizer_holds_deletion(api: KubeApi, ns: str) -> Any:
    await api.create(CONFIG_MAPS, {**cm("held"), "metadata": {"name": "held", "finalizers": ["example.com/f"]}}, ns)
    await api.delete(CONFIG_MAPS, "held", ns)
    deleting = doc(await api.get(CONFIG_MAPS, "held", ns))["metadata"]
    added = await refusal(api.merge_patch(CONFIG_MAPS, "held", {"metadata": {
        "finalizers": ["example.com/f", "example.com/g"]}}, ns))
    await api.merge_patch(CONFIG_MAPS, "held", {"metadata": {"finalizers": None}}, ns)
    gone = await refusal(api.get(CONFIG_MAPS, "held", ns))
    return "deletionTimestamp" in deleting, deleting["finalizers"], added, gone


async def json_patch_test_op(api: KubeApi, ns: str) -> Any:
    await api.create(CONFIG_MAPS, cm("jp", a="1"), ns)
    path = CONFIG_MAPS.path(ns, "jp")

    def send(ops: list[dict[str, Any]]) -> Awaitable[bytes]:
        return api.request("PATCH", path, body=msgspec.json.encode(ops), content_type=JSON_PATCH)

    passed = doc(await send([{"op": "test", "path": "/data/a", "value": "1"},
                             {"op": "replace", "path": "/data/a", "value": "2"},
                             {"op": "add", "path": "/data/b", "value": "3"}]))["data"]
    failed = await refusal(send([{"op": "test", "path": "/data/a", "value": "1"},
                                 {"op": "replace", "path": "/data/a", "value": "9"}]))
    return passed, failed, doc(await api.get(CONFIG_MAPS, "jp", ns))["data"]


async def list_and_selector(api: KubeApi, ns: str) -> Any:
    for name, colour in (("l-b", "red"), ("l-a", "red"), ("l-c", "blue")):
        await api.create(CONFIG_MAPS, {**cm(name), "metadata": {"name": name, "labels": {"colour": colour}}}, ns)
    listed = doc(await api.list(CONFIG_MAPS, ns, label_selector="colour=red"))
    newest = max(int(i["metadata"]["resourceVersion"]) for i in listed["items"])
    return [i["metadata"]["name"] for i in listed["items"]], int(listed["metadata"]["resourceVersion"]) >= newest


async def list_pages(api: KubeApi, ns: str) -> Any:
    for i in range(3):
        await api.create(CONFIG_MAPS, cm(f"page-{i}"), ns)
    names: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = doc(await api.list(CONFIG_MAPS, ns, limit=2, continue_=token))
        pages += 1
        names += [i["metadata"]["name"] for i in page["items"] if i["metadata"]["name"].startswith("page-")]
        token = page["metadata"].get("continue")
        if not token:
            return names, pages


async def watch_in_order(api: KubeApi, ns: str) -> Any:
    start = doc(await api.list(CONFIG_MAPS, ns))["metadata"]["resourceVersion"]
    await api.create(CONFIG_MAPS, cm("w", a="1"), ns)
    await api.merge_patch(CONFIG_MAPS, "w", {"data": {"a": "2"}}, ns)
    await api.delete(CONFIG_MAPS, "w", ns)
    seen: list[tuple[str, str | None]] = []
    with anyio.fail_after(30):  # a deadline for the three events already written, not a wait
        async for event in api.watch(CONFIG_MAPS, ns, resource_version=start, timeout_seconds=30,
                                     inactivity_timeout=30, allow_bookmarks=False):
            seen.append((event.type, doc(event.object).get("data", {}).get("a")))
            if len(seen) == 3:
                break
    return seen


async def apply_creates_and_records_its_manager(api: KubeApi, ns: str) -> Any:
    applied = doc(await api.apply(CONFIG_MAPS, "ssa", cm("ssa", a="1"), ns, field_manager=MANAGER_A, force=False))
    managers = [(m["manager"], m["operation"]) for m in applied["metadata"].get("managedFields", [])]
    again = doc(await api.apply(CONFIG_MAPS, "ssa", cm("ssa", a="1"), ns, field_manager=MANAGER_A, force=False))
    return applied["data"], managers, again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


async def apply_drops_what_it_no_longer_applies(api: KubeApi, ns: str) -> Any:
    await api.apply(CONFIG_MAPS, "ssa-drop", cm("ssa-drop", a="1", b="2"), ns, field_manager=MANAGER_A)
    await api.merge_patch(CONFIG_MAPS, "ssa-drop", {"data": {"c": "3"}}, ns)  # not an applier's field
    return doc(await api.apply(CONFIG_MAPS, "ssa-drop", cm("ssa-drop", a="1"), ns, field_manager=MANAGER_A))["data"]


async def apply_conflicts_unless_forced(api: KubeApi, ns: str) -> Any:
    await api.apply(CONFIG_MAPS, "ssa-two", cm("ssa-two", a="1"), ns, field_manager=MANAGER_A)
    refused = await refusal(api.apply(CONFIG_MAPS, "ssa-two", cm("ssa-two", a="2"), ns, field_manager=MANAGER_B,
                                      force=False))
    same = await refusal(api.apply(CONFIG_MAPS, "ssa-two", cm("ssa-two", a="1"), ns, field_manager=MANAGER_B,
                                   force=False))
    forced = doc(await api.apply(CONFIG_MAPS, "ssa-two", cm("ssa-two", a="3"), ns, field_manager=MANAGER_B,
                                 force=True))
    return refused, same, forced["data"]


async def apply_status_subresource(api: KubeApi, ns: str) -> Any:
    await api.apply(WIDGETS, "ssa-w", {**widget("ssa-w", size=1), "status": {"phase": "X"}}, ns,
                    field_manager=MANAGER_A)
    main = doc(await api.get(WIDGETS, "ssa-w", ns))
    status = doc(await api.apply(WIDGETS, "ssa-w", {**widget("ssa-w", size=5), "status": {"phase": "Up"}}, ns,
                                 field_manager=MANAGER_A, subresource="status"))
    return main["spec"], main.get("status"), status["spec"], status["status"]


CASES: list[Case] = [
    Case("a GET of a missing object is 404 NotFound", get_missing, ("NotFound", 404, "NotFound")),
    Case("a create of a taken name is 409 AlreadyExists", create_taken, ("AlreadyExists", 409, "AlreadyExists")),
    Case("each write raises an object's resourceVersion; a read keeps it", versions_rise, True),
    Case("a patch that changes nothing keeps the resourceVersion", noop_patch_keeps_version, True),
    Case("a merge patch naming a stale resourceVersion is 409 Conflict", stale_merge_patch,
         ("Conflict", 409, "Conflict")),
    Case("a merge patch naming the current resourceVersion is written", current_merge_patch, ({"a": "2"}, True)),
    Case("a merge patch changing the uid is 422 Invalid (immutable)", other_uid_merge_patch,
         ("Invalid", 422, "Invalid")),
    Case("a PUT of a stale resourceVersion is 409 Conflict", stale_replace, ("Conflict", 409, "Conflict")),
    Case("a merge patch deletes null members, merges objects and replaces lists", merge_null_deletes_lists_replace,
         {"keep": 1, "nested": {"x": 1, "z": 3}, "items": [4]}),
    Case("the main resource keeps status, /status keeps the rest", main_write_keeps_status,
         ({"size": 2}, {"phase": "Up"}, {"size": 2}, {"phase": "Down"})),
    Case("a create drops the status of a kind with a status subresource", create_drops_status, False),
    Case("generation moves with the spec only", generation_follows_spec, [1, 1, 1, 2]),
    Case("a DELETE of a missing object is 404 NotFound", delete_missing, ("NotFound", 404, "NotFound")),
    Case("a DELETE with a stale resourceVersion precondition is 409 Conflict and deletes nothing",
         delete_stale_precondition, (("Conflict", 409, "Conflict"), True)),
    Case("a finalizer holds a deleted object, refuses new finalizers, and its removal deletes",
         finalizer_holds_deletion, (True, ["example.com/f"], ("Invalid", 422, "Invalid"),
                                    ("NotFound", 404, "NotFound"))),
    Case("a JSON patch applies its ops; a failed test is 422 Invalid and writes nothing", json_patch_test_op,
         ({"a": "2", "b": "3"}, ("Invalid", 422, "Invalid"), {"a": "2", "b": "3"})),
    Case("a LIST by label selector is ordered by name at a version past its items", list_and_selector,
         (["l-a", "l-b"], True)),
    Case("a LIST pages by limit and continue", list_pages, (["page-0", "page-1", "page-2"], 2)),
    Case("a watch from a version sees the later writes in order", watch_in_order,
         [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]),
    Case("an apply creates, records its manager, and an unchanged apply keeps the version",
         apply_creates_and_records_its_manager, ({"a": "1"}, [(MANAGER_A, "Apply")], True)),
    Case("an apply removes the fields its manager no longer applies, and only those",
         apply_drops_what_it_no_longer_applies, {"a": "1", "c": "3"}),
    Case("an apply setting another manager's field is 409 Conflict unless forced (the same value is not)",
         apply_conflicts_unless_forced, (("Conflict", 409, "Conflict"), "accepted", {"a": "3"})),
    Case("an apply of the main resource ignores status; an apply of /status sets only status",
         apply_status_subresource, ({"size": 1}, None, {"size": 1}, {"phase": "Up"})),
]


def resources() -> tuple[Resource, ...]:
    """The kinds the cases write (the CRD of :data:`WIDGETS` must be served)."""
    return CONFIG_MAPS, WIDGETS
