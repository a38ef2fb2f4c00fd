"""``spec.compliance``: control-framework bindings (carried, not evaluated) — docs/wire-format.md#processspec."""

from __future__ import annotations

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.wire import WireStruct

__all__ = ["ComplianceBinding", "ComplianceSpec", "VerificationPhase"]


class VerificationPhase(ClosedSet):
    """When a compliance binding is verified. Default ``AtBoundary``."""

    PLAN_TIME = "PlanTime"
    AT_BOUNDARY = "AtBoundary"
    POST_CONVERGENCE = "PostConvergence"

    def gates_phase(self) -> ProcessPhase | None:
        """The phase a failing binding blocks: PlanTime → Execing, AtBoundary → Attested,
        PostConvergence → None."""
        if self is VerificationPhase.PLAN_TIME:
            return ProcessPhase.EXECING
        if self is VerificationPhase.AT_BOUNDARY:
            return ProcessPhase.ATTESTED
        return None


class ComplianceBinding(WireStruct):
    """One control, e.g. ``{framework: nist-800-53, controlId: SC-7}``."""

    framework: str
    """Compliance framework of the control, e.g. ``nist-800-53``."""
    control_id: str
    """Identifier of the control inside its framework, e.g. ``AC-2``."""
    phase: VerificationPhase = VerificationPhase.AT_BOUNDARY
    description: str | None = None
    """Free text: what the control asks of this Process."""


class ComplianceSpec(WireStruct):
    """Compliance controls this Process is bound to; carried, not evaluated yet (``spec.compliance``)."""

    baseline: str | None = None
    """E.g. ``fedramp-moderate``, ``cis-k8s-v1.8``."""
    bindings: list[ComplianceBinding] = []
    """Controls of compliance frameworks this Process is bound to. Carried, not evaluated yet."""
    auto_remediate: bool = False
    """Whether violated controls may be remediated automatically. Default false; not acted on yet."""
