"""reconciler.signals: parsing (docs/wire-format.md#signal-spellings) and every row of the effect table
(docs/behaviour.md#signal-effects), with the differences from the reference marked
(docs/divergences.md#signals-phases)."""

from __future__ import annotations

import pytest

from reconciler.signals import EffectKind, effect_of, ingest, parse_signal
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.signal import ProcessSignal as S
from shared.domain.api.signal import SighupStrategy, SignalPolicy

ALL_PHASES = list(P)
ALIVE = [p for p in P if p not in (P.FAILED, P.ZOMBIE, P.REAPED)]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("SIGHUP", S.SIGHUP),
        ("HUP", S.SIGHUP),
        ("sighup", S.SIGHUP),
        ("Hup", S.SIGHUP),
        ("term", S.SIGTERM),
        ("sigkill", S.SIGKILL),
        ("USR1", S.SIGUSR1),
        ("SIGUSR2", S.SIGUSR2),
        ("stop", S.SIGSTOP),
        ("Cont", S.SIGCONT),
        (" SIGHUP", None),
        ("SIGHUP ", None),
        ("sigfoo", None),
        ("", None),
        ("9", None),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else None,
)
def test_a_signal_parses_upper_cased_in_long_or_short_form_without_trimming(raw: str, expected: S | None) -> None:
    assert parse_signal(raw) is expected


def test_no_annotation_means_no_signal() -> None:
    assert ingest({"other": "x"}) is None


def test_an_unparsable_annotation_is_reported_with_its_raw_value() -> None:
    found = ingest({"tatara.pleme.io/signal": "sigfoo"})
    assert found is not None
    assert found.raw == "sigfoo"
    assert found.signal is None


POLICY = SignalPolicy()

# (signal, phase, strategy, effect kind, target phase, message): the rows of the effect table
ROWS = [
    *[
        (S.SIGHUP, ph, SighupStrategy.RECONVERGE, EffectKind.GO_TO, P.RECONVERGING, None)
        for ph in (P.RUNNING, P.ATTESTED)
    ],
    *[(S.SIGHUP, ph, SighupStrategy.RESTART, EffectKind.GO_TO, P.EXITING, None) for ph in (P.RUNNING, P.ATTESTED)],
    *[(S.SIGHUP, ph, SighupStrategy.NOOP, EffectKind.NOTHING, None, None) for ph in (P.RUNNING, P.ATTESTED)],
    *[
        (S.SIGHUP, ph, SighupStrategy.RECONVERGE, EffectKind.NOTHING, None, None)
        for ph in ALL_PHASES
        if ph not in (P.RUNNING, P.ATTESTED)
    ],
    *[
        (S.SIGTERM, ph, SighupStrategy.RECONVERGE, EffectKind.GO_TO, P.EXITING, None)
        for ph in ALIVE
        if ph is not P.EXITING
    ],
    *[
        (S.SIGKILL, ph, SighupStrategy.RECONVERGE, EffectKind.GO_TO, P.REAPED, None)
        for ph in ALL_PHASES
        if ph is not P.REAPED
    ],
    *[
        (
            S.SIGUSR1,
            ph,
            SighupStrategy.RECONVERGE,
            EffectKind.FORCE_ATTEST,
            P.RUNNING,
            "forced re-attestation (SIGUSR1)",
        )
        for ph in (P.RUNNING, P.ATTESTED)
    ],
    *[
        (
            S.SIGUSR2,
            ph,
            SighupStrategy.RECONVERGE,
            EffectKind.REMEDIATE,
            P.RECONVERGING,
            "remediate requested (SIGUSR2)",
        )
        for ph in (P.RUNNING, P.ATTESTED)
    ],
    *[
        (sig, ph, SighupStrategy.RECONVERGE, EffectKind.NOTHING, None, None)
        for sig in (S.SIGUSR1, S.SIGUSR2)
        for ph in ALL_PHASES
        if ph not in (P.RUNNING, P.ATTESTED)
    ],
    *[(S.SIGSTOP, ph, SighupStrategy.RECONVERGE, EffectKind.SUSPEND, None, None) for ph in ALL_PHASES],
    *[(S.SIGCONT, ph, SighupStrategy.RECONVERGE, EffectKind.RESUME, None, None) for ph in ALL_PHASES],
]


def _row_id(row: tuple[object, ...]) -> str:
    sig, ph, strategy, kind, target, _ = row
    assert isinstance(sig, S)
    assert isinstance(ph, P)
    assert isinstance(strategy, SighupStrategy)
    outcome = f"goes to {target.value}" if isinstance(target, P) else f"is {kind}"
    extra = f" with strategy {strategy.value}" if sig is S.SIGHUP else ""
    return f"{sig.value} in {ph.value}{extra} {outcome}"


@pytest.mark.parametrize("row", ROWS, ids=[_row_id(r) for r in ROWS])
def test_effect_table_row(row: tuple[S, P, SighupStrategy, EffectKind, P | None, str | None]) -> None:
    sig, phase, strategy, kind, target, message = row
    effect = effect_of(sig, phase, SignalPolicy(sighup_strategy=strategy))
    assert effect.kind is kind
    assert effect.target is target
    assert effect.message == message


@pytest.mark.parametrize(
    ("signal", "phase", "policy"),
    [
        (S.SIGTERM, P.EXITING, POLICY),
        (S.SIGTERM, P.FAILED, POLICY),
        (S.SIGTERM, P.ZOMBIE, POLICY),
        (S.SIGKILL, P.REAPED, POLICY),
        (S.SIGKILL, P.RUNNING, SignalPolicy(sigkill_force=False)),
    ],
    ids=[
        "SIGTERM on a Process already Exiting does nothing, so the grace period is not restarted",
        "SIGTERM on Failed does nothing because Failed is not alive",
        "SIGTERM on Zombie does nothing because Zombie is not alive",
        "SIGKILL on Reaped does nothing",
        "SIGKILL is refused when sigkillForce is false",
    ],
)
def test_signals_that_do_nothing_say_why(signal: S, phase: P, policy: SignalPolicy) -> None:
    effect = effect_of(signal, phase, policy)
    assert effect.kind is EffectKind.NOTHING
    assert effect.why
