"""Every condition and Event reason the Process reconciler writes: one closed set, :class:`Reason`
(docs/behaviour.md#reasons, generated from it by ``python -m tools.gen_reasons``).

The values are the wire spellings and must not change. A pass that only refreshes stale conditions
writes the phase's name as reason (:func:`reconciler.status.with_fresh_status`); the phase names are
:class:`~shared.domain.api.phase.ProcessPhase`, not members here. The pool reconciler has its own
set (:mod:`pool_reconciler.reasons`): a spelling both use (``Draining``) means different things there.
"""

from __future__ import annotations

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.signal import ProcessSignal
from shared.domain.reasons import On, ReasonSet

__all__ = ["REFUSAL_REASONS", "Reason", "phase_event", "signal_reason"]

_C, _N, _W = On.CONDITION, On.NORMAL, On.WARNING


class Reason(ReasonSet):
    """The Process reconciler's reasons, in the order a Process meets them."""

    MAX_CONCURRENT = "MaxConcurrent", _C | _N, "Pending: the group's `maxConcurrent` is reached; waits for a slot"
    DECLARED = "Declared", _C, "Pending → Forking: `status.identity` stamped"
    DEPENDENCIES_UNMET = "DependenciesUnmet", _C, "Forking: waiting on `spec.dependsOn` entries"
    SELF_DEPENDENCY = "SelfDependency", _C | _W, "Forking, stalled: a `dependsOn` entry names the Process itself"
    DEPENDENCY_CYCLE = "DependencyCycle", _C | _W, "Forking, stalled: the `dependsOn` entries lead back to it"
    PARENT_NOT_FOUND = "ParentNotFound", _C | _W, "Forking, stalled: no Process holds the parent PID"
    PID_REFUSED = "PidRefused", _C | _W, "Forking: the ProcessTable refused a PID; tried again"
    DEPENDENCIES_SATISFIED = "DependenciesSatisfied", _C, "Forking → Execing: dependencies met, PID held"
    INVALID_SPEC = "InvalidSpec", _C | _W, (
        "→ Failed: the spec does not validate or render; in Releasing, stalled: export Jobs do not render")
    BOUNDARY_TIMEOUT = "BoundaryTimeout", _C | _W, "→ Failed: `boundary.timeout` passed in Execing or Running"
    INVALID_CEL_EXPRESSION = "InvalidCelExpression", _C | _W, "Execing, stalled: a Cel condition does not compile"
    CEL_TYPE_ERROR = "CelTypeError", _C | _W, "stalled: a Cel condition gives a value that is not a bool"
    CEL_EVALUATION_FAILED = "CelEvaluationFailed", _W, "a Cel row's evaluation gave no bool (a new message)"
    PRECONDITIONS_UNMET = "PreconditionsUnmet", _C, "Execing: waiting on preconditions"
    INTENT_NOT_SUPPORTED = "IntentNotSupported", _C | _W, "Execing, stalled: an intent tatara does not render"
    RENDERED = "Rendered", _C, "Execing → Running: the children are applied"
    CHILD_NOT_READY = "ChildNotReady", _C | _W, "Running: a child reports `Ready=False` (retried, not stalled)"
    CHILD_STALLED = "ChildStalled", _C | _W, "→ Failed: a child failed for good"
    POSTCONDITIONS_UNMET = "PostconditionsUnmet", _C, "Running: waiting on postconditions"
    ATTESTED = "Attested", _C, "Running → Attested: the attestation is written"
    SPEC_CHANGED = "SpecChanged", _C, "→ Reconverging: `metadata.generation` moved past `observedGeneration`"
    DRIFT = "Drift", _C, "Attested → Reconverging: a child not Ready or a postcondition no longer holding"
    RECONVERGING = "Reconverging", _C, "Reconverging → Execing: rendering again"
    LIFETIME_EXPIRED = "LifetimeExpired", _C, "the lifetime clock fired (TTL, teardown policy)"
    RELEASED = "Released", _C, "Releasing → the next phase: no export applies"
    EXPORTS_RUNNING = "ExportsRunning", _C, "Releasing: waiting for the export Jobs"
    EXPORT_JOB_WAITING = "ExportJobWaiting", _C | _W, "Releasing: an export Job has no pod, its Job controller says why"
    EXPORT_JOB_LOST = "ExportJobLost", _C | _W, "Releasing: an export Job was deleted before it finished; applied again"
    INVALID_EXPORT = "InvalidExport", _W, "Releasing: an export whose union does not resolve is not run"
    EXPORT_FAILED = "ExportFailed", _W, "Releasing: an export Job failed"
    EXPORTS_COMPLETE = "ExportsComplete", _C, "Releasing → the next phase: every export succeeded"
    EXPORTS_FAILED = "ExportsFailed", _C, "Releasing → the next phase: an export failed"
    DELETION_REQUESTED = "DeletionRequested", _C, "→ Exiting (alive) or → Zombie (Failed): the Process is deleted"
    DRAINING = "Draining", _C, "Exiting: waiting for the child Processes (SIGTERM, then SIGKILL)"
    EXITED = "Exited", _C, "Exiting → Zombie: no child Process left"
    REAPED = "Reaped", _C, "Zombie → Reaped"
    WRITE_REFUSED = "WriteRefused", _C | _W, "stalled: the API server answered 400, 403, 404 or 422 to a child write"
    KIND_NOT_SERVED = "KindNotServed", _C | _W, "stalled: a child's kind is not served (its CRD is missing)"
    STABLE_NAME_GRANTED = "StableNameGranted", _C | _N, "`StableName` True: the Process holds every stable name"
    STABLE_NAME_HELD = "StableNameHeld", _C | _W, "`StableName` False: another Process holds a stable name"
    STABLE_NAME_RELEASED = "StableNameReleased", _C | _N, "`StableName` False: left Running/Attested, names given up"
    ROUTING_DRIFT = "RoutingDrift", _N, "Attested: a routing child missing or changed was applied again"
    SIGNAL_RECEIVED = "SignalReceived", _N, "a signal acts"
    SIGNAL_IGNORED = "SignalIgnored", _N, "a signal does nothing in this phase (the message says why)"
    INVALID_SIGNAL = "InvalidSignal", _W, "the signal annotation names no signal; removed without effect"
    SIGNAL_HUP = "SignalHup", _C, "the phase write of SIGHUP"
    SIGNAL_TERM = "SignalTerm", _C, "the phase write of SIGTERM"
    SIGNAL_KILL = "SignalKill", _C, "the phase write of SIGKILL"
    SIGNAL_USR1 = "SignalUsr1", _C, "the phase write of SIGUSR1"
    SIGNAL_USR2 = "SignalUsr2", _C, "the phase write of SIGUSR2"
    ILLEGAL_TRANSITION = "IllegalTransition", _W, "a handler asked for a transition outside the table; nothing written"
    PHASE_FORKING = "PhaseForking", _N, "the phase changed to Forking"
    PHASE_EXECING = "PhaseExecing", _N, "the phase changed to Execing"
    PHASE_RUNNING = "PhaseRunning", _N, "the phase changed to Running"
    PHASE_ATTESTED = "PhaseAttested", _N, "the phase changed to Attested"
    PHASE_RECONVERGING = "PhaseReconverging", _N, "the phase changed to Reconverging"
    PHASE_RELEASING = "PhaseReleasing", _N, "the phase changed to Releasing"
    PHASE_EXITING = "PhaseExiting", _N, "the phase changed to Exiting"
    PHASE_FAILED = "PhaseFailed", _N, "the phase changed to Failed"
    PHASE_ZOMBIE = "PhaseZombie", _N, "the phase changed to Zombie"
    PHASE_REAPED = "PhaseReaped", _N, "the phase changed to Reaped"
    ADOPTED = "Adopted", _N, (
        "a status another controller wrote (no `observedGeneration`: the Rust reference's) rewritten once, "
        "the message names what")
    DUPLICATE_PID = "DuplicatePid", _C | _W, (
        "`PidConflict` True: an earlier Process holds the same sequence number (the reference's duplicates)")
    TABLE_COUNTED = "Counted", _C, "ProcessTable `Ready` True: the writer keeps its counts"
    TABLE_DELETING = "Deleting", _C, "ProcessTable `Reconciling` True: deleted while Processes still hold PIDs"
    PROCESS_TABLE_RECREATED = "ProcessTableRecreated", _W, "the ProcessTable was missing and is created again"
    PROCESS_TABLE_IN_USE = "ProcessTableInUse", _W, "the ProcessTable is being deleted while Processes hold PIDs"


REFUSAL_REASONS = frozenset({Reason.WRITE_REFUSED, Reason.KIND_NOT_SERVED})
"""The stalls a refused child write leaves (docs/behaviour.md#write-failures)."""


def phase_event(target: ProcessPhase) -> Reason:
    """``Phase<Target>``, the Normal Event of a phase change (:class:`ValueError` for Pending, which no
    transition enters)."""
    return Reason.named(f"Phase{target.value}")


def signal_reason(signal: ProcessSignal) -> Reason:
    """``Signal<Name>`` (``SignalHup``…), the reason of a signal's phase write (:class:`ValueError` for
    SIGSTOP and SIGCONT, which write no phase)."""
    return Reason.named(f"Signal{signal.short.title()}")
