"""The checked boundary rows a converging phase writes: whether they changed, and the Events and the
stall a Cel row that gives no bool earns (docs/behaviour.md#cel-conditions)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from reconciler import cel
from reconciler.decision import Decision, Observed
from reconciler.phases.common import stall
from reconciler.reasons import Reason
from reconciler.status_patch import BoundaryPatch, StatusPatch, merged
from shared.domain.api.boundary import ConditionKind
from shared.domain.api.process import CheckedCondition
from shared.kube.events import Event

__all__ = ["CEL_TYPE_ERROR", "cel_events", "cel_type_stall", "rows_differ"]


def rows_differ(old: Sequence[CheckedCondition], new: Sequence[CheckedCondition]) -> bool:
    """True when rows changed other than ``lastCheck`` (so waiting writes nothing)."""

    def key(rows: Sequence[CheckedCondition]) -> list[tuple[object, ...]]:
        return [(r.kind, r.params, r.satisfied, r.message) for r in rows]

    return key(old) != key(new)


def cel_events(field: str, old: Sequence[CheckedCondition], new: Sequence[CheckedCondition]) -> tuple[Event, ...]:
    """A ``CelEvaluationFailed`` Warning per Cel row whose evaluation gave no bool (a runtime error, a
    non-bool result, its cost exceeded) and whose message is new (docs/behaviour.md#cel-conditions)."""
    events = []
    for i, row in enumerate(new):
        if row.kind is not ConditionKind.CEL or not cel.is_error(row.message):
            continue
        if i < len(old) and old[i].kind is row.kind and old[i].message == row.message:
            continue
        events.append(Event.warning(Reason.CEL_EVALUATION_FAILED, f"spec.boundary.{field}[{i}]: {row.message}"))
    return tuple(events)


CEL_TYPE_ERROR = Reason.CEL_TYPE_ERROR
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


def cel_type_stall(observed: Observed, field: str, old: Sequence[CheckedCondition],
                    rows: Sequence[CheckedCondition], *, requeue_after: float | None,
                    extra: StatusPatch | None = None) -> Decision | None:
    """Stalled ``CelTypeError`` (one Warning, the rows written when they changed) when a Cel row of
    ``field`` (``preconditions`` / ``postconditions``) is a constant type error; None otherwise. The
    Process stays in its phase and is evaluated again: a row that becomes a bool lifts the stall, and the
    boundary timeout still fails it (docs/behaviour.md#cel-conditions)."""
    errors = _cel_type_errors(field, rows)
    if not errors:
        return None
    decision = stall(observed, "; ".join(errors), reason=CEL_TYPE_ERROR, requeue_after=requeue_after)
    boundary_rows = (BoundaryPatch(preconditions=list(rows)) if field == "preconditions"
                     else BoundaryPatch(postconditions=list(rows)))
    written = StatusPatch(boundary=boundary_rows) if rows_differ(old, rows) else None
    patch = merged(merged(decision.status or StatusPatch(), written), extra)
    return dataclasses.replace(decision, status=None if patch == StatusPatch() else patch)
