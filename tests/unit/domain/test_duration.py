"""shared.domain.duration: the grammar of docs/wire-format.md#durations."""

from __future__ import annotations

import pytest

from shared.domain.duration import DurationError, parse_duration_ns, to_go_duration

S = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("1h30m", 5400 * S),
        ("2h 15m", 8100 * S),
        ("20 min", 1200 * S),
        ("1 0m", 600 * S),
        ("  15m  ", 900 * S),
        ("1.5h", 5400 * S),
        ("0.5h", 1800 * S),
        ("4.2s", 4_200_000_000),
        ("1M", 2630016 * S),
        ("1m", 60 * S),
        ("1y", 31557600 * S),
        ("2w", 2 * 604800 * S),
        ("3d", 3 * 86400 * S),
        ("250ms", 250_000_000),
        ("7µs", 7000),
        ("5nsec", 5),
        ("1hour 2minutes 3seconds", 3723 * S),
    ],
    ids=lambda v: repr(v),
)
def test_parses(text: str, ns: int) -> None:
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", "time unit needed"),
        ("", "empty"),
        ("   ", "empty"),
        ("1.", "invalid fraction"),
        ("1..s", "invalid fraction"),
        (".5s", "expected number"),
        ("-5s", "expected number"),
        ("+5s", "expected number"),
        ("0.00000005d", "number overflow"),
        ("1.5ns", "number overflow"),
        ("5 parsecs", "unknown time unit"),
        ("5H", "unknown time unit"),
        ("99999999999999999999999y", "number overflow"),
    ],
    ids=lambda v: repr(v),
)
def test_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_duration_ns(text)


@pytest.mark.parametrize(
    ("ns", "go"),
    [(0, "0s"), (5400 * S, "1h30m0s"), (90 * S, "1m30s"), (5 * S, "5s"), (250_000_000, "250ms"), (7, "7ns")],
)
def test_go_duration(ns: int, go: str) -> None:
    assert to_go_duration(ns) == go
