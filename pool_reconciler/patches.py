"""The typed JSON merge patches (RFC 7386) the pool reconciler writes.

- a member Process's ``metadata`` (annotations, the ``resourceVersion`` guard) and ``spec.lifetime``:
  :class:`ProcessPatch`;
- an EphemeralPool's ``/status`` object: :class:`PoolStatusPatch`;
- an EphemeralAllocation's ``/status`` object: :class:`AllocationStatusPatch`.

A status patch is the ``/status`` object itself (``shared.kube.patch.patch_status`` wraps it in
``{"status": …}``), the convention of both binaries. Fields follow
:class:`shared.domain.api.wire.MergePatch`: ``UNSET`` is not sent, ``None`` deletes the key, values
are written as the models write them (docs/wire-format.md#ephemeralpool,
docs/wire-format.md#ephemeralallocation).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from msgspec import UNSET, UnsetType

from shared.domain.api.allocation import AllocationCondition, AllocationPhase, AllocationRef
from shared.domain.api.lifetime import EphemeralLifetime, PermanentLifetime
from shared.domain.api.pool import PoolCondition, PoolMember, PoolPhase
from shared.domain.api.wire import MergePatch

__all__ = [
    "AllocationStatusPatch",
    "LifetimePatch",
    "MetadataPatch",
    "PoolStatusPatch",
    "ProcessPatch",
    "SpecPatch",
    "annotate",
]


class MetadataPatch(MergePatch, frozen=True):
    """``metadata`` of a member: annotations to set (``str``) or strip (``None``); ``resource_version``,
    when set, makes the API server answer 409 if the member changed since it was observed."""

    annotations: dict[str, str | None] | UnsetType = UNSET
    resource_version: str | UnsetType = UNSET


class LifetimePatch(MergePatch, frozen=True):
    """``spec.lifetime``: set one slot and delete the other (``None``), so exactly one stays."""

    permanent: PermanentLifetime | UnsetType | None = UNSET
    ephemeral: EphemeralLifetime | UnsetType | None = UNSET


class SpecPatch(MergePatch, frozen=True):
    """``spec`` of a member: only its lifetime is ever patched."""

    lifetime: LifetimePatch | UnsetType = UNSET


class ProcessPatch(MergePatch, frozen=True):
    """A merge patch of a member Process (plain ``application/merge-patch+json``, no field manager)."""

    metadata: MetadataPatch | UnsetType = UNSET
    spec: SpecPatch | UnsetType = UNSET

    @property
    def resource_version(self) -> str | None:
        """The guard carried in ``metadata.resourceVersion``, or None (unguarded)."""
        meta = self.metadata
        if isinstance(meta, UnsetType) or isinstance(meta.resource_version, UnsetType):
            return None
        return meta.resource_version


def annotate(changes: Mapping[str, str | None], *, resource_version: str | None = None) -> ProcessPatch:
    """``{"metadata": {"annotations": changes}}`` (a ``str`` sets, ``None`` strips), guarded by
    ``resource_version`` when given."""
    return ProcessPatch(metadata=MetadataPatch(annotations=dict(changes), resource_version=resource_version or UNSET))


class PoolStatusPatch(MergePatch, frozen=True):
    """The ``/status`` of an EphemeralPool: phase, member counts, the member ledger (replaced whole),
    the ``Ready`` condition, and ``message`` (``None`` clears it)."""

    phase: PoolPhase | UnsetType = UNSET
    ready_count: int | UnsetType = UNSET
    allocated_count: int | UnsetType = UNSET
    spawning_count: int | UnsetType = UNSET
    returning_count: int | UnsetType = UNSET
    members: list[PoolMember] | UnsetType = UNSET
    message: str | UnsetType | None = UNSET
    conditions: list[PoolCondition] | UnsetType = UNSET
    phase_since: datetime | UnsetType = UNSET
    observed_generation: int | UnsetType = UNSET


class AllocationStatusPatch(MergePatch, frozen=True):
    """The ``/status`` of an EphemeralAllocation. Keys not set are left as stored (a ``boundPool`` written
    while Queued stays through NoMatchingPool)."""

    phase: AllocationPhase | UnsetType = UNSET
    phase_since: datetime | UnsetType = UNSET
    message: str | UnsetType = UNSET
    bound_pool: AllocationRef | UnsetType = UNSET
    assigned_process: AllocationRef | UnsetType = UNSET
    allocated_at: datetime | UnsetType = UNSET
    expires_at: datetime | UnsetType = UNSET
    conditions: list[AllocationCondition] | UnsetType = UNSET
    observed_generation: int | UnsetType = UNSET
