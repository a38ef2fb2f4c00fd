"""The kstatus condition convention shared by every kind we own: ``Ready``, ``Reconciling``, ``Stalled``.

kstatus (sigs.k8s.io/cli-utils ``pkg/kstatus/status``) reads an object as *InProgress* when
``status.observedGeneration`` differs from ``metadata.generation`` or ``Reconciling`` is True, *Failed*
when ``Stalled`` is True, *Current* when ``Ready`` is True; ``kubectl wait --for=condition=Ready``
waits for ``Ready=True`` whose ``observedGeneration`` is the object's generation. Writing the three
together, each with ``observedGeneration``, and the top-level ``status.observedGeneration`` makes the
two tools agree (docs/behaviour.md#conditions).

:func:`kstatus_conditions` is the one builder: a :class:`Truth` (which of the three is True) in, the
three conditions out in type order, ``lastTransitionTime`` kept from the stored condition of the same
type while its status holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol, TypeVar

__all__ = ["CONDITION_TYPES", "Truth", "kstatus_conditions", "truth_of"]

CONDITION_TYPES = ("Ready", "Reconciling", "Stalled")
"""The kstatus condition types, in the order they are written."""


class Truth(NamedTuple):
    """Which kstatus condition is True; at most one should be."""

    ready: bool = False
    reconciling: bool = False
    stalled: bool = False


class _Condition(Protocol):
    @property
    def type_(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def last_transition_time(self) -> datetime: ...


C = TypeVar("C", bound=_Condition)

Make = Callable[[str, str, datetime], C]
"""``make(type, status, lastTransitionTime) -> condition`` of the kind's own condition struct."""


def kstatus_conditions(truth: Truth, previous: Sequence[C], now: datetime, make: Make[C]) -> list[C]:
    """The three conditions for ``truth`` (``"True"`` / ``"False"``), built by ``make`` in
    :data:`CONDITION_TYPES` order; ``lastTransitionTime`` is the stored one of that type when its status
    is unchanged, else ``now``."""
    values = dict(zip(CONDITION_TYPES, truth, strict=True))
    before = {c.type_: c for c in previous}
    out: list[C] = []
    for type_ in CONDITION_TYPES:
        status = "True" if values[type_] else "False"
        prior = before.get(type_)
        since = prior.last_transition_time if prior is not None and prior.status == status else now
        out.append(make(type_, status, since))
    return out


def truth_of(conditions: Sequence[_Condition]) -> Truth:
    """The :class:`Truth` stored ``conditions`` state (a type missing counts as False)."""
    true = {c.type_ for c in conditions if c.status == "True"}
    return Truth(*(t in true for t in CONDITION_TYPES))
