"""Which events reach the work queue: status-only updates are dropped, real changes kept."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from shared.kube.controller import controller_owner, generation_or_metadata_changed
from shared.kube.informer import WatchEventType
from shared.kube.logcontext import JsonFormatter, log_context
from shared.kube.meta import ObjectMeta, OwnerReference


class Obj:
    def __init__(self, metadata: ObjectMeta) -> None:
        self.metadata = metadata


BASE = ObjectMeta(name="p", namespace="ns", resource_version="1", generation=1, labels={"a": "1"},
                  annotations={"x": "y"}, finalizers=["f"])


def changed(**fields: object) -> Obj:
    values = {f: getattr(BASE, f) for f in BASE.__struct_fields__}
    values.update(resource_version="2", **fields)
    return Obj(ObjectMeta(**values))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event", "new", "kept"),
    [
        (WatchEventType.ADDED, changed(), True),
        (WatchEventType.DELETED, changed(), True),
        (WatchEventType.MODIFIED, changed(), False),
        (WatchEventType.MODIFIED, changed(generation=2), True),
        (WatchEventType.MODIFIED, changed(labels={"a": "2"}), True),
        (WatchEventType.MODIFIED, changed(annotations={}), True),
        (WatchEventType.MODIFIED, changed(finalizers=[]), True),
        (WatchEventType.MODIFIED, changed(deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC)), True),
        (WatchEventType.MODIFIED, changed(owner_references=[OwnerReference(api_version="v1", kind="X", name="o",
                                                                      uid="u")]), True),
    ],
    ids=[
        "an add is kept",
        "a delete is kept",
        "a status-only update (new resourceVersion, same generation and metadata) is dropped",
        "a spec change (generation bump) is kept",
        "a label change is kept",
        "an annotation change is kept",
        "a finalizer change is kept",
        "a deletion timestamp is kept",
        "an ownerReference change is kept",
    ],
)
def test_generation_or_metadata_changed(event: WatchEventType, new: Obj, kept: bool) -> None:
    assert generation_or_metadata_changed(event, Obj(BASE), new) is kept


def test_objects_without_generation_count_any_new_resource_version() -> None:
    old = Obj(ObjectMeta(name="cm", resource_version="1"))
    new = Obj(ObjectMeta(name="cm", resource_version="2"))
    assert generation_or_metadata_changed(WatchEventType.MODIFIED, old, new)
    assert not generation_or_metadata_changed(WatchEventType.MODIFIED, old, old)


@pytest.mark.parametrize(
    ("refs", "owner"),
    [
        ([OwnerReference(api_version="tatara.pleme.io/v1alpha1", kind="Process", name="p", uid="u",
                         controller=True)], ("Process", "p")),
        ([OwnerReference(api_version="tatara.pleme.io/v1alpha1", kind="Process", name="p", uid="u")], None),
        ([OwnerReference(api_version="other.io/v1", kind="Process", name="p", uid="u", controller=True)], None),
        ([], None),
    ],
    ids=["a controller ref of the kind and group maps", "a non-controller ref does not",
         "the same kind in another group does not", "no refs, no owner"],
)
def test_controller_owner(refs: list[OwnerReference], owner: tuple[str, str] | None) -> None:
    obj = Obj(ObjectMeta(name="child", namespace="ns", owner_references=refs))
    assert controller_owner(obj, "Process", "tatara.pleme.io") == owner


def test_json_log_lines_carry_the_bound_context() -> None:
    record = logging.LogRecord("tatara", logging.INFO, __file__, 1, "phase %s", ("Running",), None)
    with log_context(controller="process", namespace="ns", name="p"):
        line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "phase Running"
    assert (line["controller"], line["namespace"], line["name"], line["level"]) == ("process", "ns", "p", "info")
    assert line["ts"].endswith("Z")


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("5", 5.0), ("0.5", 0.5), (None, None), ("", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None)],
    ids=["integer seconds", "fractional seconds", "no header", "empty header", "an HTTP date is ignored"],
)
def test_retry_after_header_is_read_as_seconds(header: str | None, seconds: float | None) -> None:
    from shared.kube.client import _retry_after

    assert _retry_after(header) == seconds
