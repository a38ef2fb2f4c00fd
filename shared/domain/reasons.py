"""The base of the reconcilers' closed sets of condition and Event reasons (docs/behaviour.md#reasons).

A reason is on the wire twice: as ``status.conditions[].reason`` and as an Event's ``reason``. Each
reconciler names every reason it writes in one :class:`ReasonSet` (``reconciler.reasons.Reason``,
``pool_reconciler.reasons.PoolReason``): a ``StrEnum`` whose value is the exact wire spelling, which
also says where the reason is written (:class:`On`) and what it means. The reason tables of
docs/behaviour.md are generated from those sets (``python -m tools.gen_reasons``).
"""

from __future__ import annotations

import enum
from typing import Self

__all__ = ["On", "ReasonSet"]


class On(enum.Flag):
    """Where a reason is written: a condition, a Normal Event, a Warning Event (any combination)."""

    CONDITION = enum.auto()
    NORMAL = enum.auto()
    WARNING = enum.auto()

    @property
    def label(self) -> str:
        """``condition``, ``Normal Event``, ``condition, Warning Event``… in that order."""
        names = {On.CONDITION: "condition", On.NORMAL: "Normal Event", On.WARNING: "Warning Event"}
        return ", ".join(text for flag, text in names.items() if flag in self)


class ReasonSet(enum.StrEnum):
    """A closed set of reasons. A member is declared ``NAME = "WireSpelling", On.X, "meaning"``; it
    compares equal to (and serialises as) its wire spelling."""

    on: On
    description: str

    def __new__(cls, value: str, on: On, description: str) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.on = on
        member.description = description
        return member

    @classmethod
    def named(cls, value: str) -> Self:
        """The member spelled ``value``; :class:`ValueError` when the set has none (a reason built
        from a phase or a signal name is still one of the set)."""
        member = cls._value2member_map_.get(value)
        if not isinstance(member, cls):
            raise ValueError(f"{value!r} is not a {cls.__name__}")
        return member
