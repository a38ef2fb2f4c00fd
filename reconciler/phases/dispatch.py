"""The dispatcher: one reconcile of one Process picks what acts — deletion, a signal, suspension or the
phase's handler — and completes the handler's decision (docs/behaviour.md#one-process-reconcile)."""

from __future__ import annotations

from collections.abc import Callable

from reconciler.adoption import with_adoption, with_takeover_deadline
from reconciler.decision import Decision, Observed
from reconciler.duplicates import with_pid_conflict
from reconciler.phases.common import Deps
from reconciler.phases.execing import decide_execing
from reconciler.phases.exiting import decide_exiting, decide_failed, decide_reaped, decide_zombie
from reconciler.phases.pending import decide_forking, decide_pending
from reconciler.phases.releasing import decide_reconverging, decide_releasing
from reconciler.phases.running import decide_attested, decide_running
from reconciler.reasons import Reason
from reconciler.routing import with_routing
from reconciler.signals import decide_signal, ingest
from reconciler.status import with_fresh_status
from reconciler.timing import TICK
from reconciler.transitions import IllegalTransition, phase_write
from shared.domain.api.phase import ProcessPhase
from shared.kube.events import Event

__all__ = ["HANDLERS", "Handler", "decide"]

_P = ProcessPhase

Handler = Callable[[Observed, Deps], Decision]

HANDLERS: dict[ProcessPhase, Handler] = {
    _P.PENDING: decide_pending,
    _P.FORKING: decide_forking,
    _P.EXECING: decide_execing,
    _P.RUNNING: decide_running,
    _P.ATTESTED: decide_attested,
    _P.RECONVERGING: decide_reconverging,
    _P.RELEASING: decide_releasing,
    _P.EXITING: decide_exiting,
    _P.FAILED: decide_failed,
    _P.ZOMBIE: decide_zombie,
    _P.REAPED: decide_reaped,
}


def _routed(observed: Observed, deps: Deps, decision: Decision) -> Decision:
    """``decision`` completed by :func:`reconciler.routing.with_routing`, with ``deps``'s render and
    fleet cluster."""
    return with_routing(observed, decision, render=deps.render, fleet_cluster=deps.fleet_cluster)


def _leaves(observed: Observed, deps: Deps, decision: Decision) -> Decision:
    """A deletion's or a signal's phase change, completed by :func:`reconciler.routing.with_routing` (a
    holder leaving Running or Attested gives its claims up in the same step); a signal that changes no
    phase as it is."""
    return _routed(observed, deps, decision) if decision.transition is not None else decision


def decide(observed: Observed, deps: Deps | None = None) -> Decision:
    """One reconcile of one Process (docs/behaviour.md#one-process-reconcile), in order:

    1. deletion pre-emption: an alive Process being deleted goes to Exiting **once**;
    2. the signal annotation, if any (every phase; one-shot);
    3. ``spec.suspended`` on an alive Process not being deleted: wait, no writes;
    4. the phase handler, its decision completed by :func:`reconciler.routing.with_routing` and
       :func:`reconciler.status.with_fresh_status`.

    A decision of 1, 2 or 4 on a status another controller wrote (the Rust reference's) is completed by
    :func:`reconciler.adoption.with_adoption`: written once as ours, with an Event saying what changed. A
    handler's decision on a Process holding a sequence number an earlier one holds too (the reference's
    duplicates) also says so (:func:`reconciler.duplicates.with_pid_conflict`).

    A phase change of 1 or 2 is completed by :func:`reconciler.routing.with_routing` too, so a holder
    leaving Running or Attested by deletion or a signal gives its stable names up in that step.

    A handler asking for an illegal transition is refused: nothing is written, a Warning Event
    ``IllegalTransition`` is recorded and the Process is retried after HEARTBEAT.
    """
    deps = deps or Deps()
    observed = with_takeover_deadline(observed)
    process = observed.process
    phase = process.phase
    deleting = process.metadata.deletion_timestamp is not None
    try:
        if deleting and phase.is_alive and phase is not _P.EXITING:
            return with_adoption(observed, _leaves(observed, deps, phase_write(
                observed, _P.EXITING, "deletion requested", reason=Reason.DELETION_REQUESTED, requeue_after=TICK
            )))
        found = ingest(process.metadata.annotations)
        if found is not None:
            return with_adoption(observed, _leaves(observed, deps, decide_signal(observed, found.raw, found.signal)))
        if process.spec.suspended and phase.is_alive and not deleting:
            return Decision(requeue_after=observed.heartbeat_seconds)
        decision = with_fresh_status(observed, _routed(observed, deps, HANDLERS[phase](observed, deps)))
        return with_pid_conflict(observed, with_adoption(observed, decision))
    except IllegalTransition as err:
        return Decision(
            events=(Event.warning(Reason.ILLEGAL_TRANSITION, str(err)),),
            requeue_after=observed.heartbeat_seconds,
        )
