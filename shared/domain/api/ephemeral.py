"""``EphemeralSpec`` (``defephemeral``, a pool's member template) and its lowering.

— docs/wire-format.md#ephemeralspec.
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.boundary import Boundary, Condition
from shared.domain.api.classification import Classification, ConvergencePointType, SubstrateType
from shared.domain.api.export import ExportSpec
from shared.domain.api.grammar import Duration, ParentPid
from shared.domain.api.intent import AplicacaoIntent, Intent
from shared.domain.api.lifetime import EphemeralLifetime, Lifetime, TeardownPolicy
from shared.domain.api.process import IdentitySpec, ProcessSpec
from shared.domain.api.routing import RoutingSpec
from shared.domain.api.wire import UInt32, WireStruct

__all__ = ["DEFAULT_EPHEMERAL_CLASSIFICATION", "EphemeralSpec"]

DEFAULT_EPHEMERAL_CLASSIFICATION = Classification(point_type=ConvergencePointType.GATE, substrate=SubstrateType.COMPUTE)
"""Gate / Compute / Bounded / Monotone / Internal. The reference's field documentation says
NonMonotone; its code, like ours, uses Monotone."""


class EphemeralSpec(WireStruct):
    """A short-lived Aplicacao install. Note ``teardown`` (not ``teardownPolicy``)."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"exports"})

    aplicacao: AplicacaoIntent
    ttl: Duration = "1h"
    """How long a member lives, as a duration (``1h``, ``30m``, ``2h 15m``). Default ``1h``."""
    teardown: TeardownPolicy = TeardownPolicy.ALWAYS
    max_concurrent: UInt32 = 1
    """Cluster-wide cap on members running at once; 0 means no cap. Default 1."""
    postconditions: list[Condition] = []
    """Checks that must hold before a member is Attested. Default: none."""
    preconditions: list[Condition] = []
    """Checks that must hold before a member runs. Default: none."""
    verify_timeout: Duration | None = None
    """How long the boundary checks may take, as a duration; absent: 15m."""
    classification: Classification | None = None
    parent: ParentPid | None = None
    """PID path of the parent Process of each member; absent: members are roots."""
    exports: list[ExportSpec] = []
    """What each member ships out before it ends. Default: nothing."""
    routing: RoutingSpec | None = None

    def to_process_spec(self) -> ProcessSpec:
        """Lower to a ProcessSpec as the reference does (docs/wire-format.md#ephemeralspec).

        identity ``{parent}``; classification or Gate/Compute; ``intent.aplicacao`` only;
        boundary from the conditions with ``verifyTimeout`` as ``timeout``; default
        compliance, dependsOn and signals; ``lifetime.ephemeral`` from ttl/teardown/
        maxConcurrent/exports; routing; no encapsulates; not suspended.
        """
        return ProcessSpec(
            identity=IdentitySpec(parent=self.parent),
            classification=self.classification or DEFAULT_EPHEMERAL_CLASSIFICATION,
            intent=Intent(aplicacao=self.aplicacao),
            boundary=Boundary(
                preconditions=list(self.preconditions),
                postconditions=list(self.postconditions),
                timeout=self.verify_timeout,
            ),
            lifetime=Lifetime(
                ephemeral=EphemeralLifetime(
                    ttl=self.ttl,
                    teardown_policy=self.teardown,
                    max_concurrent=self.max_concurrent,
                    exports=list(self.exports),
                )
            ),
            routing=self.routing,
        )
