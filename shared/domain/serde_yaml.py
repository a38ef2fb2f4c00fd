"""YAML text exactly as the reference's serde_yaml 0.9 writes it (docs/wire-format.md#receipt-yaml).

The export worker's receipt is stored as YAML (docs/wire-format.md#export-receipts); its bytes are what a
reader hashes or diffs, so they follow serde_yaml, which drives libyaml's emitter (unicode on, no line
width) with these scalar choices:

* a string holding a line break is a literal block (``|``, ``|-`` or ``|+``);
* a string that would read back as something else — empty, ``~``/``null``/``Null``/``NULL``,
  ``true``/``True``/``TRUE``/``false``/``False``/``FALSE``, an integer (decimal, ``0x``/``0o``/``0b``,
  u128/i128 range), a finite float in Rust's grammar, or digits with a leading zero (``0123``) — is
  single-quoted;
* any other string is plain when libyaml's analysis allows it (no leading/trailing space, no ``: ``, no
  leading indicator …), else single-quoted, else double-quoted;
* integers in decimal, ``true``/``false``, ``null``; floats as ryu writes them (``1.0``, ``1e21``,
  ``1e-7``), ``.inf``/``-.inf``/``.nan``;
* mappings in block style, keys in the given order, two-space indent; sequences in block style at the
  mapping's indent (``- item``); empty ones as ``{}`` / ``[]``; no ``---``; a final newline.

Single-key maps whose key starts with ``!`` (serde_yaml's tag convention) are written as plain maps here.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import yaml

from shared.domain.canonical_json import format_float

__all__ = ["to_yaml"]

_NULLS: Final = frozenset({"~", "null", "Null", "NULL"})
_BOOLS: Final = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})
_RADIX: Final = (("0x", 16, "0123456789abcdefABCDEF"), ("0o", 8, "01234567"), ("0b", 2, "01"))
_U128_MAX: Final = 2**128 - 1
_I128_MIN: Final = -(2**127)
_RUST_FLOAT: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""Rust's ``f64::from_str`` grammar without its ``inf``/``nan`` words (those are never finite)."""

_EMITTER_WIDTH: Final = 2**30
"""libyaml's "no limit" (serde_yaml sets the width to -1); the pure-Python emitter needs a number."""


def _digits_but_not_number(text: str) -> bool:
    body = text[1:] if text[:1] in ("-", "+") else text
    return len(body) > 1 and body[0] == "0" and body[1:].isascii() and body[1:].isdigit()


def _radix_int(digits: str, radix: int, alphabet: str) -> int | None:
    if not digits or digits[0] in "+-" or any(c not in alphabet for c in digits):
        return None
    return int(digits, radix)


def _is_int(text: str) -> bool:
    """serde_yaml's ``visit_int``: u64, i64, u128 or i128 in decimal or with a radix prefix."""
    unsigned = text[1:] if text.startswith("+") else text
    if text.startswith("+") and unsigned[:1] in ("+", "-"):
        return False
    for prefix, radix, alphabet in _RADIX:
        if unsigned.startswith(prefix):
            value = _radix_int(unsigned[len(prefix):], radix, alphabet)
            if value is not None and value <= _U128_MAX:
                return True
        if text.startswith("-" + prefix):
            value = _radix_int(text[len(prefix) + 1:], radix, alphabet)
            if value is not None and -value >= _I128_MIN:
                return True
    if _digits_but_not_number(text):
        return False
    body = text[1:] if text[:1] in ("-", "+") else text
    if not body or not body.isascii() or not body.isdigit():
        return False
    value = int(text)
    return _I128_MIN <= value <= _U128_MAX


def _is_finite_float(text: str) -> bool:
    unsigned = text[1:] if text.startswith("+") else text
    if text.startswith("+") and unsigned[:1] in ("+", "-"):
        return False
    if unsigned in (".inf", ".Inf", ".INF") or text in ("-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"):
        return True
    return _RUST_FLOAT.fullmatch(unsigned) is not None and math.isfinite(float(unsigned))


def _string_style(text: str) -> str | None:
    """PyYAML's style letter for a string: ``|`` literal, ``'`` single-quoted, None = let the emitter choose."""
    if "\n" in text:
        return "|"
    if (not text or text in _NULLS or text in _BOOLS or _is_int(text) or _digits_but_not_number(text)
            or _is_finite_float(text)):
        return "'"
    return None


def _ryu(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return format_float(value).replace("e+", "e")


def _events(value: Any, out: list[yaml.Event]) -> None:
    if isinstance(value, dict):
        out.append(yaml.MappingStartEvent(anchor=None, tag=None, implicit=True, flow_style=False))
        for key, item in value.items():
            _events(str(key), out)
            _events(item, out)
        out.append(yaml.MappingEndEvent())
    elif isinstance(value, list | tuple):
        out.append(yaml.SequenceStartEvent(anchor=None, tag=None, implicit=True, flow_style=False))
        for item in value:
            _events(item, out)
        out.append(yaml.SequenceEndEvent())
    else:
        if value is None:
            text, style = "null", None
        elif value is True or value is False:
            text, style = ("true" if value else "false"), None
        elif isinstance(value, int):
            text, style = str(value), None
        elif isinstance(value, float):
            text, style = _ryu(value), None
        elif isinstance(value, str):
            text, style = value, _string_style(value)
        else:
            raise TypeError(f"not YAML data: {type(value).__name__}")
        out.append(yaml.ScalarEvent(anchor=None, tag=None, implicit=(True, True), value=text, style=style))


def to_yaml(value: Any) -> str:
    """``value`` (plain data: dict in key order, list, str, int, float, bool, None) as serde_yaml writes it.

    Raises ``TypeError`` for anything else.
    """
    events: list[yaml.Event] = [yaml.StreamStartEvent(), yaml.DocumentStartEvent(explicit=False)]
    _events(value, events)
    events += [yaml.DocumentEndEvent(explicit=False), yaml.StreamEndEvent()]
    dumper = getattr(yaml, "CDumper", None)  # libyaml itself, as serde_yaml uses, when PyYAML was built with it
    if dumper is not None:
        text: str = yaml.emit(events, Dumper=dumper, allow_unicode=True, width=-1)
    else:
        text = yaml.emit(events, allow_unicode=True, width=_EMITTER_WIDTH)
    return text
