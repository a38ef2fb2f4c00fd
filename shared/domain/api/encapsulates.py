"""``spec.encapsulates``: wrap an existing HelmRelease, Kustomization or workload.

— docs/behaviour.md#encapsulation-modes.
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.grammar import LabelValueInMap
from shared.domain.api.tagged_union import TaggedUnion
from shared.domain.api.wire import WireStruct

__all__ = [
    "BareWorkload",
    "EncapsulatesSpec",
    "EncapsulationKind",
    "EncapsulationMode",
    "EncapsulationTarget",
    "ExistingHelmRelease",
    "ExistingKustomization",
]


class ExistingHelmRelease(WireStruct):
    """A HelmRelease already in the cluster."""

    namespace: str
    """Namespace of the existing HelmRelease."""
    name: str
    """Name of the existing HelmRelease object."""
    release_name: str
    """Helm release name the HelmRelease installs (kept as is in Adopt mode)."""


class ExistingKustomization(WireStruct):
    """A Flux Kustomization already in the cluster."""

    namespace: str
    """Namespace of the existing Kustomization."""
    name: str
    """Name of the existing Kustomization."""


class BareWorkload(WireStruct):
    """Workloads selected by labels."""

    namespace: str
    """Namespace of the workload."""
    selector: dict[str, LabelValueInMap]
    """Label selector of the workload's objects: label → value, all must match."""


class EncapsulationTarget(ClosedSet):
    """The EncapsulationKind slot names."""

    EXISTING_HELM_RELEASE = "existingHelmRelease"
    EXISTING_KUSTOMIZATION = "existingKustomization"
    BARE_WORKLOAD = "bareWorkload"


EncapsulationVariant = ExistingHelmRelease | ExistingKustomization | BareWorkload


class EncapsulationKind(TaggedUnion):
    """What is encapsulated: exactly one of three slots."""

    _noun: ClassVar[str] = "encapsulation kind"

    existing_helm_release: ExistingHelmRelease | None = None
    existing_kustomization: ExistingKustomization | None = None
    bare_workload: BareWorkload | None = None

    def kind(self) -> EncapsulationTarget:
        """The single populated slot. Raises ``VariantError``."""
        return EncapsulationTarget(self._resolve()[0])

    def variant(self) -> EncapsulationVariant:
        """The single populated payload. Raises ``VariantError``."""
        payload: EncapsulationVariant = self._resolve()[1]
        return payload


class EncapsulationMode(ClosedSet):
    """How the target is handled. Default ``Manage``."""

    MANAGE = "Manage"
    ADOPT = "Adopt"
    OBSERVE = "Observe"

    @property
    def emits_workload(self) -> bool:
        """Manage and Adopt render workloads; Observe does not."""
        return self is not EncapsulationMode.OBSERVE

    @property
    def preserves_release_name(self) -> bool:
        """Adopt only."""
        return self is EncapsulationMode.ADOPT


class EncapsulatesSpec(WireStruct):
    """An existing HelmRelease, Kustomization or workload this Process wraps (``spec.encapsulates``)."""

    kind: EncapsulationKind
    mode: EncapsulationMode = EncapsulationMode.MANAGE
