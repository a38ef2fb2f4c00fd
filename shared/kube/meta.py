"""Object metadata: the ``metav1.ObjectMeta`` subset controllers read, and a view of any object's metadata.

:class:`ObjectMeta` is what cached types declare as their ``metadata`` (other keys such as
``managedFields`` are dropped on decode, so they never reach a cache: docs/runtime.md, "Informer").
:func:`meta_view` reads the few fields the write helpers need from a Struct or a decoded JSON mapping.
:func:`as_json` is how the runtime turns a caller's object into JSON data: a type that knows its own
wire form says so through :class:`JSONEncodable`; the runtime itself knows no domain types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

__all__ = [
    "JSONEncodable",
    "KubeObject",
    "MetaView",
    "ObjectMeta",
    "ObjectRef",
    "OwnerReference",
    "as_json",
    "meta_view",
    "namespace_of",
]


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata.ownerReferences[]``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata``: identity, versioning, labels/annotations, ownership, finalizers (timestamps as datetimes)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


class _Meta(Protocol):
    @property
    def name(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def resource_version(self) -> str | None: ...


class KubeObject(Protocol):
    """What the runtime needs of a cached type: a ``metadata`` with name, namespace and resourceVersion
    (any Struct declaring ``metadata: ObjectMeta`` fits)."""

    @property
    def metadata(self) -> _Meta: ...


def namespace_of(obj: KubeObject) -> str:
    """``obj``'s ``metadata.namespace``, or ``default`` when it has none (how the API server reads a
    namespaced object sent without one)."""
    return obj.metadata.namespace or "default"


@runtime_checkable
class JSONEncodable(Protocol):
    """A value that renders its own JSON data (e.g. models with emission rules of their own)."""

    def to_json(self) -> Any:
        """Plain JSON-ready data (dicts, lists, str, numbers, bool, None)."""
        ...


def as_json(value: Any) -> Any:
    """``value`` as plain JSON data: :class:`JSONEncodable` values render themselves, other msgspec Structs
    go through ``msgspec.to_builtins`` (defaults omitted as the Struct declares), anything else is returned as is."""
    if isinstance(value, JSONEncodable):
        return value.to_json()
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return value


@dataclass(frozen=True)
class ObjectRef:
    """An object by name when no cached copy is at hand. ``namespace`` None for cluster-scoped objects."""

    namespace: str | None
    name: str


@dataclass(frozen=True)
class MetaView:
    """The metadata fields the write helpers read, from a Struct or a JSON mapping."""

    name: str
    namespace: str | None
    resource_version: str | None
    annotations: Mapping[str, str]
    finalizers: tuple[str, ...]
    deleting: bool


def meta_view(obj: Any) -> MetaView:
    """The :class:`MetaView` of a cached object (Struct with ``metadata`` or JSON mapping).

    Raises:
        ValueError: the object has no ``metadata.name``.
    """
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace")
        rv, deleting = meta.get("resourceVersion"), meta.get("deletionTimestamp") is not None
        annotations, finalizers = meta.get("annotations") or {}, meta.get("finalizers") or ()
    else:
        meta = obj.metadata
        name, namespace = meta.name, meta.namespace
        rv, deleting = meta.resource_version, getattr(meta, "deletion_timestamp", None) is not None
        annotations, finalizers = getattr(meta, "annotations", None) or {}, getattr(meta, "finalizers", None) or ()
    if not name:
        raise ValueError("object has no metadata.name")
    return MetaView(str(name), namespace or None, rv or None, dict(annotations), tuple(finalizers), deleting)
