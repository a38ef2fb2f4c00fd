"""Closed-set string enums and their strict parser — docs/wire-format.md#enums.

Every PascalCase enum on the wire is a :class:`ClosedSet`. Its ``parse`` matches the
canonical spelling exactly (no trimming, no case folding) and fails with
:class:`UnknownValueError`, whose text is ``unknown <label>: <input>``.
"""

from __future__ import annotations

import enum
import re
from typing import Self

__all__ = ["ClosedSet", "UnknownValueError", "label_of"]

# Labels that are not simply the class name split into lower-case words.
_LABEL_OVERRIDES: dict[str, str] = {
    "ProcessPhase": "process phase",
    "MustReachPhase": "must-reach phase",
    "AutoTerminateKind": "auto-terminate kind",
    "ProcessSignal": "signal",
}

_WORD = re.compile(r"[A-Z][a-z0-9]*")


class UnknownValueError(ValueError):
    """A string is not one of a closed set's canonical spellings.

    ``str(err)`` is ``unknown <label>: <value>``; ``value``
    holds the input unchanged (upper-cased for signals).
    """

    def __init__(self, label: str, value: str) -> None:
        super().__init__(f"unknown {label}: {value}")
        self.label = label
        self.value = value


def label_of(enum_class: type[enum.Enum]) -> str:
    """Return the human label of a closed set, e.g. ``convergence point type``.

    The class name split into lower-case words, except for a few overrides (``must-reach phase``…).
    """
    name = enum_class.__name__
    return _LABEL_OVERRIDES.get(name) or " ".join(w.lower() for w in _WORD.findall(name))


class ClosedSet(enum.StrEnum):
    """A string enum whose member values are the exact wire spellings.

    Declaration order is the reference's canonical (``ALL``) order. Members compare equal to their
    wire string.
    """

    @classmethod
    def parse(cls, text: str) -> Self:
        """Return the member spelled exactly ``text``.

        Raises :class:`UnknownValueError` (``unknown <label>: <text>``) otherwise.
        """
        for member in cls:
            if member.value == text:
                return member
        raise UnknownValueError(label_of(cls), text)

    @classmethod
    def all(cls) -> tuple[Self, ...]:
        """Every member in canonical (declaration) order."""
        return tuple(cls)

    @property
    def label(self) -> str:
        """The wire spelling."""
        return self.value
