"""shared.kube.store: what a Store holds, files under its indices and tells its handlers, for each change
(docs/runtime.md#informer)."""

from __future__ import annotations

import logging

import msgspec
import pytest

from shared.kube.meta import ObjectMeta
from shared.kube.store import Store, WatchEventType, object_key

E = WatchEventType


class Obj(msgspec.Struct):
    metadata: ObjectMeta
    team: str = ""


def obj(name: str, rv: str = "1", team: str = "", namespace: str | None = "ns") -> Obj:
    return Obj(ObjectMeta(name=name, namespace=namespace, resource_version=rv), team=team)


def by_team(o: Obj) -> list[str]:
    return [o.team] if o.team else []


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, str]] = []  # (type, old rv, new rv)

    def __call__(self, kind: WatchEventType, old: Obj | None, new: Obj) -> None:
        self.events.append((kind.value, old.metadata.resource_version if old else None,
                            str(new.metadata.resource_version)))


@pytest.mark.parametrize(
    ("key", "expected"),
    [(obj("a"), "ns/a"), (obj("t", namespace=None), "t"), (obj("t", namespace=""), "t")],
    ids=["namespaced", "cluster-scoped", "an empty namespace is cluster-scoped"],
)
def test_object_key(key: Obj, expected: str) -> None:
    assert object_key(key) == expected


def test_apply_stores_updates_and_drops_telling_the_handler_old_and_new() -> None:
    store: Store[Obj] = Store()
    seen = Seen()
    store.add_handler(seen)
    store.apply(E.ADDED, obj("a", "1"))
    store.upsert(obj("a", "2"))
    store.upsert(obj("b", "3"))
    assert sorted(store.keys()) == ["ns/a", "ns/b"]
    assert store.get("ns/a") == obj("a", "2")
    store.apply(E.DELETED, obj("a", "4"))
    assert store.get("ns/a") is None
    assert "ns/a" not in store
    assert len(store) == 1
    assert seen.events == [("ADDED", None, "1"), ("MODIFIED", "1", "2"), ("ADDED", None, "3"),
                           ("DELETED", "2", "4")]


def test_an_index_follows_every_change_and_covers_objects_stored_before_it() -> None:
    store: Store[Obj] = Store()
    store.apply(E.ADDED, obj("a", team="red"))
    store.add_indexer("team", by_team)
    store.apply(E.ADDED, obj("b", team="red"))
    assert [o.metadata.name for o in store.by_index("team", "red")] == ["a", "b"]
    store.upsert(obj("a", "2", team="blue"))  # moved: filed under its new value only
    assert [o.metadata.name for o in store.by_index("team", "red")] == ["b"]
    assert [o.metadata.name for o in store.by_index("team", "blue")] == ["a"]
    store.apply(E.DELETED, obj("b"))
    assert sorted(store.index_values("team")) == ["blue"], "an emptied value is dropped"
    assert store.by_index("team", "red") == []
    with pytest.raises(KeyError):
        store.by_index("colour", "red")
    with pytest.raises(ValueError, match="already registered"):
        store.add_indexer("team", by_team)


def test_replace_synthesizes_deletes_adds_and_only_real_updates() -> None:
    store: Store[Obj] = Store()
    store.apply(E.ADDED, obj("gone", "1"))
    store.apply(E.ADDED, obj("same", "2"))
    store.apply(E.ADDED, obj("changed", "3"))
    seen = Seen()
    store.add_handler(seen)
    synthesized = store.replace([obj("same", "2"), obj("changed", "5"), obj("new", "6")])
    assert synthesized == 1
    assert sorted(store.keys()) == ["ns/changed", "ns/new", "ns/same"]
    assert seen.events == [("DELETED", "1", "1"), ("MODIFIED", "3", "5"), ("ADDED", None, "6")]


def test_a_failing_handler_does_not_stop_the_others_or_the_store(caplog: pytest.LogCaptureFixture) -> None:
    store: Store[Obj] = Store("things")
    seen = Seen()

    def broken(kind: WatchEventType, old: Obj | None, new: Obj) -> None:
        raise RuntimeError("boom")

    store.add_handler(broken)
    store.add_handler(seen)
    with caplog.at_level(logging.ERROR):
        store.apply(E.ADDED, obj("a"))
    assert store.get("ns/a") is not None
    assert seen.events == [("ADDED", None, "1")]
    assert "things: event handler failed for ns/a" in caplog.text
