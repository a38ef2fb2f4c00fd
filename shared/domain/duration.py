"""Duration strings in the humantime 2.3 grammar — docs/wire-format.md#durations.

Used for ``boundary.timeout``, lifetime ``ttl`` and friends. No PyPI package parses this
grammar (months ``M`` vs minutes ``m``, whitespace inside numbers, ``"0"`` alone), so this
is a small hand parser. Results are whole nanoseconds to keep fractions exact.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Final

__all__ = ["DurationError", "parse_duration", "parse_duration_ns", "to_go_duration"]

_NS: Final = 1
_US: Final = 1_000
_MS: Final = 1_000_000
_S: Final = 1_000_000_000

_UNITS: Final[dict[str, int]] = {
    **dict.fromkeys(("nanos", "nsec", "ns"), _NS),
    **dict.fromkeys(("usec", "us", "µs"), _US),
    **dict.fromkeys(("millis", "msec", "ms"), _MS),
    **dict.fromkeys(("seconds", "second", "secs", "sec", "s"), _S),
    **dict.fromkeys(("minutes", "minute", "min", "mins", "m"), 60 * _S),
    **dict.fromkeys(("hours", "hour", "hr", "hrs", "h"), 3600 * _S),
    **dict.fromkeys(("days", "day", "d"), 86400 * _S),
    **dict.fromkeys(("weeks", "week", "wk", "wks", "w"), 604800 * _S),
    **dict.fromkeys(("months", "month", "M"), 2630016 * _S),
    **dict.fromkeys(("years", "year", "yr", "yrs", "y"), 31557600 * _S),
}
# Units whose fraction must come out in whole seconds; s/ms/µs/min in nanoseconds.
_WHOLE_SECOND_UNITS: Final = frozenset(u for u, v in _UNITS.items() if v >= 3600 * _S)
_MAX_NS: Final = (2**64 - 1) * _S + (_S - 1)
"""humantime's ceiling: a Rust ``Duration`` (u64 seconds + nanoseconds)."""


class DurationError(ValueError):
    """Not a humantime duration; the message says why (e.g. ``time unit needed``)."""


def parse_duration_ns(text: str) -> int:
    """``text`` in whole nanoseconds. ``"0"`` → 0; ``"1h30m"``, ``"2h 15m"``, ``"20 min"``.

    Raises :class:`DurationError` for an empty string, a bare number, an unknown unit, a sign,
    a malformed fraction or a fraction finer than the unit allows (``number overflow``).
    """
    body = text.strip()
    if not body:
        raise DurationError("value was empty")
    if body == "0":
        return 0
    total = 0
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i].isspace():
            i += 1
        if i >= n:
            break
        # number: digits (whitespace inside skipped), optional '.' + digits
        int_digits: list[str] = []
        while i < n and (body[i].isdigit() or body[i].isspace()) and body[i].isascii():
            if body[i].isdigit():
                int_digits.append(body[i])
            i += 1
        if not int_digits:
            raise DurationError(f"expected number at {i}")
        frac_digits: list[str] = []
        if i < n and body[i] == ".":
            i += 1
            while i < n and body[i].isascii() and body[i].isdigit():
                frac_digits.append(body[i])
                i += 1
            if not frac_digits:
                raise DurationError(f"invalid fraction at {i}")
        while i < n and body[i].isspace():
            i += 1
        start = i
        while i < n and not body[i].isspace() and not body[i].isdigit():
            i += 1
        unit = body[start:i]
        if not unit:
            raise DurationError("time unit needed, for example 60sec or 1h")
        scale = _UNITS.get(unit)
        if scale is None:
            raise DurationError(f"unknown time unit {unit!r}, supported units: ns, us, ms, s, m, h, d, w, M, y")
        value = int("".join(int_digits)) * scale
        if frac_digits:
            if scale == _NS:
                raise DurationError("number overflow")
            frac = Decimal("0." + "".join(frac_digits)) * scale
            step = _S if unit in _WHOLE_SECOND_UNITS else _NS
            if frac % step != 0:
                raise DurationError("number overflow")
            value += int(frac)
        total += value
        if total > _MAX_NS:
            raise DurationError("number overflow")
    return total


def parse_duration(text: str) -> timedelta:
    """:func:`parse_duration_ns` as a ``timedelta`` (microsecond precision)."""
    return timedelta(microseconds=parse_duration_ns(text) // _US)


def to_go_duration(ns: int) -> str:
    """A Go ``time.Duration`` string (``1h30m0s``, ``250ms``, ``0s``) as Flux schemas expect."""
    if ns == 0:
        return "0s"
    if ns % _S:
        return f"{ns // _MS}ms" if ns % _MS == 0 else f"{ns}ns"
    seconds = ns // _S
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{secs}s"
