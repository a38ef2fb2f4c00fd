"""The typed JSON merge patch of a Process's ``/status`` that decisions return.

:class:`StatusPatch` names every status field a phase decision writes. A field left ``UNSET`` is
not sent (the stored value stays), ``None`` deletes the key, any other value is written as the
wire format has it (docs/wire-format.md#processstatus: camelCase keys, snake_case
``identity``, timestamps in UTC). Lists are replaced whole, as in every JSON merge patch
(RFC 7386); ``boundary`` is an object, so its own fields merge.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import (
    CheckedCondition,
    FluxResourceRef,
    Identity,
    ProcessAttestation,
    ProcessCondition,
)
from shared.domain.api.wire import MergePatch

__all__ = ["BoundaryPatch", "StatusPatch", "merged"]

P = TypeVar("P", bound=MergePatch)


class BoundaryPatch(MergePatch, frozen=True):
    """``status.boundary``: checked rows and the converging deadline (None clears it)."""

    preconditions: list[CheckedCondition] | UnsetType = UNSET
    postconditions: list[CheckedCondition] | UnsetType = UNSET
    deadline: datetime | UnsetType | None = UNSET


class StatusPatch(MergePatch, frozen=True):
    """A merge patch of ``Process.status``; an empty one sends nothing."""

    phase: ProcessPhase | UnsetType = UNSET
    phase_since: datetime | UnsetType = UNSET
    message: str | UnsetType = UNSET
    conditions: list[ProcessCondition] | UnsetType = UNSET
    identity: Identity | UnsetType = UNSET
    pid: str | UnsetType = UNSET
    parent: str | UnsetType | None = UNSET
    """The parent PID; None deletes it (a root)."""
    flux_resources: list[FluxResourceRef] | UnsetType = UNSET
    boundary: BoundaryPatch | UnsetType = UNSET
    attestation: ProcessAttestation | UnsetType = UNSET
    exit_code: int | UnsetType = UNSET
    observed_generation: int | UnsetType = UNSET
    """``metadata.generation`` this write was decided for (docs/behaviour.md#conditions)."""


def merged(base: P, over: P | None) -> P:
    """``base`` with every field ``over`` sets (shallowly: a set ``boundary`` replaces base's)."""
    if over is None:
        return base
    changes = {name: value for name in over.__struct_fields__ if (value := getattr(over, name)) is not UNSET}
    return msgspec.structs.replace(base, **changes)
