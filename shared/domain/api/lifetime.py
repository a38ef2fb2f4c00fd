"""``spec.lifetime``: permanent or ephemeral (TTL + teardown policy).

— docs/wire-format.md#lifetime; the clock: docs/behaviour.md#lifetime.
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.export import ExportSpec
from shared.domain.api.grammar import Duration
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.tagged_union import AmbiguousVariantError, TaggedUnion
from shared.domain.api.wire import UInt32, WireStruct

__all__ = ["EphemeralLifetime", "Lifetime", "LifetimeKind", "PermanentLifetime", "TeardownPolicy"]


class TeardownPolicy(ClosedSet):
    """When an ephemeral Process is torn down. Default ``Always``."""

    ALWAYS = "Always"
    ON_ATTESTED = "OnAttested"
    ON_FAILED = "OnFailed"
    NEVER = "Never"

    def should_teardown_on(self, phase: ProcessPhase) -> bool:
        """Attested → Always/OnAttested; Failed → Always/OnFailed; other phases → False."""
        if phase is ProcessPhase.ATTESTED:
            return self in (TeardownPolicy.ALWAYS, TeardownPolicy.ON_ATTESTED)
        if phase is ProcessPhase.FAILED:
            return self in (TeardownPolicy.ALWAYS, TeardownPolicy.ON_FAILED)
        return False


class PermanentLifetime(WireStruct):
    """The ``permanent`` slot: an empty object."""


class EphemeralLifetime(WireStruct):
    """The ``ephemeral`` slot. ``exports`` is left out on output when empty."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"exports"})

    ttl: Duration = "1h"
    """Humantime duration, counted from ``metadata.creationTimestamp``."""
    teardown_policy: TeardownPolicy = TeardownPolicy.ALWAYS
    max_concurrent: UInt32 = 1
    """Cluster-wide cap; 0 means no cap."""
    exports: list[ExportSpec] = []
    """What the Process ships out before it ends (test reports, receipts, markers…). Default: nothing."""

    def applicable_exports(self, phase: ProcessPhase) -> list[tuple[int, ExportSpec]]:
        """``(index in exports, export)`` for each export whose trigger fires on ``phase``."""
        return [(i, e) for i, e in enumerate(self.exports) if e.when.fires_on(phase)]

    def has_applicable_exports(self, phase: ProcessPhase) -> bool:
        return any(e.when.fires_on(phase) for e in self.exports)


class LifetimeKind(ClosedSet):
    """The Lifetime slot names."""

    PERMANENT = "permanent"
    EPHEMERAL = "ephemeral"


class Lifetime(TaggedUnion):
    """``spec.lifetime``: at most one of ``permanent`` / ``ephemeral``.

    Empty resolves to Permanent (not an error). Both set raises
    :class:`AmbiguousVariantError` ``lifetime has multiple variants set; at most one required``.
    The whole key is left out of spec output when both slots are unset.
    """

    _noun: ClassVar[str] = "lifetime"

    permanent: PermanentLifetime | None = None
    ephemeral: EphemeralLifetime | None = None

    def kind(self) -> LifetimeKind:
        """Permanent when empty or permanent-only; Ephemeral when ephemeral-only.

        Raises :class:`AmbiguousVariantError` when both are set.
        """
        if self.permanent is not None and self.ephemeral is not None:
            raise AmbiguousVariantError("lifetime has multiple variants set; at most one required")
        return LifetimeKind.EPHEMERAL if self.ephemeral is not None else LifetimeKind.PERMANENT

    def variant(self) -> PermanentLifetime | EphemeralLifetime:
        """The resolved payload; an empty lifetime gives ``PermanentLifetime()``."""
        if self.kind() is LifetimeKind.EPHEMERAL:
            assert self.ephemeral is not None
            return self.ephemeral
        return self.permanent or PermanentLifetime()

    def check(self) -> str | None:
        """The Ambiguous error text, or ``None``."""
        try:
            self.kind()
        except AmbiguousVariantError as err:
            return str(err)
        return None

    @property
    def is_default(self) -> bool:
        """Both slots unset."""
        return self.permanent is None and self.ephemeral is None

    @property
    def is_ephemeral(self) -> bool:
        """The ``ephemeral`` slot is set, even if ``permanent`` is too."""
        return self.ephemeral is not None

    def resolved_ephemeral(self) -> EphemeralLifetime | None:
        """The ephemeral payload when exactly that slot is set; otherwise None."""
        return self.ephemeral if self.permanent is None else None
