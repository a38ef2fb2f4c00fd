"""reconciler.children: refs and readiness of cached children (docs/behaviour.md#child-readiness)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.children import ChildRef, child_ref, child_state, is_flux_resource


def flux_doc(*conditions: dict[str, Any], generation: int | None = None, observed: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if observed is not None:
        status["observedGeneration"] = observed
    meta: dict[str, Any] = {"name": "k", "namespace": "ns"}
    if generation is not None:
        meta["generation"] = generation
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("doc", "ready", "stalled", "reason", "message"),
    [
        (flux_doc({"type": "Ready", "status": "True", "reason": "Succeeded"}), True, False, "Succeeded", ""),
        (flux_doc({"type": "Ready", "status": "False", "message": "boom"}), False, False, "", "boom"),
        (flux_doc({"type": "Ready", "status": "Unknown"}), None, False, "", ""),
        (flux_doc(), None, False, "", ""),
        (
            flux_doc(
                {"type": "Ready", "status": "False", "reason": "InstallFailed"},
                {"type": "Stalled", "status": "True", "reason": "RetriesExceeded", "message": "gave up"},
            ),
            False,
            True,
            "RetriesExceeded",
            "gave up",
        ),
        (
            flux_doc({"type": "Ready", "status": "False", "reason": "RetriesExceeded"}),
            False,
            True,
            "RetriesExceeded",
            "",
        ),
        (flux_doc({"type": "Ready", "status": "True"}, generation=3, observed=2), None, False, "", ""),
        (
            # kustomize-controller without the sops-age Secret: a current failure, never succeeded
            flux_doc({"type": "Ready", "status": "False", "reason": "BuildFailed", "observedGeneration": 1,
                      "message": 'secrets "sops-age" not found'}, generation=1, observed=-1),
            False,
            False,
            "BuildFailed",
            'secrets "sops-age" not found',
        ),
        (
            flux_doc({"type": "Ready", "status": "False", "reason": "OCIArtifactPullFailed"},
                     generation=2, observed=-1),
            False,
            False,
            "OCIArtifactPullFailed",
            "",
        ),
        (
            flux_doc({"type": "Ready", "status": "False", "reason": "BuildFailed", "observedGeneration": 1},
                     generation=2, observed=-1),
            None,
            False,
            "BuildFailed",
            "",
        ),
        (
            flux_doc({"type": "Ready", "status": "False", "reason": "BuildFailed"}, generation=3, observed=2),
            None,
            False,
            "BuildFailed",
            "",
        ),
        (
            flux_doc({"type": "Ready", "status": "True", "observedGeneration": 2}, generation=2, observed=1),
            None,
            False,
            "",
            "",
        ),
        (
            flux_doc({"type": "Ready", "status": "False", "reason": "InstallFailed", "observedGeneration": 2},
                     {"type": "Stalled", "status": "True", "reason": "RetriesExceeded", "observedGeneration": 1},
                     generation=2, observed=1),
            False,
            False,
            "InstallFailed",
            "",
        ),
        (
            flux_doc({"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}),
            True,
            False,
            "",
            "",
        ),
    ],
    ids=[
        "Ready True is ready",
        "Ready False carries its message",
        "Ready Unknown is unknown",
        "no conditions is unknown",
        "Stalled True is a terminal failure",
        "a terminal Ready reason is stalled",
        "a stale observedGeneration is not ready yet",
        "Ready False with observedGeneration -1 and a current condition is a failure",
        "Ready False next to observedGeneration -1 without a condition generation is a failure",
        "Ready False for an older generation is unknown",
        "Ready False behind a successful older generation is unknown",
        "Ready True needs status.observedGeneration current too",
        "a Stalled condition of an older generation does not stall",
        "the first Ready condition wins",
    ],
)
def test_child_state(doc: dict[str, Any], ready: bool | None, stalled: bool, reason: str, message: str) -> None:
    state = child_state(doc)
    assert (state.ready, state.stalled, state.reason, state.message) == (ready, stalled, reason, message)
    assert state.ref == ChildRef("helm.toolkit.fluxcd.io/v2", "HelmRelease", "ns", "k")
    assert state.object is doc


def test_child_ref_defaults_namespace() -> None:
    assert child_ref({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) == ChildRef(
        "v1", "ConfigMap", "default", "c"
    )




@pytest.mark.parametrize(
    ("ref", "flux"),
    [
        (ChildRef("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "ns", "k"), True),
        (ChildRef("helm.toolkit.fluxcd.io/v2", "HelmRelease", "ns", "h"), True),
        (ChildRef("source.toolkit.fluxcd.io/v1", "OCIRepository", "ns", "o"), True),
        (ChildRef("networking.k8s.io/v1", "Ingress", "ns", "i"), False),
        (ChildRef("externaldns.k8s.io/v1alpha1", "DNSEndpoint", "ns", "d"), False),
    ],
    ids=["a Kustomization is a flux resource", "a HelmRelease is a flux resource",
         "an OCIRepository is a flux resource", "an Ingress is not", "a DNSEndpoint is not"],
)
def test_flux_resources_are_the_flux_groups(ref: ChildRef, flux: bool) -> None:
    assert is_flux_resource(ref) is flux
