"""kstatus conditions (``Ready``, ``Reconciling``, ``Stalled``) for a Process phase.

The table and the rules: docs/behaviour.md#conditions (kstatus, with ``observedGeneration``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process, ProcessCondition
from shared.domain.kstatus import CONDITION_TYPES, Truth, kstatus_conditions, truth_of

__all__ = ["CONDITION_TYPES", "conditions_agree", "conditions_for", "phase_truth", "stale_status"]

_P = ProcessPhase
_SETTLED = frozenset({_P.ATTESTED, _P.FAILED, _P.REAPED})
_STALL_PHASES = frozenset(ProcessPhase) - {_P.ATTESTED, _P.REAPED}
"""Phases a stall may be written in (Failed always is one; Forking and Execing stall on a problem
only the user can fix; any phase whose child write is refused, docs/behaviour.md#write-failures)."""


def phase_truth(phase: ProcessPhase, *, stalled: bool | None = None) -> Truth:
    """Which condition is True in ``phase``: Ready in Attested, Stalled in Failed (or when ``stalled``
    forces it), Reconciling in every other phase but Reaped."""
    is_stalled = phase is _P.FAILED if stalled is None else stalled
    return Truth(ready=phase is _P.ATTESTED and not is_stalled,
                 reconciling=phase not in _SETTLED and not is_stalled,
                 stalled=is_stalled)


def conditions_agree(phase: ProcessPhase, conditions: Sequence[ProcessCondition]) -> bool:
    """True when the stored kstatus conditions are the ones ``phase`` is written with: its own
    :func:`phase_truth`, or a stall in a phase that can stall; also True when none is stored (the next
    phase write adds them). False for a phase edited by hand under conditions written for another (a
    ``Ready=True`` left on a Reaped Process)."""
    stored = truth_of(conditions)
    if not any(c.type_ in CONDITION_TYPES for c in conditions):
        return True
    return stored == phase_truth(phase) or (phase in _STALL_PHASES and stored == phase_truth(phase, stalled=True))


def stale_status(process: Process) -> bool:
    """True when ``process``'s kstatus status no longer says what its phase and generation are: the
    conditions disagree with the phase (:func:`conditions_agree`) or a written ``status.observedGeneration``
    is not ``metadata.generation`` (a status from before the field is not stale for want of it)."""
    status = process.status
    if status is None:
        return False
    seen = status.observed_generation
    return (not conditions_agree(status.phase, status.conditions)
            or (seen is not None and seen != process.metadata.generation))


def conditions_for(
    phase: ProcessPhase,
    generation: int | None,
    now: datetime,
    reason: str,
    message: str,
    *,
    stalled: bool | None = None,
    previous: Sequence[ProcessCondition] = (),
) -> list[ProcessCondition]:
    """The three kstatus conditions for ``status.conditions``, in type order (:func:`phase_truth`).

    ``lastTransitionTime`` is kept from ``previous`` when a condition's status is unchanged;
    ``observedGeneration`` is ``generation`` (left out when None). Conditions of other types in
    ``previous`` (``StableName``, docs/behaviour.md#stable-name-claims) follow, unchanged.
    """
    out = kstatus_conditions(
        phase_truth(phase, stalled=stalled), previous, now,
        lambda type_, status, since: ProcessCondition(type_=type_, status=status, last_transition_time=since,
                                                      reason=reason, message=message,
                                                      observed_generation=generation))
    out.extend(c for c in previous if c.type_ not in CONDITION_TYPES)
    return out
