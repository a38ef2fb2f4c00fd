"""Decoding API JSON into the models, and encoding them back as the reference does.

Decoding uses msgspec (fast; unknown keys ignored) with the reference's number semantics
(serde_json's, :mod:`shared.domain.json_number`; where and why: docs/wire-format.md#numbers).
:func:`to_wire` builds the plain data the reference would serialize — struct keys in declaration
order, emission rules of :mod:`shared.domain.api.wire`, map keys sorted, timestamps in UTC with
``Z`` — which is also the input of the hashes in :mod:`shared.domain.identity`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Generic, TypeVar

import msgspec

from shared.domain.api import leap_seconds
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process, ProcessSpec
from shared.domain.api.table import ProcessTable
from shared.domain.api.wire import encode, format_timestamp, to_wire
from shared.domain.json_number import NumberError, is_float_integer, parse_number

__all__ = [
    "MAX_NESTING",
    "DecodeError",
    "InvalidSpecError",
    "WireDecoder",
    "check_spec",
    "convert",
    "convert_leap_aware",
    "decode",
    "decode_allocation",
    "decode_pool",
    "decode_process",
    "decode_table",
    "encode",
    "format_timestamp",
    "to_wire",
    "wire_decoder",
]

T = TypeVar("T")


class DecodeError(ValueError):
    """The document does not fit the model. The text names the field, e.g.
    ``Invalid enum value 'running' - at `$.status.phase```."""


class InvalidSpecError(DecodeError):
    """A decoded spec has a tagged union with zero or several variants set.

    ``problems`` lists ``<field path>: <union error>`` texts.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# ── the reference's number semantics (docs/wire-format.md#numbers) ─────────────────

MAX_NESTING: Final = 127
"""Most nested arrays/objects a document may have, counted from its root: serde_json's recursion
limit (128) minus one (docs/wire-format.md#numbers)."""

_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_NEGATIVE_ZERO: Final = re.compile(rb"-0(?![.eE0-9])")
_DIGITS: Final = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
"""Maps every digit to ``0`` and every other byte to a space: a run of 19 digits shows as ``0 × 19``."""
_TOKENS: Final = re.compile(_STRING + rb"|-?(?:0|[1-9][0-9]*+)(\.[0-9]++)?([eE][+-]?[0-9]++)?")
_NESTING: Final = re.compile(_STRING + rb"|[\[\]{}]")


def _mark_float_integer(match: re.Match[bytes]) -> bytes:
    token = match.group(0)
    if token[0] == 0x22 or match.group(1) is not None or match.group(2) is not None:
        return token  # a string, or a literal with a fraction or exponent
    return token + b"e0" if is_float_integer(token.decode()) else token


def _float_literal(literal: str) -> float:
    """msgspec's ``float_hook``: every float literal in an untyped position (free JSON)."""
    return float(parse_number(literal))


_NOT_STRUCTURAL: Final = bytes(c for c in range(256) if c not in b'"[]{}')
_AS_PARENS: Final = bytes.maketrans(b"[{]}", b"(())")


def _too_deep_if_valid(data: bytes) -> bool:
    """Whether ``data`` nests more than :data:`MAX_NESTING` arrays/objects, exact when ``data`` is valid
    JSON (and only then: :meth:`WireDecoder.decode` runs the exact :func:`_check_nesting` whenever this
    says yes or the document turns out not to be valid JSON).

    Everything runs in C over the whole document, where :func:`_check_nesting` loops in Python over
    every string and bracket: escaped backslashes and quotes are removed (in valid JSON every ``\\``
    starts a two-byte escape, so a left-to-right ``replace`` pairs them as a parser does), every byte
    but brackets and quotes is deleted, the strings (now ``"…"`` with brackets only; most are ``""``) are
    cut out, and
    the remaining brackets are peeled a level per ``replace(b"()", b"")`` (each round removes exactly
    the innermost pairs; the depth left is at most the openers left).
    """
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # two adjacent quotes are a string with no bracket, or a string's end and the next one's start; either way
    # dropping them leaves every other byte on its side (inside or outside a string)
    skeleton = data.translate(_AS_PARENS, _NOT_STRUCTURAL).replace(b'""', b"")
    if b'"' in skeleton:
        skeleton = b"".join(skeleton.split(b'"')[::2])
    rounds = 0
    while skeleton.count(b"(") + rounds > MAX_NESTING:
        if rounds == MAX_NESTING:
            return True
        skeleton = skeleton.replace(b"()", b"")
        rounds += 1
    return False


def _check_nesting(data: bytes) -> None:
    """Raise if ``data`` nests more than :data:`MAX_NESTING` arrays/objects, for any bytes (a string
    is what :data:`_STRING` matches; an unterminated quote is skipped)."""
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return
    depth = 0
    for match in _NESTING.finditer(data):
        token = match.group(0)
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_NESTING:
                raise msgspec.ValidationError(f"nesting deeper than {MAX_NESTING} arrays/objects")
        elif token in (b"]", b"}"):
            depth -= 1


def _with_float_integers_marked(data: bytes) -> bytes:
    """``data`` with ``e0`` after each integer literal serde_json reads as an ``f64`` (``-0``,
    integers beyond i64/u64): serde_json reads ``<n>e0`` exactly as ``<n>``, and msgspec then
    hands it to the float hook (or, in an integer field, rejects it as the reference does)."""
    if not _may_hold_float_integers(data):
        return data
    return _TOKENS.sub(_mark_float_integer, data)


def _may_hold_float_integers(data: bytes) -> bool:
    """A cheap test for an integer literal serde_json reads as a float: a run of 19 digits (beyond
    i64/u64 needs at least that many), or ``-0`` after ``:``, ``[`` or ``,``. It may also fire inside
    a string, which the exact pass then leaves alone."""
    if b"0" * 19 in data.translate(_DIGITS):
        return True
    for match in _NEGATIVE_ZERO.finditer(data):
        i = match.start() - 1
        while i >= 0 and data[i] in b" \t\n\r":
            i -= 1
        if i < 0 or data[i] in b":[,":
            return True
    return False


class _F64Field:
    """A typed ``f64`` field below a model, re-read from the document with serde_json's parse
    (msgspec parses typed floats correctly rounded and calls no hook for them)."""

    def __init__(self, wire_path: tuple[str, ...], attr_path: tuple[str, ...]) -> None:
        self.wire_path = wire_path
        self.attr_path = attr_path
        shadow: Any = Any
        for key in reversed(wire_path):
            shadow = msgspec.defstruct(f"_{key}", [(key, shadow | None, None)], gc=False)
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(shadow, float_hook=_float_literal)

    def fix(self, value: Any, data: bytes) -> Any:
        """``value`` with this field as serde_json reads it from ``data`` (unchanged when unset)."""
        current = value
        for attr in self.attr_path:
            current = getattr(current, attr)
            if current is None:
                return value
        raw: Any = self.decoder.decode(data)
        for key in self.wire_path:
            raw = getattr(raw, key)
        return _replace_at(value, self.attr_path, float(raw))  # an integer: Rust's `as f64`


def _replace_at(value: Any, path: tuple[str, ...], new: Any) -> Any:
    if not path:
        return new
    return msgspec.structs.replace(value, **{path[0]: _replace_at(getattr(value, path[0]), path[1:], new)})


def _f64_fields(model: type[Any]) -> list[_F64Field]:
    """The typed ``f64`` fields of ``model``; ``healthyRateThreshold`` is the only one on the wire."""
    from shared.domain.api.classification import Classification, Horizon
    from shared.domain.api.ephemeral import EphemeralSpec

    threshold = (("healthyRateThreshold",), ("healthy_rate_threshold",))
    classification = (("horizon", *threshold[0]), ("horizon", *threshold[1]))
    spec = (("classification", *classification[0]), ("classification", *classification[1]))
    paths: dict[type[Any], tuple[tuple[str, ...], tuple[str, ...]]] = {
        Horizon: threshold,
        Classification: classification,
        ProcessSpec: spec,
        EphemeralSpec: spec,
        Process: (("spec", *spec[0]), ("spec", *spec[1])),
        EphemeralPool: (("spec", "template", *spec[0]), ("spec", "template", *spec[1])),
    }
    path = paths.get(model)
    return [] if path is None else [_F64Field(*path)]


class WireDecoder(Generic[T]):
    """A ``msgspec.json.Decoder`` for ``model`` that reads numbers as the reference does.

    Drop-in for ``msgspec.json.Decoder(model)`` (``decode(data)``, raising
    ``msgspec.ValidationError`` / ``msgspec.DecodeError``), with three differences, all from
    docs/wire-format.md#numbers: float literals in free JSON and typed ``f64`` fields are parsed as
    serde_json parses them; ``-0`` and integers beyond i64/u64 are floats (so an integer field
    rejects them); a document nesting more than :data:`MAX_NESTING` arrays/objects is rejected.
    """

    def __init__(self, model: type[T]) -> None:
        self.model = model
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(model, float_hook=_float_literal)
        self._f64 = _f64_fields(model)

    def decode(self, data: bytes | bytearray | memoryview | str) -> T:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if _too_deep_if_valid(raw):
            _check_nesting(raw)
            return self._decode(raw)
        try:
            return self._decode(raw)
        except Exception:
            # not valid JSON after all, where the quick check is not exact: the nesting error first, as before
            _check_nesting(raw)
            raise

    def _decode(self, raw: bytes) -> T:
        raw = _with_float_integers_marked(raw)
        try:
            value = self._decoder.decode(raw)
        except msgspec.ValidationError:
            rewritten = leap_seconds.rewrite_json(raw)
            if rewritten is raw or rewritten == raw:
                raise
            # a leap second msgspec refuses: read as second 59, then marked (docs/wire-format.md#timestamps)
            value = leap_seconds.restore(self._decoder.decode(rewritten), json.loads(raw))
            raw = rewritten
        for field in self._f64:
            value = field.fix(value, raw)
        return value


_decoders: dict[type[Any], WireDecoder[Any]] = {}


def wire_decoder(model: type[T]) -> WireDecoder[T]:
    """The shared :class:`WireDecoder` of ``model``."""
    decoder = _decoders.get(model)
    if decoder is None:
        decoder = _decoders[model] = WireDecoder(model)
    return decoder


def decode(data: bytes | str, model: type[T]) -> T:
    """Decode JSON ``data`` into ``model`` with the reference's number semantics
    (:class:`WireDecoder`). Raises :class:`DecodeError`."""
    try:
        return wire_decoder(model).decode(data)
    except (msgspec.DecodeError, NumberError) as err:
        raise DecodeError(str(err)) from None


def convert(data: Any, model: type[T]) -> T:
    """Convert already-parsed data (e.g. from YAML) into ``model``; a leap-second timestamp reads as the
    reference reads it (docs/wire-format.md#timestamps). Raises :class:`DecodeError`."""
    try:
        return convert_leap_aware(data, model)
    except msgspec.ValidationError as err:
        raise DecodeError(str(err)) from None


def convert_leap_aware(data: Any, model: type[T]) -> T:
    """``msgspec.convert(data, model)``, except that a leap-second string (``…:60Z``) in a timestamp field is
    accepted as the reference accepts it (:mod:`shared.domain.api.leap_seconds`).

    Raises:
        msgspec.ValidationError: as ``msgspec.convert`` does.
    """
    try:
        return msgspec.convert(data, model)
    except msgspec.ValidationError:
        rewritten = leap_seconds.rewrite_data(data)
        if rewritten == data:
            raise
        value: T = leap_seconds.restore(msgspec.convert(rewritten, model), data)
        return value


def decode_process(data: bytes | str, *, validate: bool = False) -> Process:
    """Decode a Process from API JSON.

    With ``validate=True`` also raise :class:`InvalidSpecError` when a tagged union in
    the spec does not resolve (the reference checks this only at use; docs/wire-format.md#tagged-unions).
    """
    process = decode(data, Process)
    if validate:
        check_spec(process.spec)
    return process


def check_spec(spec: ProcessSpec) -> None:
    """Raise :class:`InvalidSpecError` listing every unresolvable union in ``spec``."""
    problems = spec.problems()
    if problems:
        raise InvalidSpecError(problems)


def decode_table(data: bytes | str) -> ProcessTable:
    """Decode a ProcessTable from API JSON. Raises :class:`DecodeError`."""
    return decode(data, ProcessTable)


def decode_pool(data: bytes | str) -> EphemeralPool:
    """Decode an EphemeralPool from API JSON. Raises :class:`DecodeError`."""
    return decode(data, EphemeralPool)


def decode_allocation(data: bytes | str) -> EphemeralAllocation:
    """Decode an EphemeralAllocation from API JSON. Raises :class:`DecodeError`."""
    return decode(data, EphemeralAllocation)
