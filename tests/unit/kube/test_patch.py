"""The pure parts of shared.kube.patch: what each write sends, and when it sends nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, NAMESPACES, Resource
from shared.kube.meta import MetaView, ObjectMeta, meta_view
from shared.kube.patch import (
    annotation_changes,
    annotations_patch,
    apply_target,
    merge_patch_applied,
    merge_patch_changes,
    status_changes,
)

# ── annotations ──


@pytest.mark.parametrize(
    ("current", "changes", "expected"),
    [
        ({}, {"a": "1"}, {"a": "1"}),
        ({"a": "1"}, {"a": "1"}, {}),
        ({"a": "1"}, {"a": "2"}, {"a": "2"}),
        ({"a": "1"}, {"a": None}, {"a": None}),
        ({}, {"a": None}, {}),
        ({"a": "1", "b": "2"}, {"a": "1", "b": None, "c": "3"}, {"b": None, "c": "3"}),
        ({"a": ""}, {"a": ""}, {}),
        (None, {"a": "1", "b": None}, {"a": "1", "b": None}),
    ],
    ids=[
        "a new key is sent",
        "a key already holding the value is not sent",
        "a key holding another value is sent",
        "stripping a present key is sent as null",
        "stripping an absent key sends nothing",
        "only the differing keys of a mixed change are sent",
        "an empty value already present is not sent",
        "without a cached copy every change is sent",
    ],
)
def test_annotation_changes(
    current: dict[str, str] | None, changes: dict[str, str | None], expected: dict[str, str | None]
) -> None:
    assert annotation_changes(current, changes) == expected


def test_annotations_patch_sets_a_key() -> None:
    assert annotations_patch({"example.com/a": "1"}) == {"metadata": {"annotations": {"example.com/a": "1"}}}


def test_annotations_patch_strips_a_key_with_json_null() -> None:
    body = annotations_patch({"example.com/a": None})
    assert msgspec.json.encode(body) == b'{"metadata":{"annotations":{"example.com/a":null}}}'


def test_annotations_patch_copies_its_input() -> None:
    changes: dict[str, str | None] = {"example.com/a": "1"}
    body = annotations_patch(changes)
    changes["example.com/b"] = None
    assert body == {"metadata": {"annotations": {"example.com/a": "1"}}}


# ── object views ──


class _Obj(msgspec.Struct):
    metadata: ObjectMeta


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {"metadata": {"name": "a", "namespace": "n", "resourceVersion": "5", "finalizers": ["x"],
                          "annotations": {"k": "v"}, "deletionTimestamp": "2024-01-01T00:00:00Z"}},
            MetaView("a", "n", "5", {"k": "v"}, ("x",), True),
        ),
        ({"metadata": {"name": "a"}}, MetaView("a", None, None, {}, (), False)),
        (
            _Obj(metadata=ObjectMeta(name="a", namespace="n", resource_version="9", finalizers=["x", "y"],
                                     annotations={"k": "v"})),
            MetaView("a", "n", "9", {"k": "v"}, ("x", "y"), False),
        ),
        (
            _Obj(metadata=ObjectMeta(name="a", deletion_timestamp=datetime(2024, 1, 1, tzinfo=UTC))),
            MetaView("a", None, None, {}, (), True),
        ),
    ],
    ids=[
        "a JSON mapping gives every field",
        "a bare JSON mapping gives empty collections and no version",
        "a Struct with ObjectMeta gives every field",
        "a Struct with a deletion timestamp is deleting",
    ],
)
def test_meta_view(obj: Any, expected: MetaView) -> None:
    assert meta_view(obj) == expected


def test_meta_view_without_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        meta_view({"metadata": {}})


# ── status ──


@pytest.mark.parametrize(
    ("target", "patch", "changes"),
    [
        ({"a": 1}, {"a": 1}, False),
        ({"a": 1}, {"a": 2}, True),
        ({"a": 1}, {"b": 1}, True),
        ({"a": 1}, {"a": None}, True),
        ({"a": 1}, {"b": None}, False),
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, False),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": None}}, False),
        ({"a": {"b": 1}}, {"a": {"c": {}}}, True),
        ({"a": [1, 2]}, {"a": [1, 2]}, False),
        ({"a": [1, 2]}, {"a": [2, 1]}, True),
        ({"a": [{"x": 1}]}, {"a": [{"x": 1, "y": None}]}, True),
        ({"a": True}, {"a": 1}, True),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": "1"}, {"a": 1}, True),
        ({"a": 5}, {"a": {"b": 1}}, True),
        (None, {"a": None}, True),
        ({}, {}, False),
    ],
    ids=[
        "an equal scalar changes nothing",
        "another scalar changes it",
        "a new key changes it",
        "null on a present key deletes it",
        "null on an absent key changes nothing",
        "a nested subset that matches changes nothing",
        "a nested null on an absent key changes nothing",
        "a nested empty object on an absent key adds it",
        "an equal list changes nothing",
        "a reordered list replaces it",
        "a list is replaced whole so a null inside it is kept literally",
        "true and 1 are different JSON values",
        "1 and 1.0 are the same JSON number",
        "a string and a number differ",
        "an object replaces a scalar",
        "any object patch turns an absent target into an object",
        "an empty patch on an empty object changes nothing",
    ],
)
def test_merge_patch_changes(target: Any, patch: Any, changes: bool) -> None:
    assert merge_patch_changes(target, patch) is changes


# RFC 7386, Appendix A: every example (original, patch, result)
RFC7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7386_EXAMPLES)
def test_merge_patch_applied_gives_every_result_of_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    before = repr(target)
    assert merge_patch_applied(target, patch) == result
    assert repr(target) == before  # the input is not modified


@pytest.mark.parametrize(
    ("current", "status_patch", "changes"),
    [
        ({"status": {"phase": "Running"}}, {}, False),
        (None, {}, False),
        (None, {"phase": "Running"}, True),
        ({"status": {"phase": "Running", "pid": "a.1"}}, {"phase": "Running"}, False),
        ({"status": {"phase": "Running"}}, {"phase": "Failed"}, True),
        ({"spec": {}}, {"phase": "Running"}, True),
        ({"spec": {}}, {"message": None}, True),
    ],
    ids=[
        "an empty patch changes nothing",
        "an empty patch without a cached object changes nothing",
        "without a cached object any patch is sent",
        "a patch the cached status already holds changes nothing",
        "a new phase changes it",
        "an object without status gains one",
        "a patch on an object without status creates an empty status",
    ],
)
def test_status_changes(current: Any, status_patch: dict[str, Any], changes: bool) -> None:
    assert status_changes(current, status_patch) is changes


class _Status(msgspec.Struct, frozen=True):
    """A status type with a wire form of its own (JSONEncodable): the time written in whole seconds, ``Z``."""

    phase: str
    since: datetime

    def to_json(self) -> Any:
        return {"phase": self.phase, "phaseSince": self.since.strftime("%Y-%m-%dT%H:%M:%SZ")}


def test_a_json_encodable_status_compares_in_its_own_wire_form() -> None:
    class _Obj(msgspec.Struct):
        metadata: ObjectMeta
        status: _Status

    cached = _Obj(ObjectMeta(name="p"), _Status("Running", datetime(2024, 5, 1, 12, 0, tzinfo=UTC)))
    assert not status_changes(cached, {"phase": "Running", "phaseSince": "2024-05-01T12:00:00Z"})
    assert status_changes(cached, {"phase": "Running", "phaseSince": "2024-05-01T12:00:01Z"})
    assert not status_changes(cached, {"message": None})


def test_a_plain_struct_status_compares_as_msgspec_renders_it() -> None:
    class _Plain(msgspec.Struct, omit_defaults=True):
        phase: str = ""
        count: int = 0

    class _Obj(msgspec.Struct):
        metadata: ObjectMeta
        status: _Plain

    cached = _Obj(ObjectMeta(name="p"), _Plain(phase="Running"))
    assert not status_changes(cached, {"phase": "Running"})
    assert status_changes(cached, {"count": 0}), "a default the Struct omits counts as absent"


# ── server-side apply ──


@pytest.mark.parametrize(
    ("resource", "obj", "expected"),
    [
        (CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}},
         ("n", "c")),
        (NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}, (None, "n")),
        (Resource("apps", "v1", "deployments", "Deployment"),
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}, ("n", "d")),
    ],
    ids=[
        "a namespaced core object goes to its namespace",
        "a cluster-scoped object has no namespace",
        "a grouped object names its group in apiVersion",
    ],
)
def test_apply_target(resource: Resource, obj: dict[str, Any], expected: tuple[str | None, str]) -> None:
    namespace, name, body = apply_target(resource, obj)
    assert (namespace, name) == expected
    assert body == obj


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}, "apiVersion and kind"),
        ({"apiVersion": "v1", "metadata": {"name": "c", "namespace": "n"}}, "apiVersion and kind"),
        ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c", "namespace": "n"}}, "is not v1 ConfigMap"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "n"}}, r"metadata\.name"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, r"metadata\.namespace"),
    ],
    ids=[
        "no apiVersion is refused",
        "no kind is refused",
        "a kind other than the resource's is refused",
        "no name is refused",
        "no namespace on a namespaced kind is refused",
    ],
)
def test_apply_target_refuses(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply_target(CONFIG_MAPS, obj)
