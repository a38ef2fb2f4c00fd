"""The Flux objects tatara renders: Kustomization, HelmRelease and OCIRepository.

Only the fields tatara sets are declared (Flux's own types have many more), named and nested as
the Flux API reference writes them (kustomize.toolkit.fluxcd.io/v1, helm.toolkit.fluxcd.io/v2,
source.toolkit.fluxcd.io/v1). ``apiVersion`` and ``kind`` come from :mod:`shared.domain.resources`
and are always written; an optional field left ``None`` is left out. What tatara puts in each
field: docs/behaviour.md "Rendering".
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.wire import FreeObject, WireStruct
from shared.domain.resources import HELM_RELEASES, KUSTOMIZATIONS, OCI_REPOSITORIES
from shared.kube.client import Resource
from shared.kube.meta import ObjectMeta

__all__ = [
    "CrossNamespaceSourceReference",
    "Decryption",
    "HelmChartTemplate",
    "HelmChartTemplateSpec",
    "HelmRelease",
    "HelmReleaseSpec",
    "Kustomization",
    "KustomizationSpec",
    "LocalObjectReference",
    "OCIRepository",
    "OCIRepositoryRef",
    "OCIRepositorySpec",
    "ReleaseAction",
    "Remediation",
]


class CrossNamespaceSourceReference(WireStruct):
    """A reference to a Flux source (``sourceRef``, ``chartRef``): kind, name and, if set, namespace."""

    kind: str
    name: str
    namespace: str | None = None


class LocalObjectReference(WireStruct):
    """An object in the same namespace, by name (Flux ``meta.LocalObjectReference``)."""

    name: str


# ── kustomize.toolkit.fluxcd.io/v1 ───────────────────────────────────────────


class Decryption(WireStruct):
    """``spec.decryption``: the decryption provider (``sops``) and the Secret holding its keys."""

    provider: str
    secret_ref: LocalObjectReference | None = None


class KustomizationSpec(WireStruct):
    """``spec`` of a Kustomization. ``interval`` is a Go duration (``1m``)."""

    interval: str
    path: str
    prune: bool
    source_ref: CrossNamespaceSourceReference
    target_namespace: str | None = None
    decryption: Decryption | None = None


class Kustomization(WireStruct):
    """A ``kustomize.toolkit.fluxcd.io/v1`` Kustomization."""

    RESOURCE: ClassVar[Resource] = KUSTOMIZATIONS

    api_version: str = KUSTOMIZATIONS.api_version
    kind: str = KUSTOMIZATIONS.kind
    metadata: ObjectMeta
    spec: KustomizationSpec


# ── helm.toolkit.fluxcd.io/v2 ────────────────────────────────────────────────


class HelmChartTemplateSpec(WireStruct):
    """``spec.chart.spec``: a chart (name and version range) in a source such as a HelmRepository."""

    chart: str
    version: str
    source_ref: CrossNamespaceSourceReference


class HelmChartTemplate(WireStruct):
    """``spec.chart``: the template of the HelmChart helm-controller creates."""

    spec: HelmChartTemplateSpec


class Remediation(WireStruct):
    """``remediation`` of an install or upgrade: how many times a failed action is retried."""

    retries: int


class ReleaseAction(WireStruct):
    """``spec.install`` / ``spec.upgrade``: the action's timeout (a Go duration) and its remediation."""

    timeout: str
    remediation: Remediation


class HelmReleaseSpec(WireStruct):
    """``spec`` of a HelmRelease: exactly one of ``chart_ref`` (an OCIRepository) or ``chart`` is set."""

    interval: str
    release_name: str
    target_namespace: str
    chart_ref: CrossNamespaceSourceReference | None = None
    chart: HelmChartTemplate | None = None
    install: ReleaseAction
    upgrade: ReleaseAction
    values: FreeObject
    """Free-form Helm values (keys written sorted)."""


class HelmRelease(WireStruct):
    """A ``helm.toolkit.fluxcd.io/v2`` HelmRelease."""

    RESOURCE: ClassVar[Resource] = HELM_RELEASES

    api_version: str = HELM_RELEASES.api_version
    kind: str = HELM_RELEASES.kind
    metadata: ObjectMeta
    spec: HelmReleaseSpec


# ── source.toolkit.fluxcd.io/v1 ──────────────────────────────────────────────


class OCIRepositoryRef(WireStruct):
    """``spec.ref``: the artifact's tag."""

    tag: str


class OCIRepositorySpec(WireStruct):
    """``spec`` of an OCIRepository: ``url`` is ``oci://…``."""

    interval: str
    url: str
    ref: OCIRepositoryRef


class OCIRepository(WireStruct):
    """A ``source.toolkit.fluxcd.io/v1`` OCIRepository."""

    RESOURCE: ClassVar[Resource] = OCI_REPOSITORIES

    api_version: str = OCI_REPOSITORIES.api_version
    kind: str = OCI_REPOSITORIES.kind
    metadata: ObjectMeta
    spec: OCIRepositorySpec
