"""Wire conventions shared by every model: the Struct base and scalar types.

— docs/wire-format.md#field-names and docs/wire-format.md#emission-rules.

Field emission rules (which keys the reference writes on output, and so which keys
enter the content hash) are declared on each Struct:

* a field whose default is ``None`` is left out when ``None`` ("omit-if-none"),
  unless it is named in ``_write_null`` (free JSON written as ``null``);
* a field named in ``_omit_when_default`` is left out when it equals its default
  (``profile: ""``, ``exports: []``, an empty ``lifetime``...);
* every other field is always written.

:func:`to_wire` (below; re-exported by :mod:`shared.domain.api.codec`) applies these rules. A plain
``msgspec.json.encode`` of a model omits every default instead (``omit_defaults=True``): a compact, valid
document that never sends ``null`` for an unset optional field.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Final, dataclass_transform

import msgspec
from msgspec import Meta

from shared.domain.api import leap_seconds

__all__ = [
    "Double",
    "FreeObject",
    "Int32",
    "MergePatch",
    "Timestamp",
    "UInt16",
    "UInt32",
    "UInt64",
    "WireStruct",
    "encode",
    "format_timestamp",
    "to_wire",
]

UInt16 = Annotated[int, Meta(ge=0, le=0xFFFF, extra_json_schema={"format": "uint16"})]
"""Rust ``u16``: an integer 0..65535 (docs/wire-format.md#scalars)."""

UInt32 = Annotated[int, Meta(ge=0, le=0xFFFF_FFFF, extra_json_schema={"format": "uint32"})]
"""Rust ``u32``: an integer 0..4294967295."""

UInt64 = Annotated[int, Meta(ge=0, extra_json_schema={"format": "uint64"})]
"""Rust ``u64``: an integer ≥ 0."""

Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1, extra_json_schema={"format": "int32"})]
"""Rust ``i32``."""

Double = Annotated[float, Meta(extra_json_schema={"format": "double"})]
"""Rust ``f64``."""

Timestamp = datetime
"""An RFC 3339 instant; written in UTC with a ``Z`` suffix (docs/wire-format.md#timestamps)."""

FreeObject = Annotated[
    dict[str, Any],
    Meta(extra_json_schema={"x-kubernetes-preserve-unknown-fields": True}),
]
"""Free-form JSON object (``params``, ``valuesOverlay``, ``guest.spec``; docs/wire-format.md#free-form-json).

Keys are written sorted."""


class _KeywordOnlyStructMeta(msgspec.StructMeta):
    """Makes every subclass keyword-only, so fields can keep the reference's declaration order
    (required fields may follow defaulted ones)."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **config: Any
    ) -> _KeywordOnlyStructMeta:
        config.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **config)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(msgspec.field,))
class WireStruct(
    msgspec.Struct,
    metaclass=_KeywordOnlyStructMeta,
    frozen=True,
    rename="camel",
    omit_defaults=True,
    gc=False,
):
    """Base of every wire type: frozen, keyword-only, camelCase keys.

    ``gc=False``: instances are trees of values, never part of a reference cycle, so
    the garbage collector need not track them (smaller and faster to decode).

    Unknown keys are ignored on decode. Use
    ``msgspec.structs.replace`` to derive a changed copy.
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset()
    _write_null: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> Any:
        """This value as the reference serializes it (:func:`shared.domain.api.codec.to_wire`); how the
        runtime's write helpers encode a model (``shared.kube.meta.JSONEncodable``)."""
        return to_wire(self)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(msgspec.field,))
class MergePatch(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Base of a typed JSON merge patch (RFC 7386), e.g. of a ``/status``: declare each field as
    ``T | None | msgspec.UnsetType = msgspec.UNSET``.

    A field left ``UNSET`` is not sent; ``None`` is sent as ``null`` (the key is deleted); any other
    value is sent as :func:`shared.domain.api.codec.to_wire` writes it (models with their emission
    rules, timestamps in UTC). The runtime's write helpers encode it through :meth:`to_json`.
    """

    def to_json(self) -> Any:
        """The patch as JSON data: set fields only, in declaration order."""
        return to_wire(self)


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
    (docs/wire-format.md#timestamps). A naive datetime is taken as UTC; a leap second
    (:func:`shared.domain.api.leap_seconds.is_leap_second`) is written with second ``60``."""
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if leap_seconds.is_leap_second(value):
        text = text[:-2] + "60"  # written as chrono writes a leap second: second 60, then the fraction
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
