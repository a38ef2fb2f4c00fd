"""``spec.boundary``: pre- and postconditions that gate Running and Attested.

— docs/behaviour.md#boundary-conditions.
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.grammar import Duration
from shared.domain.api.wire import FreeObject, WireStruct

__all__ = ["Boundary", "Condition", "ConditionKind"]


class ConditionKind(ClosedSet):
    """What a boundary condition checks. ``PromQL`` keeps both capitals."""

    PROCESS_PHASE = "ProcessPhase"
    KUSTOMIZATION_HEALTHY = "KustomizationHealthy"
    HELM_RELEASE_RELEASED = "HelmReleaseReleased"
    PROM_QL = "PromQL"
    CEL = "Cel"
    NIX_EVAL = "NixEval"
    JOB_ATTESTED = "JobAttested"
    CLOSED_LOOP_AUTH = "ClosedLoopAuth"

    @property
    def is_stub(self) -> bool:
        """True for the kinds whose evaluator is not implemented: PromQL, Cel, NixEval."""
        return self in (ConditionKind.PROM_QL, ConditionKind.CEL, ConditionKind.NIX_EVAL)

    @property
    def stub_message(self) -> str | None:
        """``<Name> evaluator not yet implemented`` for stubs (``CEL`` upper-case), else None."""
        names = {ConditionKind.PROM_QL: "PromQL", ConditionKind.CEL: "CEL", ConditionKind.NIX_EVAL: "NixEval"}
        name = names.get(self)
        return None if name is None else f"{name} evaluator not yet implemented"


class Condition(WireStruct):
    """One boundary condition. ``params`` is free JSON, written as ``null`` when unset."""

    _write_null: ClassVar[frozenset[str]] = frozenset({"params"})

    kind: ConditionKind
    params: FreeObject | None = None
    """Parameters of the check; their shape depends on ``kind`` (any JSON object, or null)."""


class Boundary(WireStruct):
    """Checks that gate Running and Attested, and how long they may take (``spec.boundary``)."""

    preconditions: list[Condition] = []
    """Checked in Execing; gate the step into Running."""
    postconditions: list[Condition] = []
    """Checked in Running; gate the step into Attested."""
    timeout: Duration | None = None
    """Duration string; absent → the controller default, 15m."""
