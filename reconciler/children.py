"""The children of a Process as the reconciler reads them back: their refs and their readiness.

A child is any object the Process rendered (Flux objects, routing objects) or a boundary condition
names (a Job, a receipt ConfigMap). :class:`ChildRef` names one; :func:`child_state` reads the
readiness of a cached document the way Flux and kstatus report it (docs/behaviour.md "Running").
Pure: documents in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from shared.domain.resources import FLUX_KINDS

__all__ = [
    "FLUX_API_GROUPS",
    "NEVER_SUCCEEDED",
    "TERMINAL_REASONS",
    "ChildRef",
    "ChildState",
    "Document",
    "child_ref",
    "child_state",
    "is_flux_resource",
    "served_api_version",
]

Document = Mapping[str, object]
"""A decoded JSON object (a cached child as the API server serves it)."""

FLUX_API_GROUPS: Final = frozenset(r.group for r in FLUX_KINDS)
"""Children from these groups are the Process's ``status.fluxResources``; routing objects are not."""

TERMINAL_REASONS: Final = frozenset({"RetriesExceeded", "InvalidChartReference", "MissingRollbackTarget"})
"""Flux ``Ready=False`` reasons that no retry will fix: the child is stalled (docs/behaviour.md "Failed")."""


@dataclass(frozen=True)
class ChildRef:
    """One child by apiVersion, kind, namespace and name."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class ChildState:
    """What the reconciler knows of one child from the cache.

    ``ready``: the ``Ready`` condition's status (True/False), None when absent, Unknown or stale;
    ``stalled``: a terminal failure (``Stalled=True``, or ``Ready=False`` with a terminal reason);
    ``reason`` / ``message``: from that condition; ``object``: the cached document.
    """

    ref: ChildRef
    ready: bool | None
    stalled: bool = False
    reason: str = ""
    message: str = ""
    object: Document = field(default_factory=dict)


def _mapping(value: object) -> Document:
    return value if isinstance(value, Mapping) else {}


def child_ref(doc: Document) -> ChildRef:
    """The ref of a cached document (a missing namespace reads as ``default``)."""
    meta = _mapping(doc.get("metadata"))
    return ChildRef(
        api_version=str(doc.get("apiVersion", "")),
        kind=str(doc.get("kind", "")),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
    )


_SERVED: Final = {(r.group, r.kind): r.api_version for r in FLUX_KINDS}


def served_api_version(api_version: str, kind: str) -> str:
    """The apiVersion we render and cache a Flux ``kind`` at, for a ref written at another version of its
    group (the reference's ``source.toolkit.fluxcd.io/v1beta2`` OCIRepository is our ``…/v1`` one: the API
    server serves one object at every version of its CRD); any other ref as it is (docs/migration.md)."""
    return _SERVED.get((api_version.rpartition("/")[0], kind), api_version)


def is_flux_resource(ref: ChildRef) -> bool:
    """True for the Flux kinds (counted in ``status.fluxResources`` and the artifact hash); False for routing."""
    return ref.api_version.partition("/")[0] in FLUX_API_GROUPS


def _conditions(doc: Document) -> list[Document]:
    conds = _mapping(doc.get("status")).get("conditions")
    return [c for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def _first(conds: list[Document], type_: str) -> Document | None:
    return next((c for c in conds if c.get("type") == type_), None)


NEVER_SUCCEEDED: Final = -1
"""``status.observedGeneration`` Flux keeps until an object's first successful reconcile."""


def _current(value: object, generation: object) -> bool:
    """True unless ``value`` and ``generation`` are both integers and ``value`` is behind."""
    return not (isinstance(value, int) and isinstance(generation, int) and value < generation)


def _fresh(doc: Document, cond: Document, ready: bool | None) -> bool:
    """Whether ``cond`` (a Ready or Stalled condition) speaks of the object's current generation.

    The condition's own ``observedGeneration`` decides when it has one; else ``status.observedGeneration``
    does, except that a failure next to Flux's ``-1`` ("never succeeded") is current: Flux moves
    ``status.observedGeneration`` on success only (docs/behaviour.md#child-readiness). A success needs
    both to be current.
    """
    generation = _mapping(doc.get("metadata")).get("generation")
    observed = _mapping(doc.get("status")).get("observedGeneration")
    own = cond.get("observedGeneration")
    if ready is True:
        return _current(own, generation) and _current(observed, generation)
    if isinstance(own, int):
        return _current(own, generation)
    return observed == NEVER_SUCCEEDED or _current(observed, generation)


def child_state(doc: Document) -> ChildState:
    """Readiness of a Flux/kstatus object.

    ``ready``: the first ``Ready`` condition — ``"True"`` → True, ``"False"`` → False, else None;
    None too while that condition is stale (:func:`_fresh`: a success needs ``status.observedGeneration``
    and the condition's own to be current; a failure needs the condition's, so Flux's ``Ready=False``
    with ``observedGeneration: -1`` reads as not ready, with its reason and message).
    ``stalled``: a current ``Stalled=True``, or ``Ready=False`` with a reason in :data:`TERMINAL_REASONS`.
    ``reason``/``message``: from the Stalled condition when stalled, else from Ready.
    """
    conds = _conditions(doc)
    ready_cond = _first(conds, "Ready")
    stalled_cond = _first(conds, "Stalled")
    ready: bool | None = None
    if ready_cond is not None:
        ready = {"True": True, "False": False}.get(str(ready_cond.get("status")))
        if not _fresh(doc, ready_cond, ready):
            ready = None
    stalled = False
    source = ready_cond
    if stalled_cond is not None and stalled_cond.get("status") == "True" and _fresh(doc, stalled_cond, False):
        stalled, source = True, stalled_cond
    elif ready is False and ready_cond is not None and ready_cond.get("reason") in TERMINAL_REASONS:
        stalled = True
    return ChildState(
        ref=child_ref(doc),
        ready=ready,
        stalled=stalled,
        reason=str((source or {}).get("reason") or ""),
        message=str((source or {}).get("message") or ""),
        object=doc,
    )
