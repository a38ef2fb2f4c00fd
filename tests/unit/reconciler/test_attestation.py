"""reconciler.attestation: hashes recomputed here from the formulas of docs/wire-format.md#attestation-root
(BLAKE3 over the exact bytes it lists), not from shared.domain.identity."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from blake3 import blake3

from reconciler.attestation import artifact_hash_of, attest_process
from reconciler.render import render_children
from reconciler.status_patch import StatusPatch
from shared.domain.api.codec import convert
from shared.domain.api.process import Process, ProcessAttestation
from shared.kube.meta import as_json

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
UID = "u-1"
INTENT_JSON = '{"flux":{"gitRepository":"x","path":"./p","decryptSops":true}}'  # the docs' own example


def h(text: str) -> str:
    return str(blake3(text.encode()).hexdigest())


def sent(attestation: ProcessAttestation) -> dict[str, Any]:
    """``status.attestation`` as the status merge patch sends it."""
    wire: dict[str, Any] = as_json(StatusPatch(attestation=attestation))["attestation"]
    return wire


def make(status: dict[str, Any] | None = None, intent: dict[str, Any] | None = None) -> Process:
    doc: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": UID},
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": intent or {"flux": {"gitRepository": "x", "path": "./p"}},
        },
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, Process)


def test_first_attestation_over_rendered_children() -> None:
    process = make()
    docs = render_children(process, owner_uid=UID)
    att = attest_process(process, now=NOW, children=docs)
    artifact = h("kustomize.toolkit.fluxcd.io/v1/Kustomization/ns/p\n")
    intent = h(INTENT_JSON)
    assert att.artifact_hash == artifact
    assert att.intent_hash == intent
    assert att.control_hash is None
    assert att.generation == 0
    assert att.previous_root is None
    assert att.composed_root == h(f"tatara-process/v1alpha1\n{artifact}\n\n{intent}\n")
    assert sent(att) == {
        "artifactHash": artifact,
        "intentHash": intent,
        "composedRoot": att.composed_root,
        "generation": 0,
        "attestedAt": "2025-06-01T12:00:00Z",
    }


def test_next_generation_chains_to_the_previous_root() -> None:
    status = {
        "phase": "Running",
        "attestation": {
            "artifactHash": "",
            "intentHash": "old",
            "composedRoot": "prevroot",
            "generation": 4,
            "attestedAt": "2025-01-01T00:00:00Z",
        },
        "fluxResources": [
            {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "name": "p", "namespace": "ns"},
            {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "name": "p", "namespace": "ns"},
        ],
    }
    att = attest_process(make(status), now=NOW)  # children default to status.fluxResources
    artifact = h("source.toolkit.fluxcd.io/v1/OCIRepository/ns/p\nhelm.toolkit.fluxcd.io/v2/HelmRelease/ns/p\n")
    assert att.artifact_hash == artifact
    assert att.generation == 5
    assert att.previous_root == "prevroot"
    assert att.composed_root == h(f"tatara-process/v1alpha1\n{artifact}\n\n{h(INTENT_JSON)}\nprevroot")
    assert sent(att)["previousRoot"] == "prevroot"
    assert "controlHash" not in sent(att)


def test_no_flux_children_gives_an_empty_artifact_hash() -> None:
    assert artifact_hash_of([]) == ""
    att = attest_process(make(), now=NOW, children=[])
    assert att.artifact_hash == ""
    assert att.composed_root == h(f"tatara-process/v1alpha1\n\n\n{h(INTENT_JSON)}\n")


def test_routing_children_do_not_enter_the_artifact_hash() -> None:
    routing = {"hostnames": [{"app": "api", "instance": "i1"}], "backend": {"service": "s", "port": 80}}
    process = convert(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": UID},
            "spec": {
                "classification": {"pointType": "Gate", "substrate": "Compute"},
                "intent": {"flux": {"gitRepository": "x", "path": "./p"}},
                "routing": routing,
            },
        },
        Process,
    )
    docs = render_children(process, owner_uid=UID)
    assert [d.kind for d in docs] == ["Kustomization", "Ingress"]
    assert artifact_hash_of(docs) == h("kustomize.toolkit.fluxcd.io/v1/Kustomization/ns/p\n")
