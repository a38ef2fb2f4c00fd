"""tests/support/fake_api.py: the in-memory API server answers each case of the API-semantics table as a
kube-apiserver does (the same table runs against a real one in tests/integration/kube/test_fake_api_parity.py).
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from shared.kube.api import KubeApi
from shared.kube.client import CONFIG_MAPS
from shared.kube.errors import Conflict, NotFound
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from tests.support.api_semantics import CASES, WIDGETS, Case, cm
from tests.support.fake_api import FakeApi, json_patch, merge_patch

pytestmark = pytest.mark.anyio


class ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_the_fake_answers_as_the_api_server(case: Case) -> None:
    api: KubeApi = FakeApi(status_subresources=[WIDGETS])
    assert await case.run(api, "ns") == case.expected


# ── RFC 7386 and RFC 6902, by their own examples ──

def test_merge_patch_is_rfc_7386() -> None:
    # RFC 7386 section 3, the example document and patch
    target = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
              "tags": ["example", "sample"], "content": "This will be unchanged"}
    patch = {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": None},
             "tags": ["example"]}
    assert merge_patch(target, patch) == {"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
                                          "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"}


@pytest.mark.parametrize(
    ("doc", "ops", "expected"),
    [
        ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
        ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),
        ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
        ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
         {"baz": "boo", "foo": "bar"}),
        ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
         [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
         {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
        ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
         {"foo": ["bar", ["abc", "def"]]}),
        ({"/": 1, "m~n": 2}, [{"op": "test", "path": "/~1", "value": 1}, {"op": "remove", "path": "/m~0n"}],
         {"/": 1}),
    ],
    ids=["A.1 add a member", "A.2 add an array element", "A.3 remove a member", "A.5 replace a value",
         "A.6 move a value", "A.16 add an array value", "escaped pointers (section 4)"],
)
def test_json_patch_is_rfc_6902(doc: Any, ops: list[dict[str, Any]], expected: Any) -> None:
    # RFC 6902 appendix A
    assert json_patch(doc, ops) == expected


# ── the test controls ──

async def test_calls_are_recorded_and_a_chosen_call_fails() -> None:
    api = FakeApi()
    api.fail[("merge_patch", "configmaps/c")] = Conflict(409, "Conflict", "chosen")
    await api.create(CONFIG_MAPS, cm("c", a="1"), "ns")
    with pytest.raises(Conflict, match="chosen"):
        await api.merge_patch(CONFIG_MAPS, "c", {"data": {"a": "2"}}, "ns")
    with pytest.raises(NotFound):
        await api.get(CONFIG_MAPS, "d", "ns")
    assert [(c.verb, c.path, c.body) for c in api.calls] == [
        ("create", "configmaps/c", cm("c", a="1")),
        ("merge_patch", "configmaps/c", {"data": {"a": "2"}}),
        ("get", "configmaps/d", None)]
    stored = api.object(CONFIG_MAPS, "c", "ns")
    assert stored is not None
    assert stored["data"] == {"a": "1"}


async def test_request_serves_the_verbs_by_path() -> None:
    api = FakeApi()
    await api.request("POST", CONFIG_MAPS.path("ns"), body=msgspec.json.encode(cm("r", a="1")))
    got = msgspec.json.decode(await api.request("GET", CONFIG_MAPS.path("ns", "r")))
    assert (got["metadata"]["namespace"], got["data"]) == ("ns", {"a": "1"})
    await api.request("PUT", CONFIG_MAPS.path("ns", "r"), body=msgspec.json.encode({**got, "data": {"a": "2"}}))
    listed = msgspec.json.decode(await api.request("GET", CONFIG_MAPS.path("ns")))
    assert [i["data"] for i in listed["items"]] == [{"a": "2"}]
    with pytest.raises(NotFound):
        await api.request("GET", "/apis")
    assert [c.verb for c in api.calls] == ["create", "get", "replace", "list"]


async def test_an_informer_lists_and_watches_the_fake() -> None:
    # the runtime's own LIST + WATCH (shared/kube/informer.py) over the fake: synced on what is stored, then
    # each later write, in order, through the watch
    api = FakeApi()
    await api.create(CONFIG_MAPS, cm("before", a="1"), "ns")
    informer: Informer[ConfigMap] = Informer(api, CONFIG_MAPS, ConfigMap, namespace="ns")
    seen: list[tuple[str, str | None]] = []
    informer.add_handler(lambda event, old, new: seen.append((event.value, new.metadata.name)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.wait_synced()
            await api.create(CONFIG_MAPS, cm("after", a="1"), "ns")
            await api.merge_patch(CONFIG_MAPS, "before", {"data": {"a": "2"}}, "ns")
            await api.delete(CONFIG_MAPS, "after", "ns")
            while len(seen) < 4:
                await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert seen == [("ADDED", "before"), ("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "after")]
    cached = informer.get("ns/before")
    assert cached is not None
    assert cached.data == {"a": "2"}
    assert informer.get("ns/after") is None
