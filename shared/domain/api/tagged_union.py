"""The "exactly one optional slot" union convention — docs/wire-format.md#tagged-unions.

A tagged union is an object with one optional key per variant; the key is the tag
and its value the payload. Decoding accepts any number of populated slots; the
check happens when a consumer resolves the variant.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from shared.domain.api.wire import WireStruct

__all__ = ["AmbiguousVariantError", "EmptyVariantError", "TaggedUnion", "VariantError"]


class VariantError(ValueError):
    """A tagged union does not resolve to a single variant."""


class EmptyVariantError(VariantError):
    """No slot is set: ``<noun> has no variant set (one of <a/b/c> required)``."""


class AmbiguousVariantError(VariantError):
    """Two or more slots are set: ``<noun> has multiple variants set; exactly one required``
    (``at most one`` for Lifetime)."""


class TaggedUnion(WireStruct):
    """Base of the union types. Every field is an optional slot defaulting to ``None``.

    Subclasses set ``_noun`` (used in error texts, e.g. ``intent``).
    """

    _noun: ClassVar[str] = "union"

    @classmethod
    def slot_keys(cls) -> tuple[str, ...]:
        """The wire keys of the slots in declaration order, e.g. ``("nix", "flux", ...)``."""
        return tuple(f.encode_name for f in msgspec.structs.fields(cls))

    def populated(self) -> list[tuple[str, Any]]:
        """``(wire key, payload)`` of every set slot, in declaration order."""
        return [
            (f.encode_name, getattr(self, f.name))
            for f in msgspec.structs.fields(self)
            if getattr(self, f.name) is not None
        ]

    def _resolve(self) -> tuple[str, Any]:
        """Return the single ``(wire key, payload)``.

        Raises :class:`EmptyVariantError` or :class:`AmbiguousVariantError` with the
        reference's exact texts.
        """
        found: tuple[str, Any] | None = None
        for f in msgspec.structs.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if found is not None:
                raise AmbiguousVariantError(f"{self._noun} has multiple variants set; exactly one required")
            found = (f.encode_name, value)
        if found is None:
            kinds = "/".join(self.slot_keys())
            raise EmptyVariantError(f"{self._noun} has no variant set (one of {kinds} required)")
        return found

    def check(self) -> str | None:
        """Return the resolution error text, or ``None`` when exactly one slot is set."""
        try:
            self._resolve()
        except VariantError as err:
            return str(err)
        return None
