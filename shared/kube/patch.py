"""Write helpers: annotations, status and server-side apply, each skipping writes that change nothing.

The write rules (docs/runtime.md, "Writes"):

- annotations: JSON merge patch of ``metadata.annotations`` (map keys merge, so other
  writers' keys survive); ``None`` strips a key;
- status: JSON merge patch on the ``/status`` subresource only; optionally guarded by the
  ``metadata.resourceVersion`` the decision was made on (a 409 then means "decide again");
- children: server-side apply with a field manager.

Finalizers have their own module (:mod:`shared.kube.finalizer`). The annotation and status helpers
decide first, with a pure function of the cached object, whether the write would change anything,
and send no request when it would not; :func:`apply` (the API server makes an unchanged apply a
no-op) and :func:`get_or_create` always send. The pure parts (:func:`annotation_changes`, :func:`annotations_patch`,
:func:`merge_patch_changes`, :func:`merge_patch_applied`, :func:`status_changes`, :func:`apply_target`) are
importable and tested alone.

Objects ("cached object") may be msgspec Structs with a :class:`shared.kube.meta.ObjectMeta`-shaped
``metadata``, or decoded JSON mappings; values are encoded with :func:`shared.kube.meta.as_json`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.errors import AlreadyExists, NotFound
from shared.kube.meta import ObjectRef, as_json, meta_view

log = logging.getLogger(__name__)

__all__ = [
    "annotation_changes",
    "annotations_patch",
    "apply",
    "apply_target",
    "get_or_create",
    "merge_patch_applied",
    "merge_patch_changes",
    "patch_annotations",
    "patch_status",
    "status_changes",
]


# ── annotations ──────────────────────────────────────────────────────────────


def annotations_patch(changes: Mapping[str, str | None]) -> dict[str, object]:
    """The JSON merge patch (RFC 7386) ``{"metadata": {"annotations": changes}}``: a ``str`` sets a key,
    ``None`` strips it, keys not named are left alone."""
    return {"metadata": {"annotations": dict(changes)}}


def annotation_changes(current: Mapping[str, str] | None, changes: Mapping[str, str | None]) -> dict[str, str | None]:
    """The part of ``changes`` that differs from ``current`` (``None`` = no cached copy: all of it).

    A ``str`` value differs when the key is absent or holds another value; ``None`` (strip)
    differs when the key is present. An empty result means "send nothing".
    """
    if current is None:
        return dict(changes)
    return {k: v for k, v in changes.items() if (k in current if v is None else current.get(k) != v)}


async def patch_annotations(
    client: KubeApi, resource: Resource, obj_or_ref: Any, changes: Mapping[str, str | None]
) -> bytes | None:
    """Set (``str``) or strip (``None``) annotations by JSON merge patch; other keys are left alone.

    ``obj_or_ref`` is the cached object (its annotations decide what is already there) or an
    :class:`ObjectRef` (then every change is sent). Only the keys that differ are sent.

    Returns:
        The patched object's raw JSON, or None when nothing differs (no request sent).

    Raises:
        NotFound, Forbidden, ...: the typed :mod:`shared.kube.errors` of the PATCH.
    """
    if isinstance(obj_or_ref, ObjectRef):
        namespace, name, current = obj_or_ref.namespace, obj_or_ref.name, None
    else:
        view = meta_view(obj_or_ref)
        namespace, name, current = view.namespace, view.name, view.annotations
    diff = annotation_changes(current, changes)
    if not diff:
        return None
    return await client.merge_patch(resource, name, annotations_patch(diff), namespace)


# ── status ───────────────────────────────────────────────────────────────────


def merge_patch_changes(target: Any, patch: Any) -> bool:
    """Whether applying the JSON merge patch (RFC 7386) ``patch`` to ``target`` changes it.

    ``target`` is None for "absent". Scalars compare by JSON type and value (``true`` ≠ ``1``);
    lists are replaced whole, so they compare element-wise.
    """
    if not isinstance(patch, Mapping):
        return not _json_equal(target, patch)
    if not isinstance(target, Mapping):
        return True  # an object replaces a non-object (or fills an absent key)
    for key, value in patch.items():
        if value is None:
            if key in target:
                return True
        elif key not in target or merge_patch_changes(target[key], value):
            return True
    return False


def merge_patch_applied(target: Any, patch: Any) -> Any:
    """``target`` (JSON data, None for absent) after the JSON merge patch (RFC 7386) ``patch``, as the API
    server applies it: objects merge key by key, ``None`` deletes a key, anything else (lists included)
    replaces. Neither argument is modified."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch_applied(out.get(key), value)
    return out


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def status_changes(current: Any, status_patch: Mapping[str, Any]) -> bool:
    """Whether ``status_patch`` (JSON data) would change the cached object ``current`` (None: unknown → True).

    An empty patch never changes anything. A Struct's status is compared as :func:`as_json` renders
    it (fields it omits count as absent).
    """
    if not status_patch:
        return False
    if current is None:
        return True
    status = current.get("status") if isinstance(current, Mapping) else getattr(current, "status", None)
    return merge_patch_changes(as_json(status), status_patch)


async def patch_status(
    client: KubeApi,
    resource: Resource,
    namespace: str | None,
    name: str,
    status_patch: Any,
    *,
    current: Any = None,
    resource_version: str | None = None,
) -> bytes | None:
    """JSON merge patch ``{"status": status_patch}`` on the ``/status`` subresource.

    ``status_patch`` is JSON data or a value :func:`as_json` encodes (a typed patch Struct). Only
    ``status`` is written: the API server ignores spec and metadata on ``/status``. ``None`` values
    strip keys. Status is ours alone, so it is unguarded unless ``resource_version`` is given: then
    the patch carries it and the API server answers 409 if the object changed since (use it when the
    patch was decided on a live read, :func:`shared.kube.live.decide_on_live`).

    Returns:
        The patched object's raw JSON, or None when ``status_patch`` is empty or, given the
        cached ``current``, changes nothing (no request sent).

    Raises:
        Conflict: ``resource_version`` is stale.
        NotFound, Invalid (with causes), ...: the typed errors of the PATCH.
    """
    patch = as_json(status_patch)
    if not status_changes(current, patch):
        return None
    body: dict[str, Any] = {"status": dict(patch)}
    if resource_version is not None:
        body["metadata"] = {"resourceVersion": resource_version}
    return await client.merge_patch(resource, name, body, namespace, subresource="status")


# ── server-side apply ────────────────────────────────────────────────────────


def apply_target(resource: Resource, obj: Any) -> tuple[str | None, str, dict[str, Any]]:
    """``(namespace, name, body)`` for applying ``obj`` (a Struct or JSON mapping) as ``resource``.

    Raises:
        ValueError: ``apiVersion`` or ``kind`` missing or not those of ``resource``;
            ``metadata.name`` missing; ``metadata.namespace`` missing on a namespaced resource.
    """
    body = as_json(obj)
    if not isinstance(body, Mapping):
        raise ValueError("apply needs an object")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not api_version or not kind:
        raise ValueError("server-side apply needs apiVersion and kind")
    if (api_version, kind) != (resource.api_version, resource.kind):
        raise ValueError(f"{api_version} {kind} is not {resource.api_version} {resource.kind}")
    meta = body.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not name:
        raise ValueError("server-side apply needs metadata.name")
    if resource.namespaced and not namespace:
        raise ValueError(f"{kind} is namespaced: metadata.namespace is required")
    return (namespace if resource.namespaced else None), name, dict(body)


async def apply(
    client: KubeApi, resource: Resource, obj: Any, *, field_manager: str, force: bool = True
) -> bytes:
    """Server-side apply ``obj`` as ``field_manager`` (``force`` takes over conflicting fields).

    The API server itself makes an unchanged apply a no-op (no new resourceVersion).

    Returns:
        The applied object's raw JSON.

    Raises:
        ValueError: see :func:`apply_target` (no request sent).
        Conflict: a field is owned by another manager and ``force`` is False.
        Invalid, Forbidden, ...: other typed errors of the PATCH.
    """
    namespace, name, body = apply_target(resource, obj)
    return await client.apply(resource, name, body, namespace, field_manager=field_manager, force=force)


# ── get or create ────────────────────────────────────────────────────────────


async def get_or_create(
    client: KubeApi, resource: Resource, name: str, body: Any, namespace: str | None = None
) -> bytes:
    """The object ``name`` as it is, creating it from ``body`` (JSON data or a value :func:`as_json`
    encodes) when absent; a concurrent creator's copy wins (409 AlreadyExists → read it).

    Returns:
        The object's raw JSON.

    Raises:
        NotFound: it was deleted between a lost create race and the re-read.
        Invalid, Forbidden, ...: other typed errors of GET/POST.
    """
    try:
        return await client.get(resource, name, namespace)
    except NotFound:
        pass
    try:
        return await client.create(resource, as_json(body), namespace)
    except AlreadyExists:
        return await client.get(resource, name, namespace)
