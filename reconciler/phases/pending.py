"""Pending and Forking: admission and identity, then the dependency gate and the PID
(docs/behaviour.md#phases, docs/behaviour.md#maxconcurrent, docs/behaviour.md#dependencies,
docs/behaviour.md#forking)."""

from __future__ import annotations

import dataclasses

from reconciler.concurrency import admission
from reconciler.decision import Decision, Observed
from reconciler.dependencies import dependency_problem, parent_problem
from reconciler.phases.common import Deps, deadline_patch, message_write, namespace_of, stall, status_message
from reconciler.pid import PidRefused
from reconciler.reasons import Reason
from reconciler.status_patch import StatusPatch, merged
from reconciler.timing import TICK
from reconciler.transitions import phase_write
from shared.domain import annotations as ann
from shared.domain.api.phase import ProcessPhase, phase_reached
from shared.domain.api.process import Process
from shared.domain.identity import derive_identity
from shared.kube.events import Event

__all__ = ["decide_forking", "decide_pending", "holds_finalizer", "pid_granted", "pid_refused",
           "unmet_dependencies"]

_P = ProcessPhase


def holds_finalizer(process: Process) -> bool:
    """Whether ``process`` must carry the Process finalizer: until it is Reaped. The controller adds it
    before the first write of a pass (at Pending, in practice) and removes it once a decision is
    ``released``."""
    return process.phase is not _P.REAPED


def decide_pending(observed: Observed, deps: Deps) -> Decision:
    """Stamp ``status.identity``, → Forking (the finalizer goes on first: :func:`holds_finalizer`).

    An ephemeral Process over its group's ``maxConcurrent`` waits here with reason ``MaxConcurrent``
    and a Normal Event of the same name, no requeue: a sibling leaving wakes it
    (docs/behaviour.md#maxconcurrent). ``signals.startSuspended`` sets ``spec.suspended`` in the same
    step, so the Process waits in Forking until SIGCONT.
    """
    process = observed.process
    gate = admission(process, observed.siblings)
    if not gate.admitted:
        if status_message(process) == gate.message:
            return Decision()
        status = message_write(observed, gate.message, reason=Reason.MAX_CONCURRENT)
        if process.status is None:  # a new Process: say its phase too, so `kubectl get` shows Pending
            status = merged(status, StatusPatch(phase=_P.PENDING, phase_since=observed.now))
        return Decision(status=status, events=(Event.normal(Reason.MAX_CONCURRENT, gate.message),))
    identity = derive_identity(process.spec)
    start_suspended = process.spec.signals.start_suspended
    message = f"declared {identity.name}"
    if start_suspended:
        message += "; suspended until SIGCONT (startSuspended)"
    decision = phase_write(
        observed,
        _P.FORKING,
        message,
        reason=Reason.DECLARED,
        requeue_after=TICK,
        extra=StatusPatch(identity=identity),
    )
    return dataclasses.replace(decision, suspended=True) if start_suspended else decision


def unmet_dependencies(observed: Observed) -> list[str]:
    """One message per unmet ``spec.dependsOn`` entry, in order (docs/behaviour.md#dependencies)."""
    process = observed.process
    unmet = []
    for dep in process.spec.depends_on:
        ref = ann.qualified_ref(dep.namespace or namespace_of(process), dep.name)
        target = observed.dependencies.get(ref)
        if target is None:
            unmet.append(f"{ref} not found")
        elif not phase_reached(target.phase, dep.must_reach):
            unmet.append(f"{ref} is {target.phase.value}; need {dep.must_reach.value}")
    return unmet


def decide_forking(observed: Observed, deps: Deps) -> Decision:
    """Dependency gate and PID: a self-dependency or a ``dependsOn`` cycle → ``Stalled``; wait on unmet
    ``dependsOn``; a parent PID no Process holds → ``Stalled``; else → Execing with the boundary
    deadline set, asking for a PID when there is none (:func:`pid_granted` / :func:`pid_refused`
    complete it). A stall is written once and left when the cause is gone (docs/behaviour.md#dependencies)."""
    problem = dependency_problem(observed.process, observed.dependencies, observed.processes_by_ref)
    if problem is not None:
        return stall(observed, problem.message, reason=problem.reason, requeue_after=observed.heartbeat_seconds)
    unmet = unmet_dependencies(observed)
    if unmet:
        message = f"waiting on {len(unmet)} dependency/dependencies: {'; '.join(unmet)}"
        if message == status_message(observed.process):
            return Decision(requeue_after=observed.heartbeat_seconds)
        return Decision(
            status=message_write(observed, message, reason=Reason.DEPENDENCIES_UNMET),
            requeue_after=observed.heartbeat_seconds,
        )
    status = observed.process.status
    needs_pid = status is None or status.pid is None
    if needs_pid:
        orphan = parent_problem(observed.process, observed.processes_by_pid)
        if orphan is not None:
            return stall(observed, orphan.message, reason=orphan.reason, requeue_after=observed.heartbeat_seconds)
    decision = phase_write(
        observed,
        _P.EXECING,
        "dependencies satisfied",
        reason=Reason.DEPENDENCIES_SATISFIED,
        requeue_after=TICK,
        extra=deadline_patch(observed),
    )
    return dataclasses.replace(decision, allocate_pid=needs_pid)


def pid_granted(decision: Decision, process: Process, pid: str) -> Decision:
    """``decision`` (which asked for a PID) writing ``status.pid`` and ``status.parent`` (None, deleted, for a root)."""
    granted = StatusPatch(pid=pid, parent=process.spec.identity.parent)
    return dataclasses.replace(decision, status=merged(decision.status or StatusPatch(), granted), allocate_pid=False)


def pid_refused(observed: Observed, decision: Decision, refused: PidRefused) -> Decision:
    """Instead of ``decision``: stay in Forking with the refusal as ``message`` and a Warning Event
    ``PidRefused`` (the conditions say so too, so a stall the Process just left is not kept), and try
    again when ``decision`` would have come back (docs/behaviour.md#forking)."""
    requeue = decision.requeue_after if decision.requeue_after is not None else observed.heartbeat_seconds
    return Decision(status=message_write(observed, refused.reason, reason=Reason.PID_REFUSED),
                    events=(Event.warning(Reason.PID_REFUSED, refused.reason),), requeue_after=requeue)
