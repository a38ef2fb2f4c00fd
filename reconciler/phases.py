"""The pure phase machine: one decision function per phase and the dispatcher :func:`decide`.

Each ``decide_<phase>(observed, deps) -> Decision`` reads only the snapshot; the executor
performs the result. The behaviour, phase by phase: docs/behaviour.md#phases (deletion runs once
through Exiting → Zombie → Reaped; Failed is reachable; Reaped tears down children; no hot loops:
a wait on a child relies on the child watch, HEARTBEAT is only a safety net).

Requeue constants (docs/behaviour.md#timing): TICK 1 s after a phase change, SHORT 5 s while
children drain, HEARTBEAT (``observed.heartbeat_seconds``, 30 s) for every wait.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from msgspec import UNSET

from reconciler import boundary, cel, exports, lifetime_clock
from reconciler.attestation import attest_process
from reconciler.children import ChildRef
from reconciler.claims import ELIGIBLE_PHASES, claims_after, held_keys, holder_keys, process_ref, standing
from reconciler.concurrency import admission
from reconciler.conditions import conditions_for, phase_truth, stale_status
from reconciler.decision import ChildSignal, Decision, Observed, SignalCount
from reconciler.dependencies import dependency_problem, parent_problem
from reconciler.pid import PidRefused
from reconciler.refusals import is_refusal
from reconciler.render import (
    IntentNotSupported,
    Manifest,
    RenderError,
    RoutingConfig,
    flux_resource_refs,
    manifest_ref,
    render_children,
)
from reconciler.routing import (
    INSTANCE,
    REASON_HELD,
    STABLE,
    STABLE_NAME,
    make_after_break,
    plan_routing,
    stable_name_condition,
)
from reconciler.signals import EffectKind, effect_of, ingest
from reconciler.status import BoundaryPatch, StatusPatch, merged
from reconciler.transitions import IllegalTransition, observed_generation, phase_write
from shared.domain import annotations as ann
from shared.domain.api.boundary import Condition, ConditionKind
from shared.domain.api.export import ExportSpec
from shared.domain.api.phase import ProcessPhase, phase_reached
from shared.domain.api.process import CheckedCondition, FluxResourceRef, Process, ProcessCondition
from shared.domain.api.signal import ProcessSignal
from shared.domain.api.tagged_union import VariantError
from shared.domain.duration import DurationError
from shared.domain.identity import derive_identity, intent_hash
from shared.domain.labels import ROUTING_FORM
from shared.domain.manifests.batch import Job
from shared.kube.events import Event

__all__ = [
    "HANDLERS",
    "SHORT",
    "TICK",
    "Deps",
    "decide",
    "decide_attested",
    "decide_execing",
    "decide_exiting",
    "decide_failed",
    "decide_forking",
    "decide_pending",
    "decide_reaped",
    "decide_reconverging",
    "decide_releasing",
    "decide_running",
    "decide_zombie",
    "holds_finalizer",
    "pid_granted",
    "pid_refused",
    "with_fresh_status",
    "with_routing",
]

TICK = 1.0
SHORT = 5.0

EXIT_CHILD_STALLED = 1
EXIT_INVALID_SPEC = 2
EXIT_TIMEOUT = 124
EXIT_SIGKILL = 137
"""``status.exitCode`` for Failed / SIGKILL, shell-style: 1 failure, 2 usage, 124 timeout, 128+9."""

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


# ── helpers ───────────────────────────────────────────────────────────────────


def _ns(process: Process) -> str:
    return process.metadata.namespace or "default"


def _status_message(process: Process) -> str | None:
    return process.status.message if process.status is not None else None


def _heartbeat(observed: Observed) -> float:
    """HEARTBEAT, shortened to the remaining TTL of an ephemeral Process (docs/behaviour.md#ttl)."""
    return lifetime_clock.requeue_with_ttl(observed.process, observed.now, observed.heartbeat_seconds)


def _converging_wait(observed: Observed, wait: float) -> float:
    """``wait``, shortened so a converging Process is looked at again when its boundary deadline
    passes: the timeout is noticed on time, not at the next HEARTBEAT (docs/behaviour.md#boundary-timeout)."""
    try:
        deadline = boundary.boundary_deadline(observed.process)
    except DurationError:
        return wait
    if deadline is None:
        return wait
    return min(wait, max((deadline - observed.now).total_seconds(), TICK))


def _message_write(observed: Observed, message: str, *, reason: str, stalled: bool | None = None) -> StatusPatch:
    """A status patch that keeps the phase and updates ``message`` and the conditions."""
    process = observed.process
    previous = process.status.conditions if process.status is not None else []
    conditions = conditions_for(process.phase, process.metadata.generation, observed.now, reason, message,
                                stalled=stalled, previous=previous)
    return StatusPatch(message=message, conditions=conditions, observed_generation=observed_generation(process))


def _spec_changed(observed: Observed) -> Decision | None:
    """→ Reconverging (reason ``SpecChanged``) when ``metadata.generation`` moved past the
    ``status.observedGeneration`` the children were rendered for, as a Flux object reconciles a new
    generation by itself (docs/behaviour.md#spec-changes). None when it did not, when the status
    predates ``observedGeneration``, or, in Attested, when ``spec.intent`` (what the children are
    rendered from) is the one attested: then :func:`with_fresh_status` only marks the generation
    observed (a pool's bind patches a member's lifetime; routing is repaired in place and the
    postconditions are checked on every heartbeat anyway)."""
    process = observed.process
    status = process.status
    seen = status.observed_generation if status is not None else None
    generation = process.metadata.generation
    if status is None or seen is None or generation is None or seen == generation:
        return None
    if (process.phase is _P.ATTESTED and status.attestation is not None
            and status.attestation.intent_hash == intent_hash(process.spec.intent)):
        return None
    return phase_write(observed, _P.RECONVERGING, f"spec changed: generation {seen} → {generation}",
                       reason="SpecChanged", requeue_after=TICK)


def with_fresh_status(observed: Observed, decision: Decision) -> Decision:
    """``decision``, plus a rewrite of the kstatus conditions and ``observedGeneration`` when it writes no
    conditions and the stored ones no longer say what the phase is (a phase edited by hand, a spec
    changed on a Failed or Reaped Process, a status from before ``observedGeneration``): conditions are
    recomputed from the phase every time (docs/behaviour.md#conditions). A refused child write's stall
    (:func:`reconciler.refusals.is_refusal`) is taken off the same way: the write goes only if the
    decision's writes before it succeed (docs/behaviour.md#write-failures). Running and Attested with a
    new generation are left to :func:`_spec_changed`."""
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


def _deadline_patch(observed: Observed) -> StatusPatch:
    """``status.boundary.deadline`` = now + ``boundary.timeout`` on entering Execing
    (docs/behaviour.md#boundary-timeout)."""
    try:
        timeout = boundary.boundary_timeout(observed.process)
    except DurationError:
        return StatusPatch()
    return StatusPatch(boundary=BoundaryPatch(deadline=observed.now + timeout))


def _rows_differ(old: Sequence[CheckedCondition], new: Sequence[CheckedCondition]) -> bool:
    """True when rows changed other than ``lastCheck`` (so waiting writes nothing)."""

    def key(rows: Sequence[CheckedCondition]) -> list[tuple[object, ...]]:
        return [(r.kind, r.params, r.satisfied, r.message) for r in rows]

    return key(old) != key(new)


def _cel_events(field: str, old: Sequence[CheckedCondition], new: Sequence[CheckedCondition]) -> tuple[Event, ...]:
    """A ``CelEvaluationFailed`` Warning per Cel row whose evaluation gave no bool (a runtime error, a
    non-bool result, its cost exceeded) and whose message is new (docs/behaviour.md#cel-conditions)."""
    events = []
    for i, row in enumerate(new):
        if row.kind is not ConditionKind.CEL or not cel.is_error(row.message):
            continue
        if i < len(old) and old[i].kind is row.kind and old[i].message == row.message:
            continue
        events.append(Event.warning("CelEvaluationFailed", f"spec.boundary.{field}[{i}]: {row.message}"))
    return tuple(events)


CEL_TYPE_ERROR = "CelTypeError"
"""The stall reason of a Cel condition whose expression gives a value that is not a bool and cannot
become one (docs/behaviour.md#cel-conditions)."""


def _cel_type_errors(field: str, rows: Sequence[CheckedCondition]) -> list[str]:
    """``spec.boundary.<field>[<i>]: CEL expression '<e>' returned <kind>, not a bool`` per Cel row whose
    result is a constant type error (:func:`reconciler.cel.constant_type_error`)."""
    out = []
    for i, row in enumerate(rows):
        kind = cel.constant_type_error(row.message) if row.kind is ConditionKind.CEL else None
        if kind is not None:
            expression = row.params.get("expression") if isinstance(row.params, dict) else None
            out.append(f"spec.boundary.{field}[{i}]: CEL expression {expression!r} returned {kind}, not a bool")
    return out


def _cel_type_stall(observed: Observed, field: str, old: Sequence[CheckedCondition],
                    rows: Sequence[CheckedCondition], *, requeue_after: float | None,
                    extra: StatusPatch | None = None) -> Decision | None:
    """Stalled ``CelTypeError`` (one Warning, the rows written when they changed) when a Cel row of
    ``field`` (``preconditions`` / ``postconditions``) is a constant type error; None otherwise. The
    Process stays in its phase and is evaluated again: a row that becomes a bool lifts the stall, and the
    boundary timeout still fails it (docs/behaviour.md#cel-conditions)."""
    errors = _cel_type_errors(field, rows)
    if not errors:
        return None
    decision = _stalled(observed, "; ".join(errors), reason=CEL_TYPE_ERROR, requeue_after=requeue_after)
    boundary_rows = (BoundaryPatch(preconditions=list(rows)) if field == "preconditions"
                     else BoundaryPatch(postconditions=list(rows)))
    written = StatusPatch(boundary=boundary_rows) if _rows_differ(old, rows) else None
    patch = merged(merged(decision.status or StatusPatch(), written), extra)
    return dataclasses.replace(decision, status=None if patch == StatusPatch() else patch)


def _fail(observed: Observed, message: str, *, reason: str, exit_code: int) -> Decision:
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


def _timed_out(observed: Observed) -> Decision | None:
    """→ Failed (exit 124) when the boundary deadline has passed in Execing/Running."""
    try:
        if not boundary.timeout_exceeded(observed.process, observed.now):
            return None
    except DurationError:
        return None  # an unparsable timeout is reported as an invalid spec in Execing
    timeout = observed.process.spec.boundary.timeout or "15m"
    phase = observed.process.phase.value
    return _fail(
        observed,
        f"boundary timeout {timeout} exceeded in {phase}",
        reason="BoundaryTimeout",
        exit_code=EXIT_TIMEOUT,
    )


def _clock_exit(observed: Observed, reason_text: str, gate: ProcessPhase, otherwise: ProcessPhase) -> Decision:
    """The lifetime clock fired at ``gate``: → Releasing when an export fires there, else ``otherwise``
    (docs/behaviour.md#teardown-policy)."""
    eph = observed.process.spec.lifetime.ephemeral
    if gate in (_P.ATTESTED, _P.FAILED) and eph is not None and eph.has_applicable_exports(gate):
        return phase_write(
            observed,
            _P.RELEASING,
            f"releasing exports — {reason_text}",
            reason="LifetimeExpired",
            requeue_after=TICK,
            annotations={ann.RELEASED_FROM: gate.value},
        )
    return phase_write(observed, otherwise, reason_text, reason="LifetimeExpired", requeue_after=TICK)


# ── phase handlers ────────────────────────────────────────────────────────────


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
        if _status_message(process) == gate.message:
            return Decision()
        status = _message_write(observed, gate.message, reason="MaxConcurrent")
        if process.status is None:  # a new Process: say its phase too, so `kubectl get` shows Pending
            status = merged(status, StatusPatch(phase=_P.PENDING, phase_since=observed.now))
        return Decision(status=status, events=(Event.normal("MaxConcurrent", gate.message),))
    identity = derive_identity(process.spec)
    start_suspended = process.spec.signals.start_suspended
    message = f"declared {identity.name}"
    if start_suspended:
        message += "; suspended until SIGCONT (startSuspended)"
    decision = phase_write(
        observed,
        _P.FORKING,
        message,
        reason="Declared",
        requeue_after=TICK,
        extra=StatusPatch(identity=identity),
    )
    return dataclasses.replace(decision, suspended=True) if start_suspended else decision


def unmet_dependencies(observed: Observed) -> list[str]:
    """One message per unmet ``spec.dependsOn`` entry, in order (docs/behaviour.md#dependencies)."""
    process = observed.process
    unmet = []
    for dep in process.spec.depends_on:
        ref = ann.qualified_ref(dep.namespace or _ns(process), dep.name)
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
        return _stalled(observed, problem.message, reason=problem.reason, requeue_after=observed.heartbeat_seconds)
    unmet = unmet_dependencies(observed)
    if unmet:
        message = f"waiting on {len(unmet)} dependency/dependencies: {'; '.join(unmet)}"
        if message == _status_message(observed.process):
            return Decision(requeue_after=observed.heartbeat_seconds)
        return Decision(
            status=_message_write(observed, message, reason="DependenciesUnmet"),
            requeue_after=observed.heartbeat_seconds,
        )
    status = observed.process.status
    needs_pid = status is None or status.pid is None
    if needs_pid:
        orphan = parent_problem(observed.process, observed.processes_by_pid)
        if orphan is not None:
            return _stalled(observed, orphan.message, reason=orphan.reason, requeue_after=observed.heartbeat_seconds)
    decision = phase_write(
        observed,
        _P.EXECING,
        "dependencies satisfied",
        reason="DependenciesSatisfied",
        requeue_after=TICK,
        extra=_deadline_patch(observed),
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
    return Decision(status=_message_write(observed, refused.reason, reason="PidRefused"),
                    events=(Event.warning("PidRefused", refused.reason),), requeue_after=requeue)


def _stalled(observed: Observed, message: str, *, reason: str, requeue_after: float | None = None) -> Decision:
    """Stay in the phase with ``Stalled=True`` (``reason``, ``message``) and one Warning Event; nothing
    but the requeue when the Process is already stalled for that reason with that message
    (docs/behaviour.md#execing, docs/behaviour.md#dependencies)."""
    process = observed.process
    conds = process.status.conditions if process.status is not None else []
    if any(c.type_ == "Stalled" and c.status == "True" and c.reason == reason and c.message == message
           for c in conds):
        return Decision(requeue_after=requeue_after)
    return Decision(
        status=_message_write(observed, message, reason=reason, stalled=True),
        events=(Event.warning(reason, message),),
        requeue_after=requeue_after,
    )


def decide_execing(observed: Observed, deps: Deps) -> Decision:
    """Check and render: invalid spec or boundary timeout → Failed; wait on preconditions; an intent
    we do not render → Stalled ``IntentNotSupported``; else apply children → Running."""
    process = observed.process
    problems = process.spec.problems()
    try:
        boundary.boundary_timeout(process)
    except DurationError as err:
        problems.append(f"spec.boundary.timeout: {err}")
    if problems:
        return _fail(
            observed, "invalid spec: " + "; ".join(problems), reason="InvalidSpec", exit_code=EXIT_INVALID_SPEC
        )
    timed_out = _timed_out(observed)
    if timed_out is not None:
        return timed_out
    cel_problems = boundary.cel_problems(process)
    if cel_problems:
        return _stalled(observed, "; ".join(cel_problems), reason="InvalidCelExpression")

    rows = StatusPatch()
    pre = process.spec.boundary.preconditions
    if pre:
        result = deps.evaluate(pre, observed)
        old = process.status.boundary.preconditions if process.status is not None else []
        changed = _rows_differ(old, result.rows)
        if changed:
            rows = StatusPatch(boundary=BoundaryPatch(preconditions=list(result.rows)))
        if not result.satisfied:
            wait = _converging_wait(observed, observed.heartbeat_seconds)
            typed = _cel_type_stall(observed, "preconditions", old, result.rows, requeue_after=wait)
            if typed is not None:
                return typed
            if not changed and _status_message(process) == "waiting on preconditions":
                return Decision(requeue_after=wait)
            status = _message_write(observed, "waiting on preconditions", reason="PreconditionsUnmet")
            events = _cel_events("preconditions", old, result.rows)
            return Decision(status=merged(status, rows), events=events, requeue_after=wait)

    try:
        docs = deps.render(observed)
    except IntentNotSupported as err:
        return _stalled(observed, str(err), reason="IntentNotSupported")
    except (RenderError, VariantError) as err:
        return _fail(observed, f"invalid spec: {err}", reason="InvalidSpec", exit_code=EXIT_INVALID_SPEC)

    decision = phase_write(
        observed,
        _P.RUNNING,
        f"rendered {len(docs)} resource(s); waiting for them to become Ready",
        reason="Rendered",
        requeue_after=SHORT,
        extra=merged(rows, StatusPatch(flux_resources=flux_resource_refs(docs, observed.now))),
    )
    return dataclasses.replace(decision, apply=tuple(docs))


def _observe_refs(observed: Observed) -> tuple[list[FluxResourceRef], bool, ChildRef | None]:
    """(refs with fresh ready/message, any changed, first stalled child) from the child cache.

    ``lastCheck`` moves only when a ref's readiness or message changes (no write while waiting).
    """
    status = observed.process.status
    refs = list(status.flux_resources) if status is not None else []
    out: list[FluxResourceRef] = []
    changed = False
    stalled: ChildRef | None = None
    for ref in refs:
        key = ChildRef(ref.api_version, ref.kind, ref.namespace, ref.name)
        state = observed.children.get(key)
        message: str | None
        if state is None:
            ready, message = False, "not yet observed"
        else:
            ready = state.ready is True
            message = None if ready else (state.message or "not yet observed")
            if state.stalled and stalled is None:
                stalled = key
        if (ref.ready, ref.message) != (ready, message):
            changed = True
            ref = FluxResourceRef(
                api_version=ref.api_version,
                kind=ref.kind,
                name=ref.name,
                namespace=ref.namespace,
                ready=ready,
                message=message,
                last_check=observed.now,
            )
        out.append(ref)
    return out, changed, stalled


CHILD_NOT_READY = "ChildNotReady"
"""Reason of a Running Process whose child Flux reports ``Ready=False`` (still retried, not stalled)."""


def _failing_child_message(observed: Observed, refs: Sequence[FluxResourceRef]) -> str | None:
    """``<Kind> <ns>/<name> not ready: <reason>: <message>`` for the first child Flux reports ``Ready=False``
    (docs/behaviour.md#running), None when no child has failed (they are only in progress)."""
    for ref in refs:
        state = observed.children.get(ChildRef(ref.api_version, ref.kind, ref.namespace, ref.name))
        if state is not None and state.ready is False:
            detail = ": ".join(part for part in (state.reason, state.message) if part) or "Ready=False"
            return f"{ref.kind} {ref.namespace}/{ref.name} not ready: {detail}"
    return None


def decide_running(observed: Observed, deps: Deps) -> Decision:
    """Deploy and verify: TTL → Exiting; a new generation → Reconverging (:func:`_spec_changed`); a stalled
    child or the boundary timeout → Failed; wait for every child's Ready and the postconditions;
    then attest → Attested."""
    process = observed.process
    fired = lifetime_clock.evaluate(process, _P.RUNNING, observed.now)
    if fired is not None:
        return phase_write(observed, _P.EXITING, fired, reason="LifetimeExpired", requeue_after=TICK)
    changed_spec = _spec_changed(observed)
    if changed_spec is not None:
        return changed_spec

    refs, changed, stalled = _observe_refs(observed)
    if stalled is not None:
        state = observed.children[stalled]
        detail = state.message or state.reason or "terminal failure"
        return _fail(
            observed,
            f"{stalled.kind} {stalled.namespace}/{stalled.name} failed: {detail}",
            reason="ChildStalled",
            exit_code=EXIT_CHILD_STALLED,
        )
    timed_out = _timed_out(observed)
    if timed_out is not None:
        return timed_out

    fresh = StatusPatch(flux_resources=refs) if changed else None
    wait = _converging_wait(observed, min(observed.heartbeat_seconds, _heartbeat(observed)))
    if not all(r.ready for r in refs):
        failing = _failing_child_message(observed, refs)
        if failing is None or failing == _status_message(process):
            return Decision(status=fresh, requeue_after=wait)
        status = merged(_message_write(observed, failing, reason=CHILD_NOT_READY), fresh)
        return Decision(status=status, events=(Event.warning(CHILD_NOT_READY, failing),), requeue_after=wait)

    post = process.spec.boundary.postconditions
    rows: tuple[CheckedCondition, ...] = ()
    if post:
        result = deps.evaluate(post, observed)
        old = process.status.boundary.postconditions if process.status is not None else []
        rows = result.rows
        if not result.satisfied:
            typed = _cel_type_stall(observed, "postconditions", old, rows, requeue_after=wait, extra=fresh)
            if typed is not None:
                return typed
            if _rows_differ(old, rows) or _status_message(process) != "waiting on postconditions":
                status = merged(_message_write(observed, "waiting on postconditions", reason="PostconditionsUnmet"),
                                StatusPatch(boundary=BoundaryPatch(postconditions=list(rows))))
                events = _cel_events("postconditions", old, rows)
                return Decision(status=merged(status, fresh), events=events, requeue_after=wait)
            return Decision(status=fresh, requeue_after=wait)

    attestation = attest_process(process, now=observed.now, children=refs)
    attested = StatusPatch(
        attestation=attestation,
        boundary=BoundaryPatch(deadline=None, postconditions=list(rows) if rows else UNSET),
    )
    # Our own status write does not requeue us (status-only updates are filtered), so when the
    # teardown policy fires on Attested, come back at TICK rather than a HEARTBEAT later.
    tears_down = lifetime_clock.evaluate(process, _P.ATTESTED, observed.now) is not None
    return phase_write(
        observed,
        _P.ATTESTED,
        f"attested generation {attestation.generation}",
        reason="Attested",
        requeue_after=TICK if tears_down else _heartbeat(observed),
        extra=merged(fresh or StatusPatch(), attested),
    )


def decide_attested(observed: Observed, deps: Deps) -> Decision:
    """The heartbeat: lifetime clock → Releasing/Exiting; a new generation (:func:`_spec_changed`), a
    child not Ready or a postcondition no longer holding → Reconverging; otherwise no writes (routing
    children are repaired in place by :func:`with_routing`)."""
    process = observed.process
    fired = lifetime_clock.evaluate(process, _P.ATTESTED, observed.now)
    if fired is not None:
        return _clock_exit(observed, fired, _P.ATTESTED, _P.EXITING)
    changed_spec = _spec_changed(observed)
    if changed_spec is not None:
        return changed_spec
    refs, _, _ = _observe_refs(observed)
    if not all(r.ready for r in refs):
        return phase_write(
            observed,
            _P.RECONVERGING,
            "flux resource drift detected",
            reason="Drift",
            requeue_after=SHORT,
            extra=StatusPatch(flux_resources=refs),
        )
    post = process.spec.boundary.postconditions
    if post:
        result = deps.evaluate(post, observed)
        if not result.satisfied:
            failing = "; ".join(f"{r.kind.value}: {r.message}" for r in result.rows if not r.satisfied)
            return phase_write(
                observed,
                _P.RECONVERGING,
                f"postcondition drift detected: {failing}",
                reason="Drift",
                requeue_after=SHORT,
                extra=StatusPatch(boundary=BoundaryPatch(postconditions=list(result.rows))),
            )
    return Decision(requeue_after=_heartbeat(observed))


def decide_reconverging(observed: Observed, deps: Deps) -> Decision:
    """→ Execing with a fresh boundary deadline."""
    return phase_write(
        observed,
        _P.EXECING,
        "reconverging: rendering again",
        reason="Reconverging",
        requeue_after=TICK,
        extra=_deadline_patch(observed),
    )


EXPORT_JOB_WAITING = "ExportJobWaiting"
"""The Releasing reason while an export Job has no pod and its Job controller says why."""

WAITING_JOB_POLL = 10.0
"""Seconds between looks at an export Job the Job controller handled but that has no pod: the Warning
Event saying why (``FailedCreate``), and its retries, change nothing on the Job that would wake us."""

_EXPORTS_STARTED = frozenset({"ExportsRunning", "ExportJobLost", EXPORT_JOB_WAITING})
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
            events.append(Event.warning("InvalidExport", f"export {run.index} not run: {run.detail}"))
        elif failed and run.state is exports.ExportState.FAILED:
            text = f"export {run.index} (Job {exports.export_job_name(process, run.index)}) failed"
            events.append(Event.warning("ExportFailed", f"{text}: {run.detail}" if run.detail else text))
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
        return phase_write(observed, nxt, f"releasing → {nxt.value} — no applicable exports", reason="Released",
                           requeue_after=TICK)
    state = exports.ExportState
    succeeded = exports.count(runs, state.SUCCEEDED)
    failed = exports.count(runs, state.FAILED, state.INVALID)
    in_flight = exports.count(runs, state.START, state.RUNNING)
    if not in_flight:
        return phase_write(
            observed, nxt, f"releasing → {nxt.value} — exports complete (succeeded={succeeded}, failed={failed})",
            reason="ExportsFailed" if failed else "ExportsComplete", requeue_after=TICK,
            events=_export_warnings(process, runs, invalid=not started, failed=True))

    starting = [r for r in runs if r.state is state.START]
    try:
        jobs = tuple(deps.export_job(observed, r.index, r.export) for r in starting)
    except RenderError as err:
        return _stalled(observed, f"cannot render export Jobs: {err}", reason="InvalidSpec")
    lost = [r for r in starting if r.lost]
    held = [(r, f"export {r.index} (Job {exports.export_job_name(process, r.index)}): {r.detail}")
            for r in runs if r.state is state.RUNNING and r.detail]
    message = "; ".join([f"releasing — waiting for {in_flight} export Job(s) (succeeded={succeeded}, failed={failed})",
                         *(why for _, why in held)])
    reason = "ExportJobLost" if lost else EXPORT_JOB_WAITING if held else "ExportsRunning"
    previous = _status_message(process) or ""
    events = _export_warnings(process, runs, invalid=not started, failed=False) + tuple(
        Event.warning("ExportJobLost", f"export {r.index}: Job {exports.export_job_name(process, r.index)} was "
                                       "deleted before it finished; starting it again")
        for r in lost) + tuple(Event.warning(EXPORT_JOB_WAITING, why) for _, why in held if why not in previous)
    conds = process.status.conditions if process.status is not None else []
    same = previous == message and any(c.type_ == "Ready" and c.reason == reason for c in conds)
    status = None if same else _message_write(observed, message, reason=reason)
    podless = any(job.status.without_pod() for job in observed.export_jobs.values())
    requeue = min(observed.heartbeat_seconds, WAITING_JOB_POLL) if podless else observed.heartbeat_seconds
    return Decision(apply=jobs, status=status, events=events, requeue_after=requeue)


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
        return phase_write(observed, _P.ZOMBIE, "exited; no child Processes left", reason="Exited", requeue_after=TICK)

    policy = process.spec.signals
    since = status.phase_since if status is not None and status.phase_since is not None else observed.now
    remaining = (since + timedelta(seconds=policy.sigterm_grace_seconds) - observed.now).total_seconds()
    sends: list[ChildSignal] = []
    if remaining > 0:
        for child in children:
            if child.phase.is_alive and child.phase is not _P.EXITING and _pending_signal(child) is None:
                sends.append(ChildSignal(_ns(child), child.metadata.name or "", ProcessSignal.SIGTERM))
        message = f"waiting for {len(children)} child Process(es) to exit (SIGTERM)"
        requeue = max(min(SHORT, remaining), TICK)
    elif policy.sigkill_force:
        for child in children:
            if _pending_signal(child) is not ProcessSignal.SIGKILL:
                sends.append(ChildSignal(_ns(child), child.metadata.name or "", ProcessSignal.SIGKILL))
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
    patch = None if message == _status_message(process) else _message_write(observed, message, reason="Draining")
    return Decision(status=patch, signal_children=tuple(sends), requeue_after=requeue)


def decide_failed(observed: Observed, deps: Deps) -> Decision:
    """Deletion → Zombie; the lifetime clock → Releasing or Zombie; otherwise the Process stays
    Failed for inspection (Stalled=True) until deleted or SIGKILLed."""
    process = observed.process
    if process.metadata.deletion_timestamp is not None:
        return phase_write(observed, _P.ZOMBIE, "deletion requested", reason="DeletionRequested", requeue_after=TICK)
    fired = lifetime_clock.evaluate(process, _P.FAILED, observed.now)
    if fired is not None:
        return _clock_exit(observed, fired, _P.FAILED, _P.ZOMBIE)
    if process.spec.lifetime.resolved_ephemeral() is not None:
        return Decision(requeue_after=_heartbeat(observed))
    return Decision()


def decide_zombie(observed: Observed, deps: Deps) -> Decision:
    """→ Reaped."""
    return phase_write(observed, _P.REAPED, "reaped", reason="Reaped", requeue_after=TICK)


def decide_reaped(observed: Observed, deps: Deps) -> Decision:
    """Delete the owned children still cached (every rendered kind), release the Process (its finalizer
    goes), and delete an ephemeral Process that is not already being deleted. No requeue."""
    process = observed.process
    delete_self = process.spec.lifetime.is_ephemeral and process.metadata.deletion_timestamp is None
    return Decision(delete=tuple(observed.children), released=True, delete_self=delete_self)


# ── routing children and stable names ───────────────────────────────────────

_ROUTED = frozenset(ProcessPhase) - {_P.PENDING, _P.FORKING}
"""Phases in which a Process may have routing children (Reaped deletes every child itself; its claims
and condition are still settled here)."""

_REPAIR: dict[ProcessPhase, frozenset[str]] = {_P.ATTESTED: frozenset({INSTANCE, STABLE}),
                                               _P.RUNNING: frozenset({STABLE})}
"""The routing forms applied again in place when missing or changed (Running: only the stable pair,
whose claim can be granted there; its instance pair was applied by Execing a moment ago)."""


def _claim_events(condition: ProcessCondition) -> Event:
    message = condition.message or ""
    if condition.reason == REASON_HELD:
        return Event.warning(REASON_HELD, message)
    return Event.normal(condition.reason or STABLE_NAME, message)


def _is_stable(manifest: Manifest | Job) -> bool:
    return isinstance(manifest, Manifest) and manifest.metadata.labels.get(ROUTING_FORM) == STABLE


def with_routing(observed: Observed, deps: Deps, decision: Decision) -> Decision:
    """``decision`` plus the routing upkeep of a Process with ``spec.routing`` or named by a claim
    (docs/behaviour.md#ingress-and-dnsendpoint, docs/behaviour.md#stable-name-claims), for the phase the
    decision leaves it in (its transition's target, else its phase):

    - out of Running and Attested, the claims naming it are given up in this very step
      (``release_claims``, performed before the status write) and its stable pair is neither applied
      nor kept: the stable children are deleted first (break before make,
      docs/behaviour.md#handing-a-stable-name-over);
    - owned routing children the current render does not produce are deleted (a stable name lost);
    - a stable pair (in the decision's applies or the repair) waits while another Process's stable
      Ingress or DNSEndpoint still serves its host (:func:`reconciler.routing.make_after_break`);
    - in Attested every rendered routing child, in Running the stable ones, is applied again when
      missing from the cache or changed (Attested records a Normal Event ``RoutingDrift`` naming them,
      except for a stable pair whose name is granted in this very pass); not when the decision
      changes the phase;
    - the ``StableName`` condition follows the claims as they stand after the step
      (:func:`reconciler.routing.stable_name_condition`), with an Event once per change.

    A render that fails is left to Execing to report: no routing child is applied or deleted then.
    """
    process = observed.process
    uid = process.metadata.uid
    after = decision.transition.target if decision.transition is not None else process.phase
    ref = process_ref(process)
    mine = holder_keys(observed.claims, ref)
    if (process.spec.routing is None and not mine) or process.phase not in _ROUTED or not uid:
        return decision
    claims = claims_after(observed.claims, ref, after)
    leaving = len(claims) != len(observed.claims)
    view = dataclasses.replace(observed, claims=claims) if leaving else observed
    applies = decision.apply if after in ELIGIBLE_PHASES else tuple(m for m in decision.apply if not _is_stable(m))
    try:
        docs = deps.render(view) if process.spec.routing is not None else []
    except (IntentNotSupported, RenderError, VariantError):
        docs = None
    # make after break: a stable pair waits while another Process's still serves its host
    ours = tuple(m for m in applies if isinstance(m, Manifest))
    _, waiting = make_after_break(ours, observed.routes, uid)
    applies = tuple(m for m in applies if not any(m is w for w in waiting))
    extra: list[tuple[Manifest, str]] = []
    deletes: tuple[ChildRef, ...] = ()
    if docs is not None:
        repair = _REPAIR.get(process.phase, frozenset()) if decision.transition is None else frozenset()
        plan = plan_routing(docs, observed.children, uid, repair=repair)
        applied = {manifest_ref(m) for m in applies}
        now, _ = make_after_break(plan.apply, observed.routes, uid)
        extra = [(m, why) for m, why in zip(plan.apply, plan.drift, strict=True)
                 if manifest_ref(m) not in applied and any(m is n for n in now)]
        deletes = tuple(ref for ref in plan.delete if ref not in decision.delete)

    status = process.status
    conditions = list(status.conditions) if status is not None else []
    previous = next((c for c in conditions if c.type_ == STABLE_NAME), None)
    condition = (stable_name_condition(standing(claims, process, deps.fleet_cluster), after, previous,
                                       process.metadata.generation, observed.now)
                 if process.spec.routing is not None or previous is not None else None)
    granted = condition is not None and condition.status == "True"
    events = list(decision.events)
    drifted = [why for m, why in extra
               if process.phase is _P.ATTESTED and not (granted and m.metadata.labels.get(ROUTING_FORM) == STABLE)]
    if drifted:
        events.append(Event.normal("RoutingDrift", f"routing drift corrected: {'; '.join(drifted)}"))
    patch = decision.status
    if condition is not None:
        base = decision.status.conditions if decision.status is not None else UNSET
        current = base if isinstance(base, list) else conditions
        wanted = [c for c in current if c.type_ != STABLE_NAME] + [condition]
        patch = merged(decision.status or StatusPatch(), StatusPatch(conditions=wanted))
        events.append(_claim_events(condition))
    if not extra and not deletes and condition is None and not leaving and applies == decision.apply:
        return decision
    return dataclasses.replace(decision, status=patch, apply=(*applies, *(m for m, _ in extra)),
                               delete=(*decision.delete, *deletes), events=tuple(events),
                               release_claims=after if leaving else None)


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


# ── dispatcher ────────────────────────────────────────────────────────────────

_STRIP: dict[str, str | None] = {ann.SIGNAL: None}


def decide_signal(observed: Observed, raw: str, signal: ProcessSignal | None) -> Decision:
    """Apply one signal (docs/behaviour.md#signal-effects): the effect and the annotation strip in one Decision.

    An unknown value → Warning ``InvalidSignal``, annotation cleared, nothing else.
    """
    process = observed.process
    if signal is None:
        text = f"unknown signal {raw!r}; annotation removed without effect"
        return Decision(
            annotations=_STRIP,
            events=(Event.warning("InvalidSignal", text),),
            signal=SignalCount(raw, "invalid"),
            requeue_after=TICK,
        )
    effect = effect_of(signal, process.phase, process.spec.signals)
    name = signal.value
    if effect.kind is EffectKind.NOTHING:
        return Decision(
            annotations=_STRIP,
            events=(Event.normal("SignalIgnored", f"{name} ignored: {effect.why}"),),
            signal=SignalCount(name, "ignored"),
            requeue_after=TICK,
        )
    received = Event.normal("SignalReceived", f"{name} received in {process.phase.value}")
    applied = SignalCount(name, "applied")
    if effect.kind in (EffectKind.SUSPEND, EffectKind.RESUME):
        return Decision(annotations=_STRIP, suspended=effect.kind is EffectKind.SUSPEND, signal=applied,
                        events=(received,), requeue_after=TICK)
    assert effect.target is not None
    extra = StatusPatch(exit_code=EXIT_SIGKILL) if signal is ProcessSignal.SIGKILL else None
    return phase_write(
        observed,
        effect.target,
        effect.message or f"{name} received",
        reason=f"Signal{signal.short.title()}",
        requeue_after=TICK,
        extra=extra,
        annotations=_STRIP,
        signal=applied,
        events=(received,),
    )


def _leaves(observed: Observed, deps: Deps, decision: Decision) -> Decision:
    """A deletion's or a signal's phase change, completed by :func:`with_routing` (a holder leaving
    Running or Attested gives its claims up in the same step); a signal that changes no phase as it is."""
    return with_routing(observed, deps, decision) if decision.transition is not None else decision


def decide(observed: Observed, deps: Deps | None = None) -> Decision:
    """One reconcile of one Process (docs/behaviour.md#one-process-reconcile), in order:

    1. deletion pre-emption: an alive Process being deleted goes to Exiting **once**;
    2. the signal annotation, if any (every phase; one-shot);
    3. ``spec.suspended`` on an alive Process not being deleted: wait, no writes;
    4. the phase handler, its decision completed by :func:`with_routing` and :func:`with_fresh_status`.

    A phase change of 1 or 2 is completed by :func:`with_routing` too, so a holder leaving Running or
    Attested by deletion or a signal gives its stable names up in that step.

    A handler asking for an illegal transition is refused: nothing is written, a Warning Event
    ``IllegalTransition`` is recorded and the Process is retried after HEARTBEAT.
    """
    deps = deps or Deps()
    process = observed.process
    phase = process.phase
    deleting = process.metadata.deletion_timestamp is not None
    try:
        if deleting and phase.is_alive and phase is not _P.EXITING:
            return _leaves(observed, deps, phase_write(
                observed, _P.EXITING, "deletion requested", reason="DeletionRequested", requeue_after=TICK
            ))
        found = ingest(process.metadata.annotations)
        if found is not None:
            return _leaves(observed, deps, decide_signal(observed, found.raw, found.signal))
        if process.spec.suspended and phase.is_alive and not deleting:
            return Decision(requeue_after=observed.heartbeat_seconds)
        return with_fresh_status(observed, with_routing(observed, deps, HANDLERS[phase](observed, deps)))
    except IllegalTransition as err:
        return Decision(
            events=(Event.warning("IllegalTransition", str(err)),),
            requeue_after=observed.heartbeat_seconds,
        )
