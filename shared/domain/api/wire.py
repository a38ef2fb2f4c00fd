"""Wire conventions shared by every model: the Struct base and scalar types.

— docs/wire-format.md#field-names and docs/wire-format.md#emission-rules.

Field emission rules (which keys the reference writes on output, and so which keys
enter the content hash) are declared on each Struct:

* a field whose default is ``None`` is left out when ``None`` ("omit-if-none"),
  unless it is named in ``_write_null`` (free JSON written as ``null``);
* a field named in ``_omit_when_default`` is left out when it equals its default
  (``profile: ""``, ``exports: []``, an empty ``lifetime``...);
* every other field is always written.

:func:`shared.domain.api.codec.to_wire` applies these rules. A plain ``msgspec.json.encode``
of a model omits every default instead (``omit_defaults=True``): a compact, valid
document that never sends ``null`` for an unset optional field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, dataclass_transform

import msgspec
from msgspec import Meta

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
        from shared.domain.api.codec import to_wire  # codec imports this module

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
        from shared.domain.api.codec import to_wire  # codec imports this module

        return to_wire(self)
