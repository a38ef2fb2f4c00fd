"""Sequence numbers the Rust reference handed out twice (docs/migration.md#duplicate-pids).

The reference's PID bump is an unguarded read-then-write, so Processes created together can share a
sequence number (docs/divergences.md#pid-allocation); ours never hands one out twice, but a takeover meets
the reference's. Renumbering would change a PID other objects name (children's annotations, parents'
``spec.identity.parent``, attestations), so both Processes keep theirs and keep running; the later one (by
``creationTimestamp``, then ``<namespace>/<name>``) is told: condition ``PidConflict=True`` reason
``DuplicatePid`` naming the earlier one, and one Warning Event. The condition goes once no other Process
holds the number. Pure: :func:`with_pid_conflict` completes a decision from ``observed.sequence_holders``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from msgspec import UNSET

from reconciler.decision import Decision, Observed
from reconciler.reasons import Reason
from reconciler.status_patch import StatusPatch, merged
from shared.domain.api.process import Process, ProcessCondition
from shared.kube.events import Event

__all__ = ["PID_CONFLICT", "earlier_holder", "with_pid_conflict"]

PID_CONFLICT = "PidConflict"
"""The condition type on the later of two Processes holding one sequence number."""


def _order(process: Process) -> tuple[str, str]:
    meta = process.metadata
    created = meta.creation_timestamp.isoformat() if meta.creation_timestamp is not None else ""
    return created, f"{meta.namespace}/{meta.name}"


def earlier_holder(observed: Observed) -> Process | None:
    """The first Process (creationTimestamp, then ``<namespace>/<name>``) holding ``observed.process``'s
    sequence number, when it is another one; None when this Process is the first or the only holder."""
    if not observed.sequence_holders:
        return None
    first = min((observed.process, *observed.sequence_holders), key=_order)
    return None if first is observed.process else first


def _conflict(observed: Observed, earlier: Process) -> ProcessCondition:
    process = observed.process
    pid = process.status.pid if process.status is not None else ""
    other = earlier.status.pid if earlier.status is not None else ""
    seq = (pid or "").rpartition(".")[2]
    message = (f"sequence number {seq} of PID {pid} is also held by {earlier.metadata.namespace}/"
               f"{earlier.metadata.name} (PID {other}), created earlier: both keep running with their PIDs, "
               f"none is renumbered")
    return ProcessCondition(type_=PID_CONFLICT, status="True", reason=Reason.DUPLICATE_PID, message=message,
                            last_transition_time=observed.now, observed_generation=process.metadata.generation)


def with_pid_conflict(observed: Observed, decision: Decision) -> Decision:
    """``decision`` with ``PidConflict`` written when an earlier Process holds this one's sequence number and
    the stored condition does not already say so (plus a Warning Event ``DuplicatePid``), or taken off when
    none does any more; unchanged otherwise."""
    status = observed.process.status
    if status is None:
        return decision
    earlier = earlier_holder(observed)
    patch = decision.status or StatusPatch()
    base: Sequence[ProcessCondition] = patch.conditions if patch.conditions is not UNSET else status.conditions
    stored = next((c for c in status.conditions if c.type_ == PID_CONFLICT), None)
    rest = [c for c in base if c.type_ != PID_CONFLICT]
    if earlier is None:
        if stored is None and len(rest) == len(base):
            return decision
        return dataclasses.replace(decision, status=merged(patch, StatusPatch(conditions=rest)))
    wanted = _conflict(observed, earlier)
    if stored is not None and (stored.status, stored.message) == (wanted.status, wanted.message):
        if patch.conditions is UNSET or any(c.type_ == PID_CONFLICT for c in patch.conditions):
            return decision
        return dataclasses.replace(decision, status=merged(patch, StatusPatch(conditions=[*rest, stored])))
    return dataclasses.replace(decision, status=merged(patch, StatusPatch(conditions=[*rest, wanted])),
                               events=(*decision.events, Event.warning(Reason.DUPLICATE_PID, wanted.message or "")))
