"""``spec.classification``: what kind of convergence point a Process is.

— docs/wire-format.md#processspec; the spellings: docs/wire-format.md#enums.
"""

from __future__ import annotations

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.wire import Double, WireStruct

__all__ = [
    "Arity",
    "CalmClassification",
    "Classification",
    "ConvergencePointType",
    "DataClassification",
    "Horizon",
    "HorizonKind",
    "OptimizationDirection",
    "SubstrateType",
]


class Arity(ClosedSet):
    """Input or output arity of a point type (not on the wire)."""

    ONE = "One"
    MANY = "Many"

    @property
    def is_one(self) -> bool:
        return self is Arity.ONE


class ConvergencePointType(ClosedSet):
    """The shape of a convergence step (``classification.pointType``). No default."""

    TRANSFORM = "Transform"
    FORK = "Fork"
    JOIN = "Join"
    GATE = "Gate"
    SELECT = "Select"
    BROADCAST = "Broadcast"
    REDUCE = "Reduce"
    OBSERVE = "Observe"

    @property
    def input_arity(self) -> Arity:
        """One for Transform, Fork, Broadcast, Observe; Many otherwise."""
        return Arity.ONE if self in _ONE_IN else Arity.MANY

    @property
    def output_arity(self) -> Arity:
        """Many for Fork and Broadcast; One otherwise."""
        return Arity.MANY if self in _DIFFUSIVE else Arity.ONE

    @property
    def is_endomorphic(self) -> bool:
        """1 in → 1 out: Transform, Observe."""
        return self in (ConvergencePointType.TRANSFORM, ConvergencePointType.OBSERVE)

    @property
    def is_diffusive(self) -> bool:
        """1 in → N out: Fork, Broadcast."""
        return self in _DIFFUSIVE

    @property
    def is_convergent(self) -> bool:
        """N in → 1 out: Join, Gate, Select, Reduce."""
        return self not in _ONE_IN


_C = ConvergencePointType
_ONE_IN = frozenset({_C.TRANSFORM, _C.FORK, _C.BROADCAST, _C.OBSERVE})
_DIFFUSIVE = frozenset({_C.FORK, _C.BROADCAST})


class SubstrateType(ClosedSet):
    """What a Process converges (``classification.substrate``). No default.

    Declaration order is also the sort order.
    """

    FINANCIAL = "Financial"
    COMPUTE = "Compute"
    NETWORK = "Network"
    STORAGE = "Storage"
    SECURITY = "Security"
    IDENTITY = "Identity"
    OBSERVABILITY = "Observability"
    REGULATORY = "Regulatory"

    @property
    def is_resource(self) -> bool:
        """Financial, Compute, Network, Storage."""
        return self in (SubstrateType.FINANCIAL, SubstrateType.COMPUTE, SubstrateType.NETWORK, SubstrateType.STORAGE)

    @property
    def is_policy(self) -> bool:
        """Security, Identity, Regulatory."""
        return self in (SubstrateType.SECURITY, SubstrateType.IDENTITY, SubstrateType.REGULATORY)

    @property
    def is_telemetry(self) -> bool:
        """Observability."""
        return self is SubstrateType.OBSERVABILITY


class HorizonKind(ClosedSet):
    """Whether a Process terminates (Bounded, default) or optimizes forever (Asymptotic)."""

    BOUNDED = "Bounded"
    ASYMPTOTIC = "Asymptotic"

    @property
    def terminates(self) -> bool:
        return self is HorizonKind.BOUNDED

    @property
    def requires_metric_axes(self) -> bool:
        """True for Asymptotic (needs metric, direction, threshold; not validated)."""
        return self is HorizonKind.ASYMPTOTIC


class OptimizationDirection(ClosedSet):
    """Direction of an Asymptotic horizon's metric. Default ``Minimize``."""

    MINIMIZE = "Minimize"
    MAXIMIZE = "Maximize"

    @property
    def prefers_lower(self) -> bool:
        return self is OptimizationDirection.MINIMIZE

    def is_improvement(self, before: float, after: float) -> bool:
        """``after < before`` for Minimize, ``after > before`` for Maximize."""
        return after < before if self.prefers_lower else after > before


class CalmClassification(ClosedSet):
    """CALM monotonicity. Default ``Monotone``."""

    MONOTONE = "Monotone"
    NON_MONOTONE = "NonMonotone"

    @property
    def requires_coordination(self) -> bool:
        return self is CalmClassification.NON_MONOTONE


class DataClassification(ClosedSet):
    """Sensitivity of the data a Process handles. Default ``Internal``; order = rank."""

    PUBLIC = "Public"
    INTERNAL = "Internal"
    CONFIDENTIAL = "Confidential"
    PII = "Pii"
    PHI = "Phi"
    PCI = "Pci"

    @property
    def sensitivity_rank(self) -> int:
        """0 (Public) … 5 (Pci)."""
        return list(DataClassification).index(self)

    @property
    def is_regulated(self) -> bool:
        """Pii, Phi, Pci."""
        return self.sensitivity_rank >= 3

    @property
    def is_restricted(self) -> bool:
        """Everything but Public."""
        return self is not DataClassification.PUBLIC


class Horizon(WireStruct):
    """``classification.horizon``. The three optional fields apply to Asymptotic only."""

    kind: HorizonKind = HorizonKind.BOUNDED
    metric: str | None = None
    """Asymptotic only: the name of the metric the Process optimizes."""
    direction: OptimizationDirection | None = None
    healthy_rate_threshold: Double | None = None
    """Asymptotic only: the threshold on the healthy rate of ``metric``, a plain number; carried, not read."""


class Classification(WireStruct):
    """``spec.classification``. ``pointType`` and ``substrate`` are required."""

    point_type: ConvergencePointType
    substrate: SubstrateType
    horizon: Horizon = Horizon()
    calm: CalmClassification = CalmClassification.MONOTONE
    data_classification: DataClassification = DataClassification.INTERNAL
