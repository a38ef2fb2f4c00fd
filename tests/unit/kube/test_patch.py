"""The pure parts of shared.kube.patch: what each write sends, and when it sends nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from shared.domain import finalizers as fin
from shared.domain.api.meta import ObjectMeta
from shared.domain.api.process import ProcessPhase, ProcessStatus
from shared.kube.client import CONFIG_MAPS, NAMESPACES, Resource
from shared.kube.errors import Conflict
from shared.kube.patch import (
    DEFAULT_RETRY,
    MetaView,
    RetryPolicy,
    add_finalizer,
    add_finalizer_patch,
    annotation_changes,
    apply_target,
    merge_patch_changes,
    meta_view,
    remove_finalizer_patch,
    status_changes,
)

OTHER = "example.com/other"


def view(finalizers: tuple[str, ...] = (), *, rv: str | None = "7", deleting: bool = False) -> MetaView:
    return MetaView("obj", "ns", rv, {}, finalizers, deleting)


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


# ── finalizers ──


@pytest.mark.parametrize(
    ("current", "expected_list"),
    [
        ((), [fin.PROCESS]),
        ((OTHER,), [OTHER, fin.PROCESS]),
        ((fin.PROCESS,), None),
        ((OTHER, fin.PROCESS), None),
    ],
    ids=[
        "adding to an empty list writes just ours",
        "adding keeps another controller's entry first",
        "adding a present finalizer sends nothing",
        "adding a finalizer present among others sends nothing",
    ],
)
def test_add_finalizer_patch(current: tuple[str, ...], expected_list: list[str] | None) -> None:
    patch = add_finalizer_patch(view(current), fin.PROCESS)
    expected = None if expected_list is None else {"metadata": {"finalizers": expected_list, "resourceVersion": "7"}}
    assert patch == expected


@pytest.mark.parametrize(
    ("current", "expected_list"),
    [
        ((fin.PROCESS,), []),
        ((OTHER, fin.PROCESS), [OTHER]),
        ((fin.PROCESS, OTHER), [OTHER]),
        ((OTHER,), None),
        ((), None),
    ],
    ids=[
        "removing the only finalizer writes an empty list",
        "removing keeps another controller's entry before it",
        "removing keeps another controller's entry after it",
        "removing an absent finalizer sends nothing",
        "removing from an empty list sends nothing",
    ],
)
def test_remove_finalizer_patch(current: tuple[str, ...], expected_list: list[str] | None) -> None:
    patch = remove_finalizer_patch(view(current), fin.PROCESS)
    expected = None if expected_list is None else {"metadata": {"finalizers": expected_list, "resourceVersion": "7"}}
    assert patch == expected


def test_no_finalizer_is_added_to_a_deleting_object() -> None:
    # spec/runtime-anchors.md §3 #7/#8: the API server forbids new finalizers once deletion started
    assert add_finalizer_patch(view((OTHER,), deleting=True), fin.PROCESS) is None


def test_finalizers_are_still_removed_from_a_deleting_object() -> None:
    assert remove_finalizer_patch(view((fin.PROCESS,), deleting=True), fin.PROCESS) == {
        "metadata": {"finalizers": [], "resourceVersion": "7"}}


@pytest.mark.parametrize("compose", [add_finalizer_patch, remove_finalizer_patch], ids=["adding", "removing"])
def test_an_unguarded_finalizer_patch_is_refused(compose: Any) -> None:
    current = (fin.PROCESS,) if compose is remove_finalizer_patch else ()
    with pytest.raises(ValueError, match="resourceVersion"):
        compose(view(current, rv=None), fin.PROCESS)


def test_default_retry_is_client_go_default_retry() -> None:
    # client-go retry.DefaultRetry: Steps 5, Duration 10 ms, Factor 1.0, Jitter 0.1 (anchors §1)
    assert (DEFAULT_RETRY.steps, DEFAULT_RETRY.duration, DEFAULT_RETRY.factor, DEFAULT_RETRY.jitter) == (
        5, 0.010, 1.0, 0.1)


@pytest.mark.parametrize(
    ("policy", "rng", "expected"),
    [
        (RetryPolicy(), 0.0, [0.010] * 4),
        (RetryPolicy(), 1.0, [0.011] * 4),
        (RetryPolicy(steps=4, duration=0.010, factor=5.0, jitter=0.1), 0.5, [0.0105, 0.0525, 0.2625]),
        (RetryPolicy(steps=1), 0.5, []),
    ],
    ids=[
        "five steps wait four times ten milliseconds without jitter",
        "full jitter stretches each wait by ten percent",
        "a factor multiplies each wait (client-go DefaultBackoff)",
        "a single step never waits",
    ],
)
def test_retry_delays(policy: RetryPolicy, rng: float, expected: list[float]) -> None:
    assert policy.delays(lambda: rng) == pytest.approx(expected)


class _AlwaysConflicting:
    """A stand-in client whose every PATCH loses the race; GET returns a fresh version each time."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> bytes:
        self.calls.append("GET")
        version = str(len(self.calls))
        return msgspec.json.encode({"metadata": {"name": name, "resourceVersion": version, "finalizers": [OTHER]}})

    async def merge_patch(self, resource: Resource, name: str, patch: Any, namespace: str | None = None) -> bytes:
        self.calls.append("PATCH")
        raise Conflict(409, "Conflict", "the object has been modified")


@pytest.mark.anyio
async def test_a_finalizer_write_gives_up_with_conflict_after_the_retry_steps() -> None:
    client = _AlwaysConflicting()
    policy = RetryPolicy(steps=3, duration=0.0, jitter=0.0)
    with pytest.raises(Conflict):
        await add_finalizer(client, CONFIG_MAPS, "ns", "obj", fin.PROCESS, retry=policy)  # type: ignore[arg-type]
    assert client.calls == ["GET", "PATCH"] * 3


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


def test_status_of_a_wire_struct_compares_in_its_wire_form() -> None:
    class _Process(msgspec.Struct):
        metadata: ObjectMeta
        status: ProcessStatus

    since = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    cached = _Process(ObjectMeta(name="p"), ProcessStatus(phase=ProcessPhase.RUNNING, phase_since=since))
    assert not status_changes(cached, {"phase": "Running", "phaseSince": "2024-05-01T12:00:00Z"})
    assert status_changes(cached, {"phase": "Running", "phaseSince": "2024-05-01T12:00:01Z"})
    assert not status_changes(cached, {"message": None})


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
