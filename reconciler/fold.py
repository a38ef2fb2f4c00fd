"""Folding pass-through phases into one pass and one status write (docs/behaviour.md#folded-phases).

Forking and Execing are phases a new Process passes through without waiting for anything when its
dependencies are met and its children render: Pending → Forking → Execing → Running is then three
decisions, each on the Process as the one before left it. Instead of writing each phase and coming
back a TICK later, the controller decides the next phase at once on the Process as the previous
decision's status write *would* leave it (:func:`passed`), and :func:`chained` makes the decisions
one: one status write (the last phase, with the fields every step wrote), every step's Event in
order, every transition recorded (:attr:`~reconciler.decision.Decision.passed`), the last step's
requeue. A step that waits (dependencies unmet, preconditions, a refused PID, startSuspended) ends
the fold, its own writes included; so does reaching a phase outside :data:`PASS_THROUGH`.

All pure: the controller (:mod:`reconciler.controller`) runs the loop, since a step may need a PID.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from msgspec import UNSET

from reconciler.decision import Decision
from reconciler.status_patch import StatusPatch, merged
from shared.domain.api.codec import convert, to_wire
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.kube.meta import as_json
from shared.kube.patch import merge_patch_applied

__all__ = ["MAX_STEPS", "PASS_THROUGH", "chained", "chained_status", "continues", "passed"]

PASS_THROUGH: Final = frozenset({ProcessPhase.FORKING, ProcessPhase.EXECING})
"""Phases a decision may go on from within the same pass: their handlers decide on the cache alone."""

MAX_STEPS: Final = 3
"""Decisions folded into one pass at most: Pending → Forking → Execing → Running."""


def continues(decision: Decision) -> bool:
    """Whether the next phase may be decided in the same pass: ``decision`` writes a phase change into
    :data:`PASS_THROUGH` and nothing the next decision could not be folded with (no annotations,
    ``spec.suspended``, deletes, signals, release, a claims release)."""
    t = decision.transition
    return (t is not None and t.target in PASS_THROUGH and decision.status is not None
            and decision.annotations is None and decision.suspended is None and not decision.allocate_pid
            and not decision.delete and not decision.signal_children and decision.signal is None
            and not decision.released and not decision.delete_self and decision.release_claims is None)


def passed(process: Process, status: StatusPatch) -> Process:
    """``process`` as the ``/status`` merge patch ``status`` would leave it (metadata unchanged: the
    write that would move its resourceVersion has not happened).

    Raises:
        shared.domain.api.codec.DecodeError: the patched status does not decode (a patch this
            reconciler built always does).
    """
    doc = to_wire(process)
    doc["status"] = merge_patch_applied(doc.get("status"), as_json(status))
    return convert(doc, Process)


def chained_status(first: StatusPatch | None, then: StatusPatch | None) -> StatusPatch | None:
    """One status merge patch with the effect of ``first`` followed by ``then`` (``boundary``, the one
    nested object, merges field by field; every other field of ``then`` wins)."""
    if first is None or then is None:
        return then if first is None else first
    out = merged(first, then)
    if first.boundary is not UNSET and then.boundary is not UNSET:
        out = merged(out, StatusPatch(boundary=merged(first.boundary, then.boundary)))
    return out


def chained(first: Decision, then: Decision) -> Decision:
    """``first`` (for which :func:`continues` holds) and ``then`` (decided on the Process ``first``
    leaves) as one decision: ``then``'s fields, with the status patches chained, ``first``'s applies
    and Events before ``then``'s, and ``first``'s phase change among :attr:`~Decision.passed` (the last
    one stays :attr:`~Decision.transition` when ``then`` changes no phase)."""
    transitions = [*first.transitions, *then.transitions]
    last = transitions.pop() if transitions else None
    return dataclasses.replace(
        then,
        status=chained_status(first.status, then.status),
        transition=last,
        passed=tuple(transitions),
        apply=(*first.apply, *then.apply),
        events=(*first.events, *then.events),
    )
