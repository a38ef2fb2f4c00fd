"""serde_json's reading of number literals (docs/wire-format.md#numbers); the 1,666 literals of the
reference's own vectors are in test_rust_vectors.py, these are the cases the rules name."""

from __future__ import annotations

import math

import pytest

from shared.domain.canonical_json import format_float
from shared.domain.json_number import NumberError, is_float_integer, parse_f64, parse_number


@pytest.mark.parametrize(("literal", "text"), [
    # the examples of the rules: not correctly rounded
    ("2e-24", "2.0000000000000002e-24"),
    ("909.4290778244613", "909.4290778244612"),
    ("9007199254740993.0", "9007199254740994.0"),
    # integers serde_json keeps as floats
    ("-0", "-0.0"),
    ("18446744073709551616", "1.8446744073709552e+19"),
    ("-9223372036854775809", "-9.223372036854776e+18"),
    ("123456789012345678901234567890", "1.2345678901234568e+29"),
    # integers it keeps
    ("18446744073709551615", "18446744073709551615"),
    ("-9223372036854775808", "-9223372036854775808"),
    ("9007199254740993", "9007199254740993"),
    ("0", "0"),
    # short decimals are exact
    ("0.1", "0.1"),
    ("1.5", "1.5"),
    ("1e2", "100.0"),
    ("1E+21", "1e+21"),
    ("-0.0", "-0.0"),
    # below 1e-308 it divides twice; past the exponent range zero, or an error upwards
    ("1e-400", "0.0"),
    ("-1e-400", "-0.0"),
    ("5e-324", "5e-324"),
    ("0e400", "0.0"),
    ("1e-99999999999", "0.0"),
    ("0e99999999999", "0.0"),
    # digits beyond u64: integer digits scale, fraction digits are dropped
    ("1844674407370955161.6", "1.8446744073709553e+18"),
    ("0.12345678901234567890123", "0.12345678901234568"),
])
def test_parse_number(literal: str, text: str) -> None:
    value = parse_number(literal)
    assert (format_float(value) if isinstance(value, float) else str(value)) == text


@pytest.mark.parametrize("literal", ["1e400", "1.7976931348623158e308", "1e99999999999", "-1e309"])
def test_out_of_range(literal: str) -> None:
    with pytest.raises(NumberError, match="number out of range"):
        parse_number(literal)


@pytest.mark.parametrize("literal", ["01", "1.", ".5", "+1", "1e", "NaN", "", "1 "])
def test_not_a_literal(literal: str) -> None:
    with pytest.raises(NumberError, match="invalid number"):
        parse_number(literal)


def test_an_f64_field_takes_integers_as_rust_casts_them() -> None:
    assert parse_f64("9007199254740993") == 9007199254740992.0  # `as f64`: half to even
    assert math.copysign(1.0, parse_f64("-0")) == -1.0
    assert parse_f64("7") == 7.0


@pytest.mark.parametrize(("literal", "expected"), [
    ("-0", True), ("18446744073709551616", True), ("-9223372036854775809", True),
    ("0", False), ("-1", False), ("18446744073709551615", False), ("-9223372036854775808", False),
])
def test_is_float_integer(literal: str, expected: bool) -> None:
    assert is_float_integer(literal) is expected
