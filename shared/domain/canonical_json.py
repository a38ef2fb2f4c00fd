"""Compact JSON bytes exactly as the reference's serde_json writes them.

— docs/wire-format.md#canonical-json. These bytes are
hashed (content hash, ephemeral id, intent hash), so every byte matters:

* separators ``,`` and ``:``, no whitespace;
* object keys in the given (declaration) order, or sorted by code point;
* strings: raw UTF-8; ``"``, ``\\`` and U+0000–U+001F escaped (``\\n`` etc. where
  they exist, else ``\\u00xx`` lower-case); ``/`` and U+007F not escaped;
* integers as plain decimals; floats as serde_json 1.0.150 writes them
  (:func:`format_float`); ``true``/``false``/``null``.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["canonical_json", "format_float", "pretty_json"]

_encode_string = json.JSONEncoder(ensure_ascii=False).encode


def format_float(value: float) -> str:
    """Shortest round-trip text of ``value`` in serde_json's style (docs/wire-format.md#canonical-json).

    Fixed notation for decimal exponents −5..15, always with a fraction (``1.0``);
    otherwise ``<mantissa>e+N`` / ``<mantissa>e-N`` without zero padding (``1e+21``,
    ``1e-7``). Non-finite values become ``null`` as in serde_json.
    """
    if not math.isfinite(value):
        return "null"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digit_tuple, exp = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exp  # the value is 0.<digits> × 10^point
    sci_exp = point - 1
    prefix = "-" if sign else ""
    if -5 <= sci_exp <= 15:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{prefix}{digits}{'0' * (point - len(digits))}.0"
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{prefix}{mantissa}e{'+' if sci_exp > 0 else '-'}{abs(sci_exp)}"


def _write(value: Any, sort_keys: bool, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_encode_string(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, dict):
        out.append("{")
        keys = sorted(value) if sort_keys else list(value)
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(_encode_string(key))
            out.append(":")
            _write(value[key], sort_keys, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, sort_keys, out)
        out.append("]")
    else:
        raise TypeError(f"not JSON data: {type(value).__name__}")


def canonical_json(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON of plain data (dict/list/str/int/float/bool/None).

    ``sort_keys=False`` keeps dict insertion order (the content hash's declaration
    order); ``sort_keys=True`` sorts every object's keys (the ephemeral id).
    Raises ``TypeError`` for anything else.
    """
    out: list[str] = []
    _write(value, sort_keys, out)
    return "".join(out).encode("utf-8")


def _write_pretty(value: Any, level: int, out: list[str]) -> None:
    if isinstance(value, dict) and value:
        out.append("{")
        for i, key in enumerate(value):
            out.append(",\n" if i else "\n")
            out.append("  " * (level + 1))
            out.append(_encode_string(key))
            out.append(": ")
            _write_pretty(value[key], level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, list | tuple) and value:
        out.append("[")
        for i, item in enumerate(value):
            out.append(",\n" if i else "\n")
            out.append("  " * (level + 1))
            _write_pretty(item, level + 1, out)
        out.append("\n" + "  " * level + "]")
    else:
        _write(value, False, out)


def pretty_json(value: Any) -> bytes:
    """Indented UTF-8 JSON as serde_json's ``to_string_pretty`` writes it: two spaces per level, ``": "``
    after keys, empty objects and arrays as ``{}`` / ``[]``, keys in the given order, scalars as
    :func:`canonical_json` writes them. Raises ``TypeError`` for anything but plain data."""
    out: list[str] = []
    _write_pretty(value, 0, out)
    return "".join(out).encode("utf-8")
