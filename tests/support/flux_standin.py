"""Re-export of the Flux stand-in, which now ships in the product (:mod:`shared.fluxstandin`)."""

from shared.fluxstandin import (
    FLUX_KINDS,
    GIT_REPOSITORIES,
    HELM_RELEASES,
    HELM_REPOSITORIES,
    KUSTOMIZATIONS,
    OCI_REPOSITORIES,
    FluxObject,
    FluxStandIn,
    Verdict,
    desired_status,
)

__all__ = [
    "FLUX_KINDS",
    "GIT_REPOSITORIES",
    "HELM_RELEASES",
    "HELM_REPOSITORIES",
    "KUSTOMIZATIONS",
    "OCI_REPOSITORIES",
    "FluxObject",
    "FluxStandIn",
    "Verdict",
    "desired_status",
]
