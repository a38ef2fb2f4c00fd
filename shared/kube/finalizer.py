"""Finalizers: the guarded list writes, and one helper that runs a reconcile as Apply or Cleanup.

Writes (docs/runtime.md, "Finalizers"): a finalizer is added or removed by a JSON merge patch of the
whole ``metadata.finalizers`` list *carrying the observed* ``metadata.resourceVersion``
(client-go's ``MergeFromWithOptimisticLock``). A concurrent change makes the API server answer 409;
the object is re-read, the list recomputed, and the patch retried per :data:`DEFAULT_RETRY`, so
another controller's finalizer is never dropped or resurrected. No finalizer is added to an object
already being deleted (the API server forbids it).

:func:`finalize` is the kube-rs ``finalizer()`` shape: a live object gets the finalizer before it is
converged (:class:`Apply`); a deleting object that still carries it is cleaned up (:class:`Cleanup`),
and the finalizer is removed once the reconcile reports the object ``released`` (it holds nothing
any more). A reconcile may also report ``released`` for a live object whose work is over (a Reaped
Process): the finalizer then goes as well, so a later delete is immediate.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.controller import Result
from shared.kube.errors import Conflict, NotFound
from shared.kube.meta import MetaView, meta_view
from shared.kube.ratelimit import Backoff

__all__ = [
    "DEFAULT_RETRY",
    "Apply",
    "Cleanup",
    "Outcome",
    "add_finalizer",
    "add_finalizer_patch",
    "finalize",
    "finalizers_patch",
    "remove_finalizer",
    "remove_finalizer_patch",
    "with_finalizer",
    "without_finalizer",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_RETRY = Backoff(initial=0.010, factor=1.0, jitter=0.1, steps=5)
"""Retry of a conflicting guarded write: client-go ``retry.DefaultRetry`` (5 steps, 10 ms, factor 1, jitter 0.1)."""


# ── the list (pure) ──────────────────────────────────────────────────────────


def with_finalizer(finalizers: Sequence[str] | None, finalizer: str) -> list[str] | None:
    """``finalizers`` with ``finalizer`` appended, or None when it is already there (nothing to write).

    None input means an empty list; other controllers' entries keep their place.
    """
    current = list(finalizers or ())
    if finalizer in current:
        return None
    return [*current, finalizer]


def without_finalizer(finalizers: Sequence[str] | None, finalizer: str) -> list[str] | None:
    """``finalizers`` without any occurrence of ``finalizer``, or None when it is absent (nothing to write)."""
    current = list(finalizers or ())
    if finalizer not in current:
        return None
    return [f for f in current if f != finalizer]


def finalizers_patch(finalizers: Sequence[str], resource_version: str) -> dict[str, object]:
    """The merge patch that replaces ``metadata.finalizers``, guarded by ``resource_version``."""
    return {"metadata": {"finalizers": list(finalizers), "resourceVersion": resource_version}}


def add_finalizer_patch(view: MetaView, finalizer: str) -> dict[str, object] | None:
    """The guarded merge patch that appends ``finalizer``, or None when nothing should be sent:
    already present, or the object is being deleted (the API server forbids new finalizers then).

    Raises:
        ValueError: the view carries no resourceVersion (the patch would be unguarded).
    """
    if view.deleting:
        return None
    wanted = with_finalizer(view.finalizers, finalizer)
    return None if wanted is None else finalizers_patch(wanted, _require_rv(view))


def remove_finalizer_patch(view: MetaView, finalizer: str) -> dict[str, object] | None:
    """The guarded merge patch without ``finalizer``, or None when it is absent.

    Raises:
        ValueError: the view carries no resourceVersion (the patch would be unguarded).
    """
    wanted = without_finalizer(view.finalizers, finalizer)
    return None if wanted is None else finalizers_patch(wanted, _require_rv(view))


def _require_rv(view: MetaView) -> str:
    if not view.resource_version:
        raise ValueError(f"{view.name}: no metadata.resourceVersion to guard the finalizer patch with")
    return view.resource_version


# ── the guarded writes ───────────────────────────────────────────────────────


async def _guarded_write(
    client: KubeApi,
    resource: Resource,
    namespace: str | None,
    name: str,
    compose: Callable[[MetaView], dict[str, object] | None],
    current: Any,
    retry: Backoff,
) -> bytes | None:
    """The guarded write: the patched object's JSON, or None when nothing was sent (or it is gone)."""
    delays = retry.delays()
    obj = current if current is not None and meta_view(current).resource_version else None
    while True:
        if obj is None:
            try:
                obj = msgspec.json.decode(await client.get(resource, name, namespace))
            except NotFound:
                return None
        patch = compose(meta_view(obj))
        if patch is None:
            return None
        try:
            return await client.merge_patch(resource, name, patch, namespace)
        except NotFound:
            return None
        except Conflict:
            delay = next(delays, None)
            if delay is None:
                raise
            log.debug("finalizer patch of %s/%s conflicted; re-reading", namespace, name)
            await anyio.sleep(delay)
            obj = None


async def add_finalizer(
    client: KubeApi,
    resource: Resource,
    namespace: str | None,
    name: str,
    finalizer: str,
    *,
    current: Any = None,
    retry: Backoff = DEFAULT_RETRY,
) -> bool:
    """Append ``finalizer`` to ``metadata.finalizers`` with a resourceVersion-guarded merge patch.

    ``current`` is the cached object (may be stale) or None (then the object is read with GET).
    On 409 the object is re-read, the list recomputed from the fresh copy, and the patch retried
    per ``retry``, so a finalizer another controller added meanwhile is kept.

    Returns:
        True when a patch was written; False when nothing was sent or needed: already present,
        the object is being deleted, or it is gone.

    Raises:
        Conflict: still conflicting after ``retry.steps`` attempts.
        Forbidden, Invalid, ...: other typed errors of GET/PATCH.
    """
    return await _added(client, resource, namespace, name, finalizer, current, retry) is not None


async def _added(client: KubeApi, resource: Resource, namespace: str | None, name: str, finalizer: str,
                 current: Any, retry: Backoff) -> bytes | None:
    def compose(view: MetaView) -> dict[str, object] | None:
        return add_finalizer_patch(view, finalizer)

    return await _guarded_write(client, resource, namespace, name, compose, current, retry)


async def remove_finalizer(
    client: KubeApi,
    resource: Resource,
    namespace: str | None,
    name: str,
    finalizer: str,
    *,
    current: Any = None,
    retry: Backoff = DEFAULT_RETRY,
) -> bool:
    """Remove ``finalizer`` from ``metadata.finalizers`` with a resourceVersion-guarded merge patch.

    Same protocol as :func:`add_finalizer`. Removing the last finalizer of a deleting object lets
    the API server delete it: expect a DELETED event, not a new resourceVersion.

    Returns:
        True when a patch was written; False when the finalizer was absent or the object gone.

    Raises:
        Conflict: still conflicting after ``retry.steps`` attempts.
        Forbidden, Invalid, ...: other typed errors of GET/PATCH.
    """
    def compose(view: MetaView) -> dict[str, object] | None:
        return remove_finalizer_patch(view, finalizer)

    return await _guarded_write(client, resource, namespace, name, compose, current, retry) is not None


# ── Apply / Cleanup ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Apply(Generic[T]):
    """The object is live and carries the finalizer: converge it."""

    obj: T


@dataclass(frozen=True)
class Cleanup(Generic[T]):
    """The object is being deleted and still carries the finalizer: release what it holds."""

    obj: T


@dataclass(frozen=True)
class Outcome:
    """What a finalized reconcile returns: its :class:`Result`, and whether the object is ``released``
    (holds nothing any more, so the finalizer may go)."""

    result: Result
    released: bool = False


async def finalize(
    client: KubeApi,
    resource: Resource,
    finalizer: str,
    obj: T,
    reconcile: Callable[[Apply[T] | Cleanup[T]], Awaitable[Outcome]],
    *,
    needed: Callable[[T], bool] = lambda _: True,
    decode: Callable[[bytes], T] | None = None,
    remove_retry: Backoff = DEFAULT_RETRY,
) -> Result:
    """Run ``reconcile`` for the cached ``obj`` as :class:`Apply` or :class:`Cleanup`, managing ``finalizer``.

    - live and ``needed(obj)``, finalizer absent: add it (guarded), then Apply — the finalizer is on
      before any other write of the pass. When the live object refuses it (being deleted, gone, or it
      already carries the finalizer: the cached copy was stale), the pass ends without Apply; the
      newer object's watch event starts the next one;
    - live: Apply; if the outcome is ``released`` and the finalizer is held, remove it (the object's
      work is over; ``needed`` should then be False for it, or the next pass adds it back);
    - deleting, finalizer held: Cleanup; once the outcome is ``released``, remove the finalizer;
    - deleting, finalizer absent: nothing is ours to clean up; done, ``reconcile`` is not called.

    Unlike kube-rs, adding the finalizer does not end the pass: the guarded patch already proves the
    object is at the resourceVersion the reconcile reads. With ``decode``, Apply then gets the object
    as the finalizer patch answered (its new resourceVersion included), so a write guarded by it
    needs no GET first.

    ``remove_retry`` retries the removal on 409 (re-reading the object each time); a single try
    (``Backoff(0, steps=1)``) keeps it guarded by the version the release was decided on, for an owner
    whose release a concurrent write can make untrue (the 409 is raised).

    Raises:
        shared.kube.errors.ApiError: a finalizer write failed, or whatever ``reconcile`` raises.
    """
    view = meta_view(obj)
    held, added = finalizer in view.finalizers, False
    if view.deleting:
        if not held:
            return Result.done()
        outcome = await reconcile(Cleanup(obj))
    else:
        if not held and needed(obj):
            written = await _added(client, resource, view.namespace, view.name, finalizer, obj, DEFAULT_RETRY)
            if written is None:
                # Refused on the live object: it is being deleted, gone, or already carries the finalizer.
                # The cached copy is stale in each case and its watch event is on the way; Apply on it
                # would converge an object that is going away.
                return Result.done()
            held = added = True
            if decode is not None:
                obj = decode(written)
        outcome = await reconcile(Apply(obj))
    if outcome.released and held:
        # a finalizer added in this very pass is not in the cached copy: re-read before removing it
        await remove_finalizer(client, resource, view.namespace, view.name, finalizer,
                               current=None if added else obj, retry=remove_retry)
    return outcome.result
