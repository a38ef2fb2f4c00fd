"""Canonical JSON bytes as serde_json writes them — docs/wire-format.md#canonical-json."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.canonical_json import canonical_json, format_float


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.95, "0.95"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.00001, "0.00001"),
        (1.5e-5, "0.000015"),
        (0.0001, "0.0001"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (-2.5, "-2.5"),
        (float("nan"), "null"),
    ],
    ids=[
        "an integral float keeps a point zero",
        "a fraction is the shortest round trip",
        "a large exponent has a plus sign",
        "a small exponent has no zero padding",
        "ten to the minus five is still fixed notation",
        "values just above ten to the minus five are fixed",
        "ten to the minus four is fixed",
        "ten to the fifteen is fixed",
        "ten to the sixteen is scientific",
        "negative numbers keep their sign",
        "nan is written as null like serde",
    ],
)
def test_float_formatting(value: float, text: str) -> None:
    assert format_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("é/\x7f", '"é/\x7f"'),
        ('"\\', '"\\"\\\\"'),
        ("\n\r\t\b\f", '"\\n\\r\\t\\b\\f"'),
        ("\x00\x1f", '"\\u0000\\u001f"'),
    ],
    ids=[
        "non-ascii slash and delete are raw",
        "quote and backslash are escaped",
        "short escapes are used where they exist",
        "other control characters use lower-case unicode escapes",
    ],
)
def test_string_escaping(value: str, text: str) -> None:
    assert canonical_json(value).decode() == text


def test_key_order_is_kept_or_sorted_on_request() -> None:
    value: dict[str, Any] = {"b": 1, "a": [True, None, {"d": 1, "c": 2}]}
    assert canonical_json(value) == b'{"b":1,"a":[true,null,{"d":1,"c":2}]}'
    assert canonical_json(value, sort_keys=True) == b'{"a":[true,null,{"c":2,"d":1}],"b":1}'
