"""The reconciler's legal-transition table and the one builder of phase writes.

The table is the types' 18 edges (process-crd.md §6.3, :data:`shared.domain.api.phase.TRANSITIONS`)
plus exactly the edges the spec documents for signals and deletion (process-crd.md §6.3
"Important", process-reconciler.md §2.1, §2.4 and §4.2):

- deletion and SIGTERM: every alive phase → ``Exiting`` (Pending, Forking, Execing, Reconverging,
  Releasing; Running/Attested → Exiting is already legal);
- SIGKILL: every phase except Reaped → ``Reaped``;
- SIGUSR1 (force re-attest): ``Attested`` → ``Running``.

SIGHUP (Reconverge/Restart) and SIGUSR2 only take edges that are already legal. Every phase
write goes through :func:`phase_write`, which refuses anything else with
:class:`IllegalTransition`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from reconciler.conditions import conditions_for
from reconciler.decision import Decision, Observed
from shared.domain.api.codec import format_timestamp
from shared.domain.api.phase import TRANSITIONS, ProcessPhase

__all__ = ["LEGAL", "IllegalTransition", "is_legal", "phase_write"]

_P = ProcessPhase


def _extended() -> Mapping[ProcessPhase, frozenset[ProcessPhase]]:
    table: dict[ProcessPhase, set[ProcessPhase]] = {p: set(t) for p, t in TRANSITIONS.items()}
    for phase in ProcessPhase:
        if phase.is_alive and phase is not _P.EXITING:
            table[phase].add(_P.EXITING)  # deletion, SIGTERM
        if phase is not _P.REAPED:
            table[phase].add(_P.REAPED)  # SIGKILL
    table[_P.ATTESTED].add(_P.RUNNING)  # SIGUSR1
    return MappingProxyType({p: frozenset(t) for p, t in table.items()})


LEGAL: Mapping[ProcessPhase, frozenset[ProcessPhase]] = _extended()
"""from → allowed next phases: §6.3's table plus the signal/deletion edges above."""


def is_legal(source: ProcessPhase, target: ProcessPhase) -> bool:
    """True when the reconciler may write ``source → target``; self-loops are not transitions."""
    return target in LEGAL[source]


class IllegalTransition(ValueError):
    """A handler tried to write a phase change outside :data:`LEGAL`."""

    def __init__(self, source: ProcessPhase, target: ProcessPhase) -> None:
        super().__init__(f"illegal phase transition {source.value} → {target.value}")
        self.source = source
        self.target = target


def phase_write(
    observed: Observed,
    target: ProcessPhase,
    message: str,
    *,
    reason: str,
    requeue_after: float | None,
    extra: Mapping[str, Any] | None = None,
    stalled: bool | None = None,
    **decision: Any,
) -> Decision:
    """A Decision that writes ``phase``, ``phaseSince``, ``message`` and the kstatus conditions.

    ``target`` equal to the current phase rewrites it (SIGUSR1 on Running) without a
    ``transition``. ``extra`` adds status keys; ``decision`` sets other Decision fields.

    Raises:
        IllegalTransition: ``current → target`` is not in :data:`LEGAL`.
    """
    process = observed.process
    source = process.phase
    if source is not target and not is_legal(source, target):
        raise IllegalTransition(source, target)
    previous = process.status.conditions if process.status is not None else []
    status: dict[str, Any] = {
        "phase": target.value,
        "phaseSince": format_timestamp(observed.now),
        "message": message,
        "conditions": conditions_for(
            target,
            process.metadata.generation,
            observed.now,
            reason,
            message,
            stalled=stalled,
            previous=previous,
        ),
    }
    status.update(extra or {})
    return Decision(
        status=status,
        transition=(source, target) if source is not target else None,
        requeue_after=requeue_after,
        **decision,
    )
