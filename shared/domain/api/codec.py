"""Decoding API JSON into the models, and encoding them back as the reference does.

Decoding uses msgspec (fast; unknown keys ignored). :func:`to_wire` builds the plain
data the reference would serialize — struct keys in declaration order, emission rules
of :mod:`shared.domain.api.wire`, map keys sorted, timestamps in UTC with ``Z`` — which is
also the input of the hashes in :mod:`shared.domain.identity`.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import msgspec

from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process, ProcessSpec
from shared.domain.api.table import ProcessTable
from shared.domain.api.wire import WireStruct

__all__ = [
    "DecodeError",
    "InvalidSpecError",
    "check_spec",
    "convert",
    "decode",
    "decode_allocation",
    "decode_pool",
    "decode_process",
    "decode_table",
    "encode",
    "format_timestamp",
    "to_wire",
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


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decode(data: bytes | str, model: type[T]) -> T:
    """Decode JSON ``data`` into ``model``. Raises :class:`DecodeError`."""
    decoder = _decoders.get(model)
    if decoder is None:
        decoder = _decoders[model] = msgspec.json.Decoder(model)
    try:
        result: T = decoder.decode(data)
    except msgspec.DecodeError as err:
        raise DecodeError(str(err)) from None
    return result


def convert(data: Any, model: type[T]) -> T:
    """Convert already-parsed data (e.g. from YAML) into ``model``. Raises :class:`DecodeError`."""
    try:
        return msgspec.convert(data, model)
    except msgspec.ValidationError as err:
        raise DecodeError(str(err)) from None


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


# ── encoding ──────────────────────────────────────────────────────────────────

_ALWAYS: Final = 0
_OMIT_NONE: Final = 1
_OMIT_DEFAULT: Final = 2

_Plan = tuple[tuple[str, str, int, Any], ...]
_plans: dict[type[Any], _Plan] = {}


def _plan(cls: type[msgspec.Struct]) -> _Plan:
    """(attribute, wire key, rule, default) per field, in declaration order.

    A Struct that is not a :class:`WireStruct` (e.g. :class:`shared.kube.meta.ObjectMeta`) leaves out
    every field equal to its default, as ``omit_defaults`` does."""
    plan = _plans.get(cls)
    if plan is None:
        rows = []
        wire = issubclass(cls, WireStruct)
        for f in msgspec.structs.fields(cls):
            default = f.default if f.default_factory is msgspec.NODEFAULT else f.default_factory()
            if not wire:
                rule = _ALWAYS if default is msgspec.NODEFAULT else _OMIT_DEFAULT
            elif f.name in cls._omit_when_default:  # type: ignore[attr-defined]
                rule = _OMIT_DEFAULT
            elif f.default is None and f.name not in cls._write_null:  # type: ignore[attr-defined]
                rule = _OMIT_NONE
            else:
                rule = _ALWAYS
            rows.append((f.name, f.encode_name, rule, default))
        plan = _plans[cls] = tuple(rows)
    return plan


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z``; the fraction has 0, 3 or 6 digits, the shortest exact
    (docs/wire-format.md#timestamps). A naive datetime is taken as UTC."""
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    micros = utc.microsecond
    if micros == 0:
        return text + "Z"
    if micros % 1000 == 0:
        return f"{text}.{micros // 1000:03d}Z"
    return f"{text}.{micros:06d}Z"


def to_wire(value: Any) -> Any:
    """Plain JSON-ready data for ``value`` as the reference serializes it.

    Structs become dicts in declaration order following the emission rules; dicts
    (maps and free JSON) get their keys sorted recursively; enums become their
    spelling; datetimes become :func:`format_timestamp` text.
    """
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        for attr, key, rule, default in _plan(type(value)):
            item = getattr(value, attr)
            if (rule == _OMIT_NONE and item is None) or (rule == _OMIT_DEFAULT and item == default):
                continue
            out[key] = to_wire(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: to_wire(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def encode(value: Any) -> bytes:
    """Compact JSON bytes of :func:`to_wire` ``(value)``: what the reference would write."""
    return msgspec.json.encode(to_wire(value))
