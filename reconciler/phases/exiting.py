"""Exiting, Failed, Zombie and Reaped: drain the child Processes, hold a failure for inspection, and
tear down (docs/behaviour.md#phases, docs/behaviour.md#exiting, docs/behaviour.md#failed)."""

from __future__ import annotations

from datetime import timedelta

from reconciler import lifetime_clock
from reconciler.decision import ChildSignal, Decision, Observed
from reconciler.phases.common import Deps, clock_exit, heartbeat, message_write, namespace_of, status_message
from reconciler.reasons import Reason
from reconciler.signals import ingest
from reconciler.timing import SHORT, TICK
from reconciler.transitions import phase_write
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal

__all__ = ["decide_exiting", "decide_failed", "decide_reaped", "decide_zombie"]

_P = ProcessPhase


def _pending_signal(child: Process) -> ProcessSignal | None:
    found = ingest(child.metadata.annotations)
    return found.signal if found is not None else None


def decide_exiting(observed: Observed, deps: Deps) -> Decision:
    """Drain children: SIGTERM every child Process, wait ``signals.sigtermGraceSeconds`` from entering
    Exiting, then SIGKILL the rest (when ``sigkillForce``); → Zombie once no child is left un-Reaped."""
    process = observed.process
    status = process.status
    has_pid = status is not None and status.pid is not None
    children = [c for c in observed.child_processes if c.phase is not _P.REAPED] if has_pid else []
    if not children:
        return phase_write(observed, _P.ZOMBIE, "exited; no child Processes left", reason=Reason.EXITED,
                           requeue_after=TICK)

    policy = process.spec.signals
    since = status.phase_since if status is not None and status.phase_since is not None else observed.now
    remaining = (since + timedelta(seconds=policy.sigterm_grace_seconds) - observed.now).total_seconds()
    sends: list[ChildSignal] = []
    if remaining > 0:
        for child in children:
            if child.phase.is_alive and child.phase is not _P.EXITING and _pending_signal(child) is None:
                sends.append(ChildSignal(namespace_of(child), child.metadata.name or "", ProcessSignal.SIGTERM))
        message = f"waiting for {len(children)} child Process(es) to exit (SIGTERM)"
        requeue = max(min(SHORT, remaining), TICK)
    elif policy.sigkill_force:
        for child in children:
            if _pending_signal(child) is not ProcessSignal.SIGKILL:
                sends.append(ChildSignal(namespace_of(child), child.metadata.name or "", ProcessSignal.SIGKILL))
        message = (
            f"grace period of {policy.sigterm_grace_seconds}s elapsed; "
            f"forcing {len(children)} child Process(es) (SIGKILL)"
        )
        requeue = SHORT
    else:
        message = (
            f"grace period of {policy.sigterm_grace_seconds}s elapsed; waiting for "
            f"{len(children)} child Process(es) (sigkillForce is false)"
        )
        requeue = observed.heartbeat_seconds
    patch = None if message == status_message(process) else message_write(observed, message, reason=Reason.DRAINING)
    return Decision(status=patch, signal_children=tuple(sends), requeue_after=requeue)


def decide_failed(observed: Observed, deps: Deps) -> Decision:
    """Deletion → Zombie; the lifetime clock → Releasing or Zombie; otherwise the Process stays
    Failed for inspection (Stalled=True) until deleted or SIGKILLed."""
    process = observed.process
    if process.metadata.deletion_timestamp is not None:
        return phase_write(observed, _P.ZOMBIE, "deletion requested", reason=Reason.DELETION_REQUESTED,
                           requeue_after=TICK)
    fired = lifetime_clock.evaluate(process, _P.FAILED, observed.now)
    if fired is not None:
        return clock_exit(observed, fired, _P.FAILED, _P.ZOMBIE)
    if process.spec.lifetime.resolved_ephemeral() is not None:
        return Decision(requeue_after=heartbeat(observed))
    return Decision()


def decide_zombie(observed: Observed, deps: Deps) -> Decision:
    """→ Reaped."""
    return phase_write(observed, _P.REAPED, "reaped", reason=Reason.REAPED, requeue_after=TICK)


def decide_reaped(observed: Observed, deps: Deps) -> Decision:
    """Delete the owned children still cached (every rendered kind), release the Process (its finalizer
    goes), and delete an ephemeral Process that is not already being deleted. No requeue."""
    process = observed.process
    delete_self = process.spec.lifetime.is_ephemeral and process.metadata.deletion_timestamp is None
    return Decision(delete=tuple(observed.children), released=True, delete_self=delete_self)
