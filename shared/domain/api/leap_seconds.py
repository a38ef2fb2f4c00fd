"""RFC 3339 leap seconds (``…T23:59:60Z``), read and written as the reference does (pure).

— docs/wire-format.md#timestamps. The reference (chrono) reads second ``60`` as second 59 plus a second's
worth of extra nanoseconds, keeps it through a change of offset, and writes it back as ``:60`` with the
fraction after it. A Python datetime cannot hold second 60, and msgspec, the decoder, refuses it; so:

- a leap second is held as second 59 with the same fraction, in UTC, with ``fold=1`` — the second time the
  clock reads 59 (PEP 495's meaning of ``fold``). Comparisons and hashing ignore ``fold`` (as an instant it is
  second 59 plus the fraction), and arithmetic drops it, as chrono's does;
- decoding tries the document as it is first; only when that fails and a string is a leap-second timestamp
  is it decoded again with those strings read as second 59, and :func:`restore` marks the timestamps that
  came from them (and puts back any other string the rewrite touched, e.g. in free-form JSON);
- :func:`is_leap_second` tells :func:`shared.domain.api.codec.format_timestamp` to write ``60``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

__all__ = ["LEAP_SECOND", "is_leap_second", "restore", "rewrite_data", "rewrite_json", "second_59"]

LEAP_SECOND: Final = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}):60"
                                r"((?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2}))")
"""A whole RFC 3339 timestamp whose second is 60 (``fullmatch``); group 1 is up to the minute, group 2 the
fraction and offset."""

_JSON_STRING: Final = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


def second_59(text: str) -> str | None:
    """``text`` with its second 60 written 59, when it is a leap-second timestamp; else None."""
    match = LEAP_SECOND.fullmatch(text)
    return None if match is None else f"{match.group(1)}:59{match.group(2)}"


def is_leap_second(value: datetime) -> bool:
    """Whether ``value`` is a leap second as :func:`restore` marks one: UTC, second 59, ``fold=1``."""
    return value.fold == 1 and value.second == 59 and value.tzinfo is UTC


def _leap(value: datetime) -> datetime:
    utc = value.astimezone(UTC)
    return utc.replace(fold=1) if utc.second == 59 else utc  # rounded past the minute: no longer second 59


def _rewrite_token(match: re.Match[bytes]) -> bytes:
    token = match.group(0)
    if b":60" not in token:
        return token
    fixed = second_59(token[1:-1].decode("utf-8", "replace"))
    return token if fixed is None else b'"' + fixed.encode() + b'"'


def rewrite_json(data: bytes) -> bytes:
    """``data`` (a JSON document) with every string that is a leap-second timestamp read as second 59."""
    if b":60" not in data:
        return data
    return _JSON_STRING.sub(_rewrite_token, data)


def rewrite_data(data: Any) -> Any:
    """As :func:`rewrite_json` for already-parsed data (dicts, lists, strings)."""
    if isinstance(data, str):
        return second_59(data) or data
    if isinstance(data, dict):
        return {k: rewrite_data(v) for k, v in data.items()}
    if isinstance(data, list):
        return [rewrite_data(v) for v in data]
    return data


def restore(value: Any, raw: Any) -> Any:
    """``value``, decoded from the rewritten document, with what the rewrite changed put back from ``raw`` (the
    document as parsed data before it): a datetime read from a leap-second string becomes a leap second, any
    other string the rewrite touched is the original text again. Structs are walked by their wire names."""
    if isinstance(value, datetime):
        return _leap(value) if isinstance(raw, str) and LEAP_SECOND.fullmatch(raw) else value
    if isinstance(value, str):
        return raw if isinstance(raw, str) and raw != value and second_59(raw) == value else value
    if isinstance(value, msgspec.Struct):
        if not isinstance(raw, dict):
            return value
        changes = {}
        for f in msgspec.structs.fields(value):
            if f.encode_name in raw:
                old = getattr(value, f.name)
                new = restore(old, raw[f.encode_name])
                if new is not old:
                    changes[f.name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, dict) and isinstance(raw, dict):
        out = {k: restore(v, raw.get(k)) for k, v in value.items()}
        return out if any(out[k] is not value[k] for k in value) else value
    if isinstance(value, list | tuple) and isinstance(raw, list) and len(raw) == len(value):
        items = [restore(v, r) for v, r in zip(value, raw, strict=True)]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value
