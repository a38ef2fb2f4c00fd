"""Taking over a status another controller wrote: the Rust reference's, left behind by a migration
(docs/migration.md#what-the-takeover-does).

Our first status write on a Process, and every phase write, carries ``status.observedGeneration`` and the
kstatus conditions; the reference never writes either. A stored status with neither is therefore someone
else's, and the first decision on it is completed here: the kstatus conditions and ``observedGeneration``
are written with it (a quiet Attested Process would otherwise never get them, and a later spec edit would
go unnoticed, docs/behaviour.md#spec-changes), and a Normal Event ``Adopted`` names every field the write
changes. The write makes the status ours, so this happens once. A SIGSTOPped Process is not decided on
(it waits without writes, docs/behaviour.md#one-process-reconcile), so its status stays the reference's
until SIGCONT.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import msgspec
from msgspec import UNSET

from reconciler import boundary
from reconciler.conditions import CONDITION_TYPES, conditions_for
from reconciler.decision import Decision, Observed
from reconciler.reasons import Reason
from reconciler.status_patch import BoundaryPatch, StatusPatch, merged
from reconciler.transitions import observed_generation
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.duration import DurationError
from shared.kube.events import Event

__all__ = ["foreign_status", "with_adoption", "with_takeover_deadline"]

_CONVERGING: Final = frozenset({ProcessPhase.EXECING, ProcessPhase.RUNNING, ProcessPhase.RECONVERGING})


def foreign_status(process: Process) -> bool:
    """True when ``process`` has a status none of our writes made: neither ``status.observedGeneration`` nor
    a kstatus condition (our first status write, and every phase write, carries both)."""
    status = process.status
    return (status is not None and status.observed_generation is None
            and not any(c.type_ in CONDITION_TYPES for c in status.conditions))


def with_takeover_deadline(observed: Observed) -> Observed:
    """``observed`` with the boundary deadline of a converging Process (Execing, Running, Reconverging) whose
    status another controller wrote counted from now: the reference never enforces ``boundary.timeout`` nor
    writes ``status.boundary.deadline``, so its ``phaseSince`` may be hours old, and a Process it left in
    Execing (an apply it was refused) would fail on our first pass instead of going on. :func:`with_adoption`
    writes that deadline (docs/migration.md#stuck-execing)."""
    process = observed.process
    status = process.status
    if (status is None or not foreign_status(process) or status.phase not in _CONVERGING
            or status.boundary.deadline is not None):
        return observed
    try:
        timeout = boundary.boundary_timeout(process)
    except DurationError:
        return observed
    fresh = msgspec.structs.replace(status, boundary=msgspec.structs.replace(status.boundary,
                                                                              deadline=observed.now + timeout))
    return dataclasses.replace(observed, process=msgspec.structs.replace(process, status=fresh))


def _changes(observed: Observed, patch: StatusPatch, decision: Decision) -> list[str]:
    """What ``patch`` writes over the stored status, and what else ``decision`` does, in words."""
    status = observed.process.status
    assert status is not None
    out = [f"observedGeneration {patch.observed_generation}"] if patch.observed_generation is not UNSET else []
    if patch.conditions is not UNSET:
        out.append("conditions " + ", ".join(f"{c.type_}={c.status}" for c in patch.conditions))
    if patch.boundary is not UNSET and patch.boundary.deadline not in (UNSET, None):
        out.append(f"boundary.deadline {patch.boundary.deadline.isoformat()} (the timeout counted from the "
                   "takeover: the reference enforces none)")
    if patch.phase is not UNSET and patch.phase is not status.phase:
        out.append(f"phase {status.phase.value} → {patch.phase.value}")
    if decision.delete:
        out.append(f"deleting what the {status.phase.value} Process still owns: "
                   + ", ".join(f"{r.kind} {r.namespace}/{r.name}" for r in decision.delete))
    return out


def with_adoption(observed: Observed, decision: Decision) -> Decision:
    """``decision`` completed for a status another controller wrote (:func:`foreign_status`): its status
    patch (an empty one when it writes none) also carries the kstatus conditions (for the stored phase,
    unless it writes its own) and ``observedGeneration``, and a Normal Event ``Adopted`` says what was
    rewritten and why. Any other decision as it is."""
    process = observed.process
    status = process.status
    if status is None or not foreign_status(process):
        return decision
    patch = decision.status or StatusPatch()
    if patch.conditions is UNSET:
        phase = patch.phase if patch.phase is not UNSET else status.phase
        message = patch.message if patch.message is not UNSET else status.message or phase.value
        patch = merged(patch, StatusPatch(conditions=conditions_for(
            phase, process.metadata.generation, observed.now, phase.value, message, previous=status.conditions)))
    if patch.observed_generation is UNSET:
        patch = merged(patch, StatusPatch(observed_generation=observed_generation(process)))
    phase = patch.phase if patch.phase is not UNSET else status.phase
    deadline = status.boundary.deadline
    if phase in _CONVERGING and deadline is not None:  # set by :func:`with_takeover_deadline`
        written = patch.boundary if patch.boundary is not UNSET else BoundaryPatch()
        if written.deadline is UNSET:
            patch = merged(patch, StatusPatch(boundary=msgspec.structs.replace(written, deadline=deadline)))
    why = ("status written by another controller (no observedGeneration, as the Rust reference writes it): "
           "taken over, writing " + "; ".join(_changes(observed, patch, decision)))
    return dataclasses.replace(decision, status=patch, events=(*decision.events, Event.normal(Reason.ADOPTED, why)))

