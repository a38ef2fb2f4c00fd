"""Process phases: spellings, predicates, rank and the legal-transition table.

— docs/behaviour.md#phases and docs/behaviour.md#transition-table.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from shared.domain.api.closed_set import ClosedSet

__all__ = ["TRANSITIONS", "MustReachPhase", "ProcessPhase", "phase_reached"]


class ProcessPhase(ClosedSet):
    """The Unix-like lifecycle phase in ``status.phase``. Default ``Pending``."""

    PENDING = "Pending"
    FORKING = "Forking"
    EXECING = "Execing"
    RUNNING = "Running"
    ATTESTED = "Attested"
    RECONVERGING = "Reconverging"
    RELEASING = "Releasing"
    EXITING = "Exiting"
    FAILED = "Failed"
    ZOMBIE = "Zombie"
    REAPED = "Reaped"

    @property
    def is_terminal(self) -> bool:
        """True for the sink ``Reaped`` only."""
        return self is ProcessPhase.REAPED

    @property
    def is_running(self) -> bool:
        """True for ``Running`` and ``Attested``."""
        return self in (ProcessPhase.RUNNING, ProcessPhase.ATTESTED)

    @property
    def is_alive(self) -> bool:
        """False for ``Zombie``, ``Reaped`` and ``Failed``; true otherwise."""
        return self not in (ProcessPhase.ZOMBIE, ProcessPhase.REAPED, ProcessPhase.FAILED)

    @property
    def is_releasing(self) -> bool:
        """True for ``Releasing`` only."""
        return self is ProcessPhase.RELEASING

    @property
    def is_terminal_reached(self) -> bool:
        """True at the two gates ``Attested`` and ``Failed``."""
        return self in (ProcessPhase.ATTESTED, ProcessPhase.FAILED)

    @property
    def rank(self) -> int:
        """Progress rank used by dependency checks: Pending 0 … Attested 4.

        ``Reconverging`` ranks with ``Running`` (3); the exit phases rank 0.
        """
        return _RANK.get(self, 0)

    def can_transition_to(self, target: ProcessPhase) -> bool:
        """True when ``self → target`` is one of the 18 legal edges."""
        return target in TRANSITIONS[self]

    def next_phases(self) -> frozenset[ProcessPhase]:
        """The phases ``self`` may legally move to; empty for ``Reaped``."""
        return TRANSITIONS[self]


_P = ProcessPhase

_RANK: Mapping[ProcessPhase, int] = MappingProxyType(
    {_P.PENDING: 0, _P.FORKING: 1, _P.EXECING: 2, _P.RUNNING: 3, _P.RECONVERGING: 3, _P.ATTESTED: 4}
)

TRANSITIONS: Mapping[ProcessPhase, frozenset[ProcessPhase]] = MappingProxyType(
    {
        _P.PENDING: frozenset({_P.FORKING}),
        _P.FORKING: frozenset({_P.EXECING}),
        _P.EXECING: frozenset({_P.RUNNING, _P.FAILED}),
        _P.RUNNING: frozenset({_P.ATTESTED, _P.EXITING, _P.FAILED, _P.RECONVERGING}),
        _P.ATTESTED: frozenset({_P.RECONVERGING, _P.RELEASING, _P.EXITING}),
        _P.RECONVERGING: frozenset({_P.EXECING}),
        _P.RELEASING: frozenset({_P.EXITING, _P.ZOMBIE}),
        _P.EXITING: frozenset({_P.ZOMBIE}),
        _P.FAILED: frozenset({_P.RELEASING, _P.ZOMBIE}),
        _P.ZOMBIE: frozenset({_P.REAPED}),
        _P.REAPED: frozenset(),
    }
)
"""The complete legal-transition table, 18 edges (docs/behaviour.md#transition-table)."""


class MustReachPhase(ClosedSet):
    """The phase a dependency must reach (``dependsOn[].mustReach``). Default ``Attested``."""

    RUNNING = "Running"
    ATTESTED = "Attested"

    @property
    def phase(self) -> ProcessPhase:
        """The ProcessPhase of the same spelling."""
        return ProcessPhase(self.value)


def phase_reached(actual: ProcessPhase | None, required: ProcessPhase | MustReachPhase) -> bool:
    """True when ``rank(actual) >= rank(required)``; ``None`` counts as Pending."""
    need = required.phase if isinstance(required, MustReachPhase) else required
    return (actual or ProcessPhase.PENDING).rank >= need.rank
