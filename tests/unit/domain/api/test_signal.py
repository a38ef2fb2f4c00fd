"""Signals: canonical names, short aliases and the case-folding parser — docs/wire-format.md#signal-spellings."""

from __future__ import annotations

import pytest

from shared.domain.api.closed_set import UnknownValueError
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.signal import ProcessSignal, SighupStrategy, SignalPolicy

CANONICAL = ["SIGHUP", "SIGTERM", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT"]


def test_signals_are_listed_in_the_spec_all_order() -> None:
    assert [s.value for s in ProcessSignal] == CANONICAL


@pytest.mark.parametrize("name", CANONICAL, ids=[f"{n} has short alias {n[3:]}" for n in CANONICAL])
def test_short_alias_is_the_name_without_sig(name: str) -> None:
    assert ProcessSignal(name).short == name[3:]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SIGHUP", ProcessSignal.SIGHUP),
        ("HUP", ProcessSignal.SIGHUP),
        ("hup", ProcessSignal.SIGHUP),
        ("Term", ProcessSignal.SIGTERM),
        ("sigkill", ProcessSignal.SIGKILL),
        ("usr1", ProcessSignal.SIGUSR1),
        ("SigCont", ProcessSignal.SIGCONT),
    ],
    ids=[
        "the canonical name parses",
        "the short alias parses",
        "a lower-case alias parses",
        "a mixed-case alias parses",
        "a lower-case canonical name parses",
        "a lower-case alias with a digit parses",
        "a mixed-case canonical name parses",
    ],
)
def test_parse_accepts_any_case_and_the_short_form(text: str, expected: ProcessSignal) -> None:
    assert ProcessSignal.parse(text) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sigfoo", "unknown signal: SIGFOO"),
        (" HUP", "unknown signal:  HUP"),
        ("", "unknown signal: "),
        ("SIGINT", "unknown signal: SIGINT"),
    ],
    ids=[
        "an unknown name fails with the upper-cased payload",
        "whitespace is not trimmed",
        "the empty string never parses",
        "a real unix signal outside the set is refused",
    ],
)
def test_parse_rejects_unknown_signals(text: str, message: str) -> None:
    with pytest.raises(UnknownValueError) as err:
        ProcessSignal.parse(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("strategy", "target"),
    [
        (SighupStrategy.RECONVERGE, ProcessPhase.RECONVERGING),
        (SighupStrategy.RESTART, ProcessPhase.EXITING),
        (SighupStrategy.NOOP, None),
    ],
    ids=["reconverge goes to reconverging", "restart goes to exiting", "noop goes nowhere"],
)
def test_sighup_target_follows_the_strategy(strategy: SighupStrategy, target: ProcessPhase | None) -> None:
    assert strategy.sighup_target() is target


def test_signal_policy_defaults_match_the_spec() -> None:
    policy = SignalPolicy()
    assert (policy.sigterm_grace_seconds, policy.sigkill_force, policy.sighup_strategy, policy.start_suspended) == (
        480,
        True,
        SighupStrategy.RECONVERGE,
        False,
    )
