"""Deciding on the live object before a guarded write: one GET, only when a decision needs it.

Informer caches lag the API server, and our own last write may not have reached them yet (status-only
events do not even requeue). Most decisions are safe on a lagging cache — every write is level-based
and skipped when it changes nothing — but a few must not be repeated (allocating a PID, claiming a
pool member, writing Bound). For those, :func:`decide_on_live` reads the live object and, if it has
moved on from the cached copy, decides again from it; the caller then guards its write with the
basis's ``resourceVersion``, so a race after the read becomes a 409 and another decision
(docs/runtime.md, "Deciding on the live object").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.errors import NotFound
from shared.kube.meta import KubeObject

__all__ = ["Basis", "decide_on_live"]


T = TypeVar("T", bound=KubeObject)
D = TypeVar("D")


@dataclass(frozen=True)
class Basis(Generic[T, D]):
    """A decision and the object it was made on. ``live``: the object was checked against the API server
    (its ``metadata.resourceVersion`` is then the guard for the write)."""

    obj: T
    decision: D
    live: bool


async def decide_on_live(
    client: KubeApi,
    resource: Resource,
    cached: T,
    decide: Callable[[T], D],
    *,
    needs_live: Callable[[D], bool],
    decode: Callable[[bytes], T],
) -> Basis[T, D] | None:
    """Decide on ``cached``; if ``needs_live(decision)``, GET the object and decide again when it changed.

    Returns:
        The basis (the cached copy when it is current or no live read was needed, else the live
        object with its own decision), or None when the object no longer exists.

    Raises:
        shared.kube.errors.ApiError: the GET failed (other than 404).
    """
    decision = decide(cached)
    if not needs_live(decision):
        return Basis(cached, decision, live=False)
    meta = cached.metadata
    try:
        live = decode(await client.get(resource, meta.name or "", meta.namespace))
    except NotFound:
        return None
    if live.metadata.resource_version == meta.resource_version:
        return Basis(cached, decision, live=True)
    return Basis(live, decide(live), live=True)
