"""A status that says what the phase is: the kstatus conditions and ``observedGeneration`` rewritten when
the stored ones are stale or carry a refused write's stall (docs/behaviour.md#conditions,
docs/behaviour.md#write-failures). The merge patch itself: :mod:`reconciler.status_patch`."""

from __future__ import annotations

import dataclasses

from msgspec import UNSET

from reconciler.conditions import conditions_for, phase_truth, stale_status
from reconciler.decision import Decision, Observed
from reconciler.refusals import is_refusal
from reconciler.status_patch import StatusPatch, merged
from reconciler.transitions import observed_generation
from shared.domain.api.phase import ProcessPhase

__all__ = ["with_fresh_status"]

_P = ProcessPhase


def with_fresh_status(observed: Observed, decision: Decision) -> Decision:
    """``decision``, plus a rewrite of the kstatus conditions and ``observedGeneration`` when it writes no
    conditions and the stored ones no longer say what the phase is (a phase edited by hand, a spec
    changed on a Failed or Reaped Process, a status from before ``observedGeneration``): conditions are
    recomputed from the phase every time (docs/behaviour.md#conditions). A refused child write's stall
    (:func:`reconciler.refusals.is_refusal`) is taken off the same way: the write goes only if the
    decision's writes before it succeed (docs/behaviour.md#write-failures). Running and Attested with a
    new generation are left to :func:`reconciler.phases.running.spec_changed`."""
    process = observed.process
    if decision.status is not None and decision.status.conditions is not UNSET:
        return decision
    if process.status is None or not (stale_status(process) or is_refusal(process.status.conditions)):
        return decision
    status = process.status
    stalled = not is_refusal(status.conditions) and any(c.type_ == "Stalled" and c.status == "True"
                                                        for c in status.conditions)
    stall = True if stalled and process.phase not in (_P.ATTESTED, _P.REAPED) else None
    # the stored Ready's reason carries state (ExportsRunning): kept while Ready's status holds
    ready = next((c for c in status.conditions if c.type_ == "Ready"), None)
    keeps = ready is not None and ready.status == ("True" if phase_truth(process.phase, stalled=stall).ready
                                                   else "False")
    reason = ready.reason if keeps and ready is not None and ready.reason else process.phase.value
    message = ready.message if keeps and ready is not None and ready.message else status.message or reason
    patch = StatusPatch(
        conditions=conditions_for(process.phase, process.metadata.generation, observed.now, reason, message,
                                  stalled=stall, previous=status.conditions),
        observed_generation=observed_generation(process))
    return dataclasses.replace(decision, status=merged(decision.status or StatusPatch(), patch))
