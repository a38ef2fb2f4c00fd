"""kstatus conditions (``Ready``, ``Reconciling``, ``Stalled``) for a Process phase.

The table and the rules: docs/behaviour.md#conditions (kstatus, with ``observedGeneration``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import ProcessCondition

__all__ = ["CONDITION_TYPES", "conditions_for"]

CONDITION_TYPES = ("Ready", "Reconciling", "Stalled")

_P = ProcessPhase
_SETTLED = frozenset({_P.ATTESTED, _P.FAILED, _P.REAPED})


def conditions_for(
    phase: ProcessPhase,
    generation: int | None,
    now: datetime,
    reason: str,
    message: str,
    *,
    stalled: bool | None = None,
    previous: Sequence[ProcessCondition] = (),
) -> list[ProcessCondition]:
    """The three kstatus conditions for ``status.conditions``, in type order.

    ``Ready`` is True only in Attested; ``Stalled`` True in Failed (or when ``stalled`` forces it,
    e.g. an intent we do not render); ``Reconciling`` True in every other non-settled phase.
    ``lastTransitionTime`` is kept from ``previous`` when a condition's status is unchanged;
    ``observedGeneration`` is ``generation`` (left out when None). Conditions of other types in
    ``previous`` (``StableName``, docs/behaviour.md#stable-name-claims) follow, unchanged.
    """
    is_stalled = phase is _P.FAILED if stalled is None else stalled
    values = {
        "Ready": phase is _P.ATTESTED and not is_stalled,
        "Reconciling": phase not in _SETTLED and not is_stalled,
        "Stalled": is_stalled,
    }
    before = {c.type_: c for c in previous}
    out: list[ProcessCondition] = []
    for type_ in CONDITION_TYPES:
        status = "True" if values[type_] else "False"
        prior = before.get(type_)
        since = prior.last_transition_time if prior is not None and prior.status == status else now
        out.append(ProcessCondition(type_=type_, status=status, last_transition_time=since, reason=reason,
                                    message=message, observed_generation=generation))
    out.extend(c for c in previous if c.type_ not in CONDITION_TYPES)
    return out
