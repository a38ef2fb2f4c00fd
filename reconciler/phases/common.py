"""What every phase handler shares: the collaborators (:class:`Deps`), the exit codes, and the builders
of the writes that keep the phase (a message, a stall) or leave it for Failed or the lifetime clock's
next phase (docs/behaviour.md#phases, docs/behaviour.md#timing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler import boundary, exports, lifetime_clock
from reconciler.claims import held_keys
from reconciler.conditions import conditions_for
from reconciler.decision import Decision, Observed
from reconciler.reasons import Reason
from reconciler.render import Manifest, RoutingConfig, render_children
from reconciler.status_patch import BoundaryPatch, StatusPatch
from reconciler.timing import TICK
from reconciler.transitions import observed_generation, phase_write
from shared.domain import annotations as ann
from shared.domain.api.boundary import Condition
from shared.domain.api.export import ExportSpec
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.duration import DurationError
from shared.domain.manifests.batch import Job
from shared.kube.events import Event
from shared.kube.meta import namespace_of

__all__ = [
    "EXIT_CHILD_STALLED",
    "EXIT_INVALID_SPEC",
    "EXIT_TIMEOUT",
    "Deps",
    "Evaluate",
    "Render",
    "RenderExportJob",
    "clock_exit",
    "converging_wait",
    "deadline_patch",
    "fail",
    "heartbeat",
    "message_write",
    "namespace_of",
    "stall",
    "status_message",
    "timed_out",
]

EXIT_CHILD_STALLED = 1
EXIT_INVALID_SPEC = 2
EXIT_TIMEOUT = 124
"""``status.exitCode`` for Failed, shell-style: 1 failure, 2 usage, 124 timeout (SIGKILL's 137:
:data:`reconciler.signals.EXIT_SIGKILL`)."""

_P = ProcessPhase

Render = Callable[[Observed], list[Manifest]]
Evaluate = Callable[[Sequence[Condition], Observed], boundary.BoundaryResult]
RenderExportJob = Callable[[Observed, int, ExportSpec], Job]


def _render(observed: Observed) -> list[Manifest]:
    process = observed.process
    return render_children(process, owner_uid=process.metadata.uid or "",
                           stable_keys=held_keys(observed.claims, process, RoutingConfig().cluster))


def _render_export_job(observed: Observed, index: int, export: ExportSpec) -> Job:
    return exports.export_job(observed.process, index, export, owner_uid=observed.process.metadata.uid or "",
                              config=exports.ExportJobConfig())


@dataclass(frozen=True)
class Deps:
    """The collaborators a decision calls: rendering (children, export Jobs) and boundary evaluation (all
    pure), and the ``--fleet-cluster`` that completes a claims key (``<cluster>/<app>``) when a hostname
    names none."""

    render: Render = field(default=_render)
    evaluate: Evaluate = field(default=boundary.evaluate)
    export_job: RenderExportJob = field(default=_render_export_job)
    fleet_cluster: str = RoutingConfig().cluster


def status_message(process: Process) -> str | None:
    return process.status.message if process.status is not None else None


def heartbeat(observed: Observed) -> float:
    """HEARTBEAT, shortened to the remaining TTL of an ephemeral Process (docs/behaviour.md#ttl)."""
    return lifetime_clock.requeue_with_ttl(observed.process, observed.now, observed.heartbeat_seconds)


def converging_wait(observed: Observed, wait: float) -> float:
    """``wait``, shortened so a converging Process is looked at again when its boundary deadline
    passes: the timeout is noticed on time, not at the next HEARTBEAT (docs/behaviour.md#boundary-timeout)."""
    try:
        deadline = boundary.boundary_deadline(observed.process)
    except DurationError:
        return wait
    if deadline is None:
        return wait
    return min(wait, max((deadline - observed.now).total_seconds(), TICK))


def message_write(observed: Observed, message: str, *, reason: str, stalled: bool | None = None) -> StatusPatch:
    """A status patch that keeps the phase and updates ``message`` and the conditions."""
    process = observed.process
    previous = process.status.conditions if process.status is not None else []
    conditions = conditions_for(process.phase, process.metadata.generation, observed.now, reason, message,
                                stalled=stalled, previous=previous)
    return StatusPatch(message=message, conditions=conditions, observed_generation=observed_generation(process))


def deadline_patch(observed: Observed) -> StatusPatch:
    """``status.boundary.deadline`` = now + ``boundary.timeout`` on entering Execing
    (docs/behaviour.md#boundary-timeout)."""
    try:
        timeout = boundary.boundary_timeout(observed.process)
    except DurationError:
        return StatusPatch()
    return StatusPatch(boundary=BoundaryPatch(deadline=observed.now + timeout))


def fail(observed: Observed, message: str, *, reason: str, exit_code: int) -> Decision:
    """→ Failed with ``exitCode`` and a reason (docs/behaviour.md#failed), plus a Warning Event."""
    return phase_write(
        observed,
        _P.FAILED,
        message,
        reason=reason,
        requeue_after=TICK,
        extra=StatusPatch(exit_code=exit_code),
        events=(Event.warning(reason, message),),
    )


def timed_out(observed: Observed) -> Decision | None:
    """→ Failed (exit 124) when the boundary deadline has passed in Execing/Running."""
    try:
        if not boundary.timeout_exceeded(observed.process, observed.now):
            return None
    except DurationError:
        return None  # an unparsable timeout is reported as an invalid spec in Execing
    timeout = observed.process.spec.boundary.timeout or "15m"
    phase = observed.process.phase.value
    return fail(
        observed,
        f"boundary timeout {timeout} exceeded in {phase}",
        reason=Reason.BOUNDARY_TIMEOUT,
        exit_code=EXIT_TIMEOUT,
    )


def clock_exit(observed: Observed, reason_text: str, gate: ProcessPhase, otherwise: ProcessPhase) -> Decision:
    """The lifetime clock fired at ``gate``: → Releasing when an export fires there, else ``otherwise``
    (docs/behaviour.md#teardown-policy)."""
    eph = observed.process.spec.lifetime.ephemeral
    if gate in (_P.ATTESTED, _P.FAILED) and eph is not None and eph.has_applicable_exports(gate):
        return phase_write(
            observed,
            _P.RELEASING,
            f"releasing exports — {reason_text}",
            reason=Reason.LIFETIME_EXPIRED,
            requeue_after=TICK,
            annotations={ann.RELEASED_FROM: gate.value},
        )
    return phase_write(observed, otherwise, reason_text, reason=Reason.LIFETIME_EXPIRED, requeue_after=TICK)


def stall(observed: Observed, message: str, *, reason: str, requeue_after: float | None = None) -> Decision:
    """Stay in the phase with ``Stalled=True`` (``reason``, ``message``) and one Warning Event; nothing
    but the requeue when the Process is already stalled for that reason with that message
    (docs/behaviour.md#execing, docs/behaviour.md#dependencies)."""
    process = observed.process
    conds = process.status.conditions if process.status is not None else []
    if any(c.type_ == "Stalled" and c.status == "True" and c.reason == reason and c.message == message
           for c in conds):
        return Decision(requeue_after=requeue_after)
    return Decision(
        status=message_write(observed, message, reason=reason, stalled=True),
        events=(Event.warning(reason, message),),
        requeue_after=requeue_after,
    )
