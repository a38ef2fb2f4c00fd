"""JSON number literals read as the reference reads them: serde_json 1.0 without ``float_roundtrip``.

Source: serde_json 1.0.150 ``de.rs`` (``parse_integer``, ``parse_number``, ``parse_decimal``,
``parse_exponent``, ``parse_long_integer``, ``parse_decimal_overflow``, ``f64_from_parts``); the
rules and where tatara applies them: docs/wire-format.md#numbers.

serde_json is not correctly rounded. It keeps the literal's digits in a ``u64`` significand
(digits past ``u64::MAX`` are dropped: integer digits count into the exponent, fraction digits
are ignored), converts the significand to ``f64`` (one rounding), then multiplies or divides by
the ``f64`` nearest ``10^|e|`` (a second rounding; below ``1e-308`` it divides by ``1e308`` first,
a third). A literal without fraction or exponent is an integer when it fits ``u64`` (or ``i64``
when negative), else an ``f64``; ``-0`` is the float ``-0.0``. Python's ``float()`` is correctly
rounded, so e.g. ``2e-24`` reads ``2.0000000000000002e-24`` here and ``2e-24`` in Python.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "I64_MIN",
    "U64_MAX",
    "NumberError",
    "is_float_integer",
    "parse_f64",
    "parse_number",
]

U64_MAX: Final = 2**64 - 1
I64_MIN: Final = -(2**63)
_I32_MAX: Final = 2**31 - 1

_POW10: Final = tuple(float(f"1e{i}") for i in range(309))
"""``10^0 … 10^308`` as the nearest ``f64`` (serde_json's ``POW10`` table)."""

_LITERAL: Final = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?")


class NumberError(ValueError):
    """A literal serde_json refuses: ``number out of range`` (a finite literal whose value
    overflows ``f64``, e.g. ``1e400`` or ``1.7976931348623159e308``) or ``invalid number``."""


def _f64_from_parts(positive: bool, significand: int, exponent: int) -> float:
    """``significand × 10^exponent`` the serde_json way (two or three roundings)."""
    f = float(significand)
    while True:
        index = abs(exponent)
        if index < len(_POW10):
            if exponent >= 0:
                f *= _POW10[index]
                if f == float("inf"):
                    raise NumberError("number out of range")
            else:
                f /= _POW10[index]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            raise NumberError("number out of range")
        f /= 1e308
        exponent += 308
    return f if positive else -f


def _overflows(significand: int, digit: int) -> bool:
    """serde_json's ``overflow!(significand * 10 + digit, u64::MAX)``."""
    return significand * 10 + digit > U64_MAX


def _accumulate(significand: int, digits: str) -> tuple[int, int]:
    """Append ``digits`` to ``significand`` until the next would pass ``u64::MAX``.

    Returns the significand and how many digits were taken."""
    for taken, char in enumerate(digits):
        digit = ord(char) - 48
        if _overflows(significand, digit):
            return significand, taken
        significand = significand * 10 + digit
    return significand, len(digits)


def _read(literal: str) -> int | float:
    """serde_json's parse of one JSON number literal: an ``int`` for ``U64``/``I64``, a
    ``float`` for ``F64``. Raises :class:`NumberError`."""
    match = _LITERAL.fullmatch(literal)
    if match is None:
        raise NumberError("invalid number")
    sign, whole, fraction, exp_sign, exp_digits = match.groups()
    positive = not sign
    significand, taken = _accumulate(0, whole)
    exponent = 0
    if taken < len(whole):
        # parse_long_integer: the remaining integer digits only scale the value.
        exponent = len(whole) - taken
    elif fraction is None and exp_digits is None:
        if positive:
            return significand
        if significand == 0 or significand > 2**63:
            return -float(significand)  # -0 and integers below i64::MIN are f64
        return -significand
    if fraction is not None:
        # parse_decimal: fraction digits join the significand until it would overflow,
        # then the rest are ignored (parse_decimal_overflow).
        significand, taken = _accumulate(significand, fraction)
        exponent -= taken
    if exp_digits is not None:
        if _exponent_overflows(exp_digits):
            # parse_exponent_overflow: an exponent past i32 is an error upwards, zero downwards.
            if significand != 0 and exp_sign != "-":
                raise NumberError("number out of range")
            return 0.0 if positive else -0.0
        value = int(exp_digits)
        exponent = _saturate(exponent + value if exp_sign != "-" else exponent - value)
    return _f64_from_parts(positive, significand, exponent)


def _exponent_overflows(digits: str) -> bool:
    """serde_json stops reading the exponent when ``exp * 10 + digit`` would pass ``i32::MAX``."""
    exp = 0
    for char in digits:
        digit = ord(char) - 48
        if exp * 10 + digit > _I32_MAX:
            return True
        exp = exp * 10 + digit
    return False


def _saturate(value: int) -> int:
    """``i32`` saturating arithmetic of the exponent sum."""
    return max(-(2**31), min(_I32_MAX, value))


def parse_number(literal: str) -> int | float:
    """Read a JSON number literal as ``serde_json::Value`` does.

    Returns an ``int`` when serde_json keeps an integer (``U64`` / ``I64``: no fraction, no
    exponent, within ``i64::MIN ..= u64::MAX``, not ``-0``), otherwise the ``float`` serde_json
    computes. E.g. ``"1.0"`` → ``1.0``, ``"-0"`` → ``-0.0``, ``"18446744073709551616"`` →
    ``1.8446744073709552e19``, ``"909.4290778244613"`` → ``909.4290778244612``.

    Raises:
        NumberError: ``number out of range`` or ``invalid number`` (not a JSON number literal).
    """
    return _read(literal)


def parse_f64(literal: str) -> float:
    """Read a JSON number literal into an ``f64`` field as serde_json does: :func:`parse_number`,
    an integer then converted with Rust's ``as f64`` (round half to even, as Python's ``float``).

    Raises:
        NumberError: as :func:`parse_number`.
    """
    return float(_read(literal))


def is_float_integer(literal: str) -> bool:
    """True for an integer literal (no fraction, no exponent) that serde_json reads as an ``f64``:
    ``-0`` and integers outside ``i64::MIN ..= u64::MAX``."""
    return isinstance(_read(literal), float)
