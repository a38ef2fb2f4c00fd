"""Reconverging and Releasing: render again after drift or a new spec, and the export window before
teardown (docs/behaviour.md#phases, docs/behaviour.md#releasing)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler import exports
from reconciler.decision import Decision, Observed
from reconciler.phases.common import Deps, deadline_patch, message_write, stall, status_message
from reconciler.reasons import Reason
from reconciler.render import RenderError
from reconciler.timing import TICK
from reconciler.transitions import phase_write
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.kube.events import Event

__all__ = ["EXPORT_JOB_WAITING", "WAITING_JOB_POLL", "decide_reconverging", "decide_releasing"]

_P = ProcessPhase


def decide_reconverging(observed: Observed, deps: Deps) -> Decision:
    """→ Execing with a fresh boundary deadline."""
    return phase_write(
        observed,
        _P.EXECING,
        "reconverging: rendering again",
        reason=Reason.RECONVERGING,
        requeue_after=TICK,
        extra=deadline_patch(observed),
    )


EXPORT_JOB_WAITING = Reason.EXPORT_JOB_WAITING
"""The Releasing reason while an export Job has no pod and its Job controller says why."""

WAITING_JOB_POLL = 10.0
"""Seconds between looks at an export Job the Job controller handled but that has no pod: the Warning
Event saying why (``FailedCreate``), and its retries, change nothing on the Job that would wake us."""

_EXPORTS_STARTED = frozenset({Reason.EXPORTS_RUNNING, Reason.EXPORT_JOB_LOST, Reason.EXPORT_JOB_WAITING})
"""Condition reasons a Releasing pass that applied export Jobs writes."""


def _exports_started(process: Process) -> bool:
    """An earlier Releasing pass applied the export Jobs (its reason is on the Ready condition)."""
    conds = process.status.conditions if process.status is not None else []
    return any(c.type_ == "Ready" and c.reason in _EXPORTS_STARTED for c in conds)


def _export_warnings(process: Process, runs: Sequence[exports.ExportRun], *, invalid: bool,
                     failed: bool) -> tuple[Event, ...]:
    """``InvalidExport`` per export whose union does not resolve, ``ExportFailed`` per failed export."""
    events = []
    for run in runs:
        if invalid and run.state is exports.ExportState.INVALID:
            events.append(Event.warning(Reason.INVALID_EXPORT, f"export {run.index} not run: {run.detail}"))
        elif failed and run.state is exports.ExportState.FAILED:
            text = f"export {run.index} (Job {exports.export_job_name(process, run.index)}) failed"
            events.append(Event.warning(Reason.EXPORT_FAILED, f"{text}: {run.detail}" if run.detail else text))
    return tuple(events)


def decide_releasing(observed: Observed, deps: Deps) -> Decision:
    """The export window (docs/behaviour.md#releasing): one export Job per export whose trigger fires on
    the ``released-from`` gate; wait for each to finish (woken by the Job watch); then → Exiting
    (gate Attested) or → Zombie (gate Failed) with ``exports complete (succeeded=<s>, failed=<f>)``.

    A failed Job does not block. An export whose union does not resolve is not run, counted failed,
    with a Warning ``InvalidExport``; each failed export gets a Warning ``ExportFailed`` (with the
    receipt's ``evidence.error`` when its receipt ConfigMap parses); a Job deleted before it finished
    is applied again with a Warning ``ExportJobLost``.
    """
    process = observed.process
    gate = exports.gate_of(process)
    nxt = _P.ZOMBIE if gate is _P.FAILED else _P.EXITING
    started = _exports_started(process)
    runs = exports.export_runs(process, gate, observed.export_jobs, observed.children, started=started,
                               warnings=observed.export_job_warnings)
    if not runs:
        return phase_write(observed, nxt, f"releasing → {nxt.value} — no applicable exports", reason=Reason.RELEASED,
                           requeue_after=TICK)
    state = exports.ExportState
    succeeded = exports.count(runs, state.SUCCEEDED)
    failed = exports.count(runs, state.FAILED, state.INVALID)
    in_flight = exports.count(runs, state.START, state.RUNNING)
    if not in_flight:
        return phase_write(
            observed, nxt, f"releasing → {nxt.value} — exports complete (succeeded={succeeded}, failed={failed})",
            reason=Reason.EXPORTS_FAILED if failed else Reason.EXPORTS_COMPLETE, requeue_after=TICK,
            events=_export_warnings(process, runs, invalid=not started, failed=True))

    starting = [r for r in runs if r.state is state.START]
    try:
        jobs = tuple(deps.export_job(observed, r.index, r.export) for r in starting)
    except RenderError as err:
        return stall(observed, f"cannot render export Jobs: {err}", reason=Reason.INVALID_SPEC)
    lost = [r for r in starting if r.lost]
    held = [(r, f"export {r.index} (Job {exports.export_job_name(process, r.index)}): {r.detail}")
            for r in runs if r.state is state.RUNNING and r.detail]
    message = "; ".join([f"releasing — waiting for {in_flight} export Job(s) (succeeded={succeeded}, failed={failed})",
                         *(why for _, why in held)])
    reason = Reason.EXPORT_JOB_LOST if lost else Reason.EXPORT_JOB_WAITING if held else Reason.EXPORTS_RUNNING
    previous = status_message(process) or ""
    events = _export_warnings(process, runs, invalid=not started, failed=False) + tuple(
        Event.warning(Reason.EXPORT_JOB_LOST, f"export {r.index}: Job {exports.export_job_name(process, r.index)} was "
                                       "deleted before it finished; starting it again")
        for r in lost) + tuple(Event.warning(EXPORT_JOB_WAITING, why) for _, why in held if why not in previous)
    conds = process.status.conditions if process.status is not None else []
    same = previous == message and any(c.type_ == "Ready" and c.reason == reason for c in conds)
    status = None if same else message_write(observed, message, reason=reason)
    podless = any(job.status.without_pod() for job in observed.export_jobs.values())
    requeue = min(observed.heartbeat_seconds, WAITING_JOB_POLL) if podless else observed.heartbeat_seconds
    return Decision(apply=jobs, status=status, events=events, requeue_after=requeue)
