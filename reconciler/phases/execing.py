"""Execing: check the spec and the preconditions, then render the children and apply them → Running
(docs/behaviour.md#execing, docs/behaviour.md#boundary-timeout)."""

from __future__ import annotations

import dataclasses

from reconciler import boundary
from reconciler.decision import Decision, Observed
from reconciler.phases.checks import cel_events, cel_type_stall, rows_differ
from reconciler.phases.common import (
    EXIT_INVALID_SPEC,
    Deps,
    converging_wait,
    fail,
    message_write,
    stall,
    status_message,
    timed_out,
)
from reconciler.reasons import Reason
from reconciler.render import IntentNotSupported, RenderError, flux_resource_refs
from reconciler.status_patch import BoundaryPatch, StatusPatch, merged
from reconciler.timing import SHORT
from reconciler.transitions import phase_write
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.tagged_union import VariantError
from shared.domain.duration import DurationError

__all__ = ["decide_execing"]

_P = ProcessPhase


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
        return fail(
            observed, "invalid spec: " + "; ".join(problems), reason=Reason.INVALID_SPEC, exit_code=EXIT_INVALID_SPEC
        )
    late = timed_out(observed)
    if late is not None:
        return late
    cel_problems = boundary.cel_problems(process)
    if cel_problems:
        return stall(observed, "; ".join(cel_problems), reason=Reason.INVALID_CEL_EXPRESSION)

    rows = StatusPatch()
    pre = process.spec.boundary.preconditions
    if pre:
        result = deps.evaluate(pre, observed)
        old = process.status.boundary.preconditions if process.status is not None else []
        changed = rows_differ(old, result.rows)
        if changed:
            rows = StatusPatch(boundary=BoundaryPatch(preconditions=list(result.rows)))
        if not result.satisfied:
            wait = converging_wait(observed, observed.heartbeat_seconds)
            typed = cel_type_stall(observed, "preconditions", old, result.rows, requeue_after=wait)
            if typed is not None:
                return typed
            if not changed and status_message(process) == "waiting on preconditions":
                return Decision(requeue_after=wait)
            status = message_write(observed, "waiting on preconditions", reason=Reason.PRECONDITIONS_UNMET)
            events = cel_events("preconditions", old, result.rows)
            return Decision(status=merged(status, rows), events=events, requeue_after=wait)

    try:
        docs = deps.render(observed)
    except IntentNotSupported as err:
        return stall(observed, str(err), reason=Reason.INTENT_NOT_SUPPORTED)
    except (RenderError, VariantError) as err:
        return fail(observed, f"invalid spec: {err}", reason=Reason.INVALID_SPEC, exit_code=EXIT_INVALID_SPEC)

    decision = phase_write(
        observed,
        _P.RUNNING,
        f"rendered {len(docs)} resource(s); waiting for them to become Ready",
        reason=Reason.RENDERED,
        requeue_after=SHORT,
        extra=merged(rows, StatusPatch(flux_resources=flux_resource_refs(docs, observed.now))),
    )
    return dataclasses.replace(decision, apply=tuple(docs))
