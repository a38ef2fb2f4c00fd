"""Signals sent as the ``tatara.pleme.io/signal`` annotation: parsing and the effect table.

Pure: :func:`effect_of` maps (signal, phase, ``spec.signals``) to a :class:`SignalEffect`;
:func:`ingest` reads the annotation; :func:`decide_signal`, which the dispatcher
(:func:`reconciler.phases.decide`) calls, turns an effect into a Decision that also strips the
annotation (one-shot).

The spellings: docs/wire-format.md#signal-spellings; delivery and the effect table:
docs/behaviour.md#sending-a-signal and docs/behaviour.md#signal-effects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from reconciler.decision import Decision, Observed, SignalCount
from reconciler.reasons import Reason, signal_reason
from reconciler.status_patch import StatusPatch
from reconciler.timing import TICK
from reconciler.transitions import phase_write
from shared.domain.annotations import SIGNAL
from shared.domain.api.closed_set import UnknownValueError
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.signal import ProcessSignal, SignalPolicy
from shared.kube.events import Event

__all__ = [
    "EXIT_SIGKILL",
    "EffectKind",
    "Ingestion",
    "SignalEffect",
    "decide_signal",
    "effect_of",
    "ingest",
    "parse_signal",
]

_P = ProcessPhase

EXIT_SIGKILL = 137
"""``status.exitCode`` after SIGKILL, shell-style: 128 + 9 (docs/behaviour.md#failed)."""


class EffectKind(StrEnum):
    """What a signal does: a phase change, a forced step, a spec patch, or nothing."""

    GO_TO = "GoTo"
    FORCE_ATTEST = "ForceAttest"
    REMEDIATE = "Remediate"
    SUSPEND = "Suspend"
    RESUME = "Resume"
    NOTHING = "Nothing"


@dataclass(frozen=True)
class SignalEffect:
    """One row of the effect table: ``kind``, the target phase and message for phase effects,
    and ``why`` for a no-op (shown in the Event)."""

    kind: EffectKind
    target: ProcessPhase | None = None
    message: str | None = None
    why: str = ""


FORCE_ATTEST_MESSAGE = "forced re-attestation (SIGUSR1)"
REMEDIATE_MESSAGE = "remediate requested (SIGUSR2)"


def parse_signal(raw: str) -> ProcessSignal | None:
    """The signal named by an annotation value, or None.

    ASCII upper-case, no trimming; canonical (``SIGHUP``) or short (``HUP``) form.
    """
    try:
        return ProcessSignal.parse(raw)
    except UnknownValueError:
        return None


def _nothing(why: str) -> SignalEffect:
    return SignalEffect(EffectKind.NOTHING, why=why)


def effect_of(signal: ProcessSignal, phase: ProcessPhase, policy: SignalPolicy) -> SignalEffect:
    """The effect of ``signal`` on a Process in ``phase`` (docs/behaviour.md#signal-effects).

    Differences from the reference table (docs/divergences.md#signals-phases): SIGTERM on a Process already
    Exiting does nothing (a rewrite would restart the grace period); SIGKILL is refused when
    ``spec.signals.sigkillForce`` is false; SIGKILL on Failed/Zombie reaps, as the pure table
    in the reference does (open question 14).
    """
    running = phase in (_P.RUNNING, _P.ATTESTED)
    if signal is ProcessSignal.SIGHUP:
        target = policy.sighup_strategy.sighup_target()
        if target is None:
            return _nothing("sighupStrategy is Noop")
        if not running:
            return _nothing(f"SIGHUP only acts on Running or Attested, not {phase.value}")
        return SignalEffect(EffectKind.GO_TO, target)
    if signal is ProcessSignal.SIGTERM:
        if not phase.is_alive:
            return _nothing(f"SIGTERM only acts on an alive Process, not {phase.value}")
        if phase is _P.EXITING:
            return _nothing("already Exiting")
        return SignalEffect(EffectKind.GO_TO, _P.EXITING)
    if signal is ProcessSignal.SIGKILL:
        if phase is _P.REAPED:
            return _nothing("already Reaped")
        if not policy.sigkill_force:
            return _nothing("spec.signals.sigkillForce is false")
        return SignalEffect(EffectKind.GO_TO, _P.REAPED)
    if signal is ProcessSignal.SIGUSR1:
        if not running:
            return _nothing(f"SIGUSR1 only acts on Running or Attested, not {phase.value}")
        return SignalEffect(EffectKind.FORCE_ATTEST, _P.RUNNING, FORCE_ATTEST_MESSAGE)
    if signal is ProcessSignal.SIGUSR2:
        if not running:
            return _nothing(f"SIGUSR2 only acts on Running or Attested, not {phase.value}")
        return SignalEffect(EffectKind.REMEDIATE, _P.RECONVERGING, REMEDIATE_MESSAGE)
    if signal is ProcessSignal.SIGSTOP:
        return SignalEffect(EffectKind.SUSPEND)
    return SignalEffect(EffectKind.RESUME)


@dataclass(frozen=True)
class Ingestion:
    """The annotation's content: ``raw`` as written, ``signal`` None when it does not parse."""

    raw: str
    signal: ProcessSignal | None


def ingest(annotations: Mapping[str, str]) -> Ingestion | None:
    """Read the one-shot signal annotation; None when absent."""
    raw = annotations.get(SIGNAL)
    if raw is None:
        return None
    return Ingestion(raw, parse_signal(raw))


_STRIP: dict[str, str | None] = {SIGNAL: None}


def decide_signal(observed: Observed, raw: str, signal: ProcessSignal | None) -> Decision:
    """Apply one signal (docs/behaviour.md#signal-effects): the effect and the annotation strip in one Decision.

    An unknown value → Warning ``InvalidSignal``, annotation cleared, nothing else.
    """
    process = observed.process
    if signal is None:
        text = f"unknown signal {raw!r}; annotation removed without effect"
        return Decision(
            annotations=_STRIP,
            events=(Event.warning(Reason.INVALID_SIGNAL, text),),
            signal=SignalCount(raw, "invalid"),
            requeue_after=TICK,
        )
    effect = effect_of(signal, process.phase, process.spec.signals)
    name = signal.value
    if effect.kind is EffectKind.NOTHING:
        return Decision(
            annotations=_STRIP,
            events=(Event.normal(Reason.SIGNAL_IGNORED, f"{name} ignored: {effect.why}"),),
            signal=SignalCount(name, "ignored"),
            requeue_after=TICK,
        )
    received = Event.normal(Reason.SIGNAL_RECEIVED, f"{name} received in {process.phase.value}")
    applied = SignalCount(name, "applied")
    if effect.kind in (EffectKind.SUSPEND, EffectKind.RESUME):
        return Decision(annotations=_STRIP, suspended=effect.kind is EffectKind.SUSPEND, signal=applied,
                        events=(received,), requeue_after=TICK)
    assert effect.target is not None
    extra = StatusPatch(exit_code=EXIT_SIGKILL) if signal is ProcessSignal.SIGKILL else None
    return phase_write(
        observed,
        effect.target,
        effect.message or f"{name} received",
        reason=signal_reason(signal),
        requeue_after=TICK,
        extra=extra,
        annotations=_STRIP,
        signal=applied,
        events=(received,),
    )
