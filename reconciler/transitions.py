"""The reconciler's legal-transition table and the one builder of phase writes.

The table is the types' 18 edges (:data:`shared.domain.api.phase.TRANSITIONS`) plus exactly the
edges signals and deletion need (docs/behaviour.md#transition-table):

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

from msgspec import UNSET, UnsetType

from reconciler.conditions import conditions_for
from reconciler.decision import Decision, Observed, SignalCount, Transition
from reconciler.reasons import phase_event
from reconciler.status_patch import StatusPatch, merged
from shared.domain.api.phase import TRANSITIONS, ProcessPhase
from shared.domain.api.process import Process
from shared.kube.events import Event

__all__ = ["LEGAL", "IllegalTransition", "is_legal", "observed_generation", "phase_write"]

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
"""from → allowed next phases: the types' table plus the signal/deletion edges above."""


def is_legal(source: ProcessPhase, target: ProcessPhase) -> bool:
    """True when the reconciler may write ``source → target``; self-loops are not transitions."""
    return target in LEGAL[source]


class IllegalTransition(ValueError):
    """A handler tried to write a phase change outside :data:`LEGAL`."""

    def __init__(self, source: ProcessPhase, target: ProcessPhase) -> None:
        super().__init__(f"illegal phase transition {source.value} → {target.value}")
        self.source = source
        self.target = target


def observed_generation(process: Process) -> int | UnsetType:
    """``metadata.generation`` for ``status.observedGeneration`` (UNSET, not sent, when the object has none)."""
    generation = process.metadata.generation
    return generation if generation is not None else UNSET


def phase_write(
    observed: Observed,
    target: ProcessPhase,
    message: str,
    *,
    reason: str,
    requeue_after: float | None,
    extra: StatusPatch | None = None,
    stalled: bool | None = None,
    events: tuple[Event, ...] = (),
    annotations: Mapping[str, str | None] | None = None,
    signal: SignalCount | None = None,
) -> Decision:
    """A Decision that writes ``phase``, ``phaseSince``, ``message``, the kstatus conditions and
    ``observedGeneration`` (docs/behaviour.md#conditions).

    A phase change also carries its :class:`Transition` and, first among ``events``, a Normal Event
    ``Phase<Target>`` with ``message`` (or ``<Source> → <Target>`` when it is empty). ``target``
    equal to the current phase rewrites it (SIGUSR1 on Running) without either. ``extra`` adds
    status fields (it wins over the four above); the other keywords are the Decision's fields of
    the same names.

    Raises:
        IllegalTransition: ``current → target`` is not in :data:`LEGAL`.
    """
    process = observed.process
    source = process.phase
    if source is not target and not is_legal(source, target):
        raise IllegalTransition(source, target)
    status = process.status
    conditions = conditions_for(target, process.metadata.generation, observed.now, reason, message, stalled=stalled,
                                previous=status.conditions if status is not None else [])
    patch = StatusPatch(phase=target, phase_since=observed.now, message=message, conditions=conditions,
                        observed_generation=observed_generation(process))
    transition: Transition | None = None
    if source is not target:
        since = status.phase_since if status is not None else None
        transition = Transition(source, target, (observed.now - since).total_seconds() if since else None)
        events = (Event.normal(phase_event(target), message or f"{source.value} → {target.value}"), *events)
    return Decision(
        status=merged(patch, extra),
        transition=transition,
        annotations=annotations,
        signal=signal,
        events=events,
        requeue_after=requeue_after,
    )
