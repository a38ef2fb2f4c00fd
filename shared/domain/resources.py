"""API endpoints (group/version/plural/kind/scope) of every kind tatara reads or writes — the one table.

The four tatara kinds are served by our CRDs (definitions in :mod:`tools.crd`); the Flux kinds are
pinned to the served+storage versions of the Flux CRDs the project targets (source-, kustomize- and
helm-controller v1.x, see docs/divergences.md "Render: OCIRepository version"); Ingress, DNSEndpoint
and Job are what the reconcilers render besides Flux objects.
"""

from __future__ import annotations

from typing import Final

from shared.domain.group import GROUP, VERSION
from shared.kube.client import Resource

PROCESSES: Final = Resource(GROUP, VERSION, "processes", "Process")
PROCESS_TABLES: Final = Resource(GROUP, VERSION, "processtables", "ProcessTable", namespaced=False)
EPHEMERAL_POOLS: Final = Resource(GROUP, VERSION, "ephemeralpools", "EphemeralPool")
EPHEMERAL_ALLOCATIONS: Final = Resource(GROUP, VERSION, "ephemeralallocations", "EphemeralAllocation")

KUSTOMIZATIONS: Final = Resource("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization")
HELM_RELEASES: Final = Resource("helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease")
OCI_REPOSITORIES: Final = Resource("source.toolkit.fluxcd.io", "v1", "ocirepositories", "OCIRepository")
GIT_REPOSITORIES: Final = Resource("source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository")
HELM_REPOSITORIES: Final = Resource("source.toolkit.fluxcd.io", "v1", "helmrepositories", "HelmRepository")
FLUX_KINDS: Final = (KUSTOMIZATIONS, HELM_RELEASES, OCI_REPOSITORIES, GIT_REPOSITORIES, HELM_REPOSITORIES)
"""Every Flux kind tatara renders or refers to (a HelmRepository only as a ``sourceRef``)."""

INGRESSES: Final = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
DNS_ENDPOINTS: Final = Resource("externaldns.k8s.io", "v1alpha1", "dnsendpoints", "DNSEndpoint")
JOBS: Final = Resource("batch", "v1", "jobs", "Job")
