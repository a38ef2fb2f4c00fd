"""The subset of Kubernetes ``ObjectMeta`` the controllers use.

Other metadata keys (``managedFields``, ``selfLink``…) are dropped on decode: the
informer caches only these fields (DESIGN.md §4).
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.wire import Timestamp, WireStruct

__all__ = ["ObjectMeta", "OwnerReference"]


class OwnerReference(WireStruct):
    """``metadata.ownerReferences[]``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(WireStruct):
    """``metadata``: identity, versioning, labels/annotations, ownership, finalizers."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset(
        {"labels", "annotations", "owner_references", "finalizers"}
    )

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []
