"""Write helpers: annotations, finalizers, status and server-side apply, each skipping no-op writes.

DESIGN §4 "Writes"; spec/runtime-anchors.md §1 ("Optimistic concurrency (409)", "Status
subresource", "Server-side apply") and §3 bug classes #7–#13, checklist §6 items 5–6:

- annotations: JSON merge patch of ``metadata.annotations`` (map keys merge, so other
  writers' keys survive); ``None`` strips a key;
- finalizers: JSON merge patch of the whole ``metadata.finalizers`` list *carrying the
  observed* ``metadata.resourceVersion`` (client-go's ``MergeFromWithOptimisticLock``): a
  concurrent change makes the API server answer 409, the list is re-read and recomputed,
  so another controller's finalizer is never dropped or resurrected (§3 #7, #8);
- status: JSON merge patch on the ``/status`` subresource only (§3 #11);
- children: server-side apply with a field manager.

Every helper decides first, with a pure function of the cached object, whether the write
would change anything, and sends no request when it would not (§3 #12). The pure parts
(:func:`annotation_changes`, :func:`add_finalizer_patch`, :func:`remove_finalizer_patch`,
:func:`merge_patch_changes`, :func:`status_changes`, :func:`apply_target`,
:meth:`RetryPolicy.delays`) are importable and tested alone.

Objects ("cached object") may be msgspec Structs with a ``metadata`` of
:class:`shared.domain.api.meta.ObjectMeta` shape, or decoded JSON mappings.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from shared.domain import finalizers as fin
from shared.domain.annotations import annotation_patch
from shared.domain.api.codec import to_wire
from shared.domain.api.wire import WireStruct
from shared.kube.client import KubeClient, Resource
from shared.kube.errors import Conflict, NotFound

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_RETRY",
    "MetaView",
    "ObjectRef",
    "RetryPolicy",
    "add_finalizer",
    "add_finalizer_patch",
    "annotation_changes",
    "apply",
    "apply_target",
    "as_json",
    "merge_patch_changes",
    "meta_view",
    "patch_annotations",
    "patch_status",
    "remove_finalizer",
    "remove_finalizer_patch",
    "status_changes",
]


# ── object views (pure) ──────────────────────────────────────────────────────


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


def as_json(value: Any) -> Any:
    """``value`` as plain JSON data: Structs of :mod:`shared.domain.api` via :func:`shared.domain.api.codec.to_wire`
    (the reference's emission rules, timestamps as RFC 3339 text), other Structs via
    ``msgspec.to_builtins``, anything else unchanged."""
    if isinstance(value, WireStruct):
        return to_wire(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return value


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
        annotations, finalizers = meta.annotations or {}, meta.finalizers or ()
    if not name:
        raise ValueError("object has no metadata.name")
    return MetaView(str(name), namespace or None, rv or None, dict(annotations), tuple(finalizers), deleting)


# ── annotations ──────────────────────────────────────────────────────────────


def annotation_changes(current: Mapping[str, str] | None, changes: Mapping[str, str | None]) -> dict[str, str | None]:
    """The part of ``changes`` that differs from ``current`` (``None`` = no cached copy: all of it).

    A ``str`` value differs when the key is absent or holds another value; ``None`` (strip)
    differs when the key is present. An empty result means "send nothing".
    """
    if current is None:
        return dict(changes)
    return {k: v for k, v in changes.items() if (k in current if v is None else current.get(k) != v)}


async def patch_annotations(
    client: KubeClient, resource: Resource, obj_or_ref: Any, changes: Mapping[str, str | None]
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
    return await client.merge_patch(resource, name, annotation_patch(diff), namespace)


# ── finalizers ───────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retry on 409: ``steps`` attempts, waits ``duration·factor^i`` stretched by up to ``jitter``.

    Default :data:`DEFAULT_RETRY` is client-go ``retry.DefaultRetry`` (5 steps, 10 ms,
    factor 1.0, jitter 0.1; spec/runtime-anchors.md §1 "Optimistic concurrency", §3 #10).
    """

    steps: int = 5
    duration: float = 0.010
    factor: float = 1.0
    jitter: float = 0.1

    def delays(self, rng: Callable[[], float] = random.random) -> list[float]:
        """Seconds to wait before attempts 2..steps: ``d_i·(1 + jitter·rng())``, ``d_i = duration·factor^i``."""
        return [self.duration * self.factor**i * (1 + self.jitter * rng()) for i in range(max(self.steps - 1, 0))]


DEFAULT_RETRY = RetryPolicy()


def add_finalizer_patch(view: MetaView, finalizer: str) -> dict[str, object] | None:
    """The guarded merge patch that appends ``finalizer``, or None when nothing should be sent:
    already present, or the object is being deleted (the API server forbids new finalizers then).

    Raises:
        ValueError: the view carries no resourceVersion (the patch would be unguarded).
    """
    if view.deleting:
        return None
    wanted = fin.ensure_finalizer(view.finalizers, finalizer)
    return None if wanted is None else fin.finalizers_patch(wanted, _require_rv(view))


def remove_finalizer_patch(view: MetaView, finalizer: str) -> dict[str, object] | None:
    """The guarded merge patch without ``finalizer``, or None when it is absent.

    Raises:
        ValueError: the view carries no resourceVersion (the patch would be unguarded).
    """
    wanted = fin.remove_finalizer(view.finalizers, finalizer)
    return None if wanted is None else fin.finalizers_patch(wanted, _require_rv(view))


def _require_rv(view: MetaView) -> str:
    if not view.resource_version:
        raise ValueError(f"{view.name}: no metadata.resourceVersion to guard the finalizer patch with")
    return view.resource_version


async def _guarded_finalizer_write(
    client: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    compose: Callable[[MetaView], dict[str, object] | None],
    current: Any,
    retry: RetryPolicy,
) -> bool:
    delays = iter(retry.delays())
    obj = current if current is not None and meta_view(current).resource_version else None
    while True:
        if obj is None:
            try:
                obj = msgspec.json.decode(await client.get(resource, name, namespace))
            except NotFound:
                return False
        patch = compose(meta_view(obj))
        if patch is None:
            return False
        try:
            await client.merge_patch(resource, name, patch, namespace)
            return True
        except NotFound:
            return False
        except Conflict:
            delay = next(delays, None)
            if delay is None:
                raise
            log.debug("finalizer patch of %s/%s conflicted; re-reading", namespace, name)
            await anyio.sleep(delay)
            obj = None


async def add_finalizer(
    client: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    finalizer: str,
    *,
    current: Any = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> bool:
    """Append ``finalizer`` to ``metadata.finalizers`` with a resourceVersion-guarded merge patch.

    ``current`` is the cached object (may be stale) or None (then the object is read with
    GET). On 409 the object is re-read, the list recomputed from the fresh copy, and the
    patch retried per ``retry`` (client-go DefaultRetry), so a finalizer another
    controller added meanwhile is kept.

    Returns:
        True when a patch was written; False when nothing was sent or needed: already
        present, the object is being deleted (no new finalizers then, §3 #8), or it is gone.

    Raises:
        Conflict: still conflicting after ``retry.steps`` attempts.
        Forbidden, Invalid, ...: other typed errors of GET/PATCH.
    """
    def compose(view: MetaView) -> dict[str, object] | None:
        return add_finalizer_patch(view, finalizer)

    return await _guarded_finalizer_write(client, resource, namespace, name, compose, current, retry)


async def remove_finalizer(
    client: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    finalizer: str,
    *,
    current: Any = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> bool:
    """Remove ``finalizer`` from ``metadata.finalizers`` with a resourceVersion-guarded merge patch.

    Same protocol as :func:`add_finalizer`. Removing the last finalizer of a deleting
    object lets the API server delete it (§3 #9): expect a DELETED event, not a new
    resourceVersion.

    Returns:
        True when a patch was written; False when the finalizer was absent or the object gone.

    Raises:
        Conflict: still conflicting after ``retry.steps`` attempts.
        Forbidden, Invalid, ...: other typed errors of GET/PATCH.
    """
    def compose(view: MetaView) -> dict[str, object] | None:
        return remove_finalizer_patch(view, finalizer)

    return await _guarded_finalizer_write(client, resource, namespace, name, compose, current, retry)


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
    """Whether ``status_patch`` would change the cached object ``current`` (None: unknown → True).

    An empty patch never changes anything. The status of a :mod:`shared.domain.api` Struct is compared
    as :func:`as_json` renders it (fields it omits count as absent).
    """
    if not status_patch:
        return False
    if current is None:
        return True
    status = current.get("status") if isinstance(current, Mapping) else getattr(current, "status", None)
    return merge_patch_changes(as_json(status), status_patch)


async def patch_status(
    client: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    status_patch: Mapping[str, Any],
    *,
    current: Any = None,
) -> bytes | None:
    """JSON merge patch ``{"status": status_patch}`` on the ``/status`` subresource.

    Only ``status`` is written: the API server ignores spec and metadata on ``/status``
    (§3 #11). ``None`` values strip keys. No resourceVersion guard: status is ours alone
    (§3 #10).

    Returns:
        The patched object's raw JSON, or None when ``status_patch`` is empty or, given the
        cached ``current``, changes nothing (no request sent).

    Raises:
        NotFound, Invalid (with causes), ...: the typed errors of the PATCH.
    """
    if not status_changes(current, status_patch):
        return None
    return await client.merge_patch(resource, name, {"status": dict(status_patch)}, namespace, subresource="status")


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
    client: KubeClient, resource: Resource, obj: Any, *, field_manager: str, force: bool = True
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
