"""``status.conditions[]`` of the pool, allocation and table kinds: the metav1.Condition shape with every
key but ``observedGeneration`` required (docs/wire-format.md#processstatus, docs/behaviour.md#conditions)."""

from __future__ import annotations

from shared.domain.api.wire import Timestamp, WireStruct

__all__ = ["StatusCondition"]


class StatusCondition(WireStruct):
    """One kstatus condition: ``Ready``, ``Reconciling`` or ``Stalled``."""

    type_: str
    """Condition type: ``Ready``, ``Reconciling`` or ``Stalled`` (kstatus)."""
    status: str
    """``True``, ``False`` or ``Unknown``."""
    reason: str
    """One CamelCase word saying why."""
    message: str
    """What happened, in words."""
    last_transition_time: Timestamp
    """When ``status`` last changed (RFC 3339)."""
    observed_generation: int | None = None
    """The ``metadata.generation`` the condition was computed for. Not in the reference.

    Why: docs/divergences.md#status-observedgeneration. (The first paragraph is this field's CRD description.)"""
