"""Rendered children pass the real API server's validation (Flux and external-dns CRD schemas,
Ingress, ownerReferences, label values) — server-side dry run of each document.

Inputs: the two upstream examples (tests/fixtures/upstream-tatara/examples). The
observability stack has a nix intent, which is not rendered; it is also rendered with
its intent swapped for a flux one and routing added, so every kind is exercised.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from reconciler.render import IntentNotSupported, RoutingConfig, render_children
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.kube.meta import as_json
from tests.support.kube import install_crds_async, load_yaml_docs, third_party_crds

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "upstream-tatara" / "examples"
UID = "6c1d7a52-0f3e-4b7a-9c1e-2a4b5c6d7e8f"
PLURALS = {
    "Kustomization": "kustomizations",
    "HelmRelease": "helmreleases",
    "OCIRepository": "ocirepositories",
    "DNSEndpoint": "dnsendpoints",
}
CFG = RoutingConfig(dns_lb_target="lb.pleme-dev.use1.quero.lol")
STATUS = {
    "pid": "seph.1.4",
    "identity": {"name": "n", "content_hash": "abcdefghjkmnpqrstvwxyz0123", "name_override": True},
    "attestation": {
        "artifactHash": "",
        "intentHash": "0" * 64,
        "composedRoot": "f" * 64,
        "generation": 2,
        "attestedAt": "2025-01-01T00:00:00Z",
    },
}


def example(name: str, namespace: str) -> dict[str, Any]:
    (doc,) = load_yaml_docs(EXAMPLES / f"{name}.yaml")
    doc["metadata"]["namespace"] = namespace
    doc["metadata"]["uid"] = UID
    doc["status"] = copy.deepcopy(STATUS)
    return doc


async def dry_run_create(api: client.ApiClient, doc: dict[str, Any]) -> dict[str, Any]:
    ns = doc["metadata"]["namespace"]
    if doc["kind"] == "Ingress":
        created = await client.NetworkingV1Api(api).create_namespaced_ingress(ns, doc, dry_run="All")
        return dict(api.sanitize_for_serialization(created))
    group, _, version = doc["apiVersion"].rpartition("/")
    custom = client.CustomObjectsApi(api)
    result: dict[str, Any] = await custom.create_namespaced_custom_object(
        group, version, ns, PLURALS[doc["kind"]], doc, dry_run="All"
    )
    return result


async def check_accepted(api: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        stored = await dry_run_create(api, doc)
        meta = stored["metadata"]
        assert meta["name"] == doc["metadata"]["name"]
        assert [r for r in meta["ownerReferences"] if r.get("controller")] == doc["metadata"]["ownerReferences"]
        assert meta["annotations"]["tatara.pleme.io/attestation-root"] == "f" * 64
        # nothing we wrote was pruned or changed (the server may add defaults)
        assert contains(stored["spec"], doc["spec"]), doc["kind"]


def contains(stored: Any, sent: Any) -> bool:
    """``sent`` is a recursive subset of ``stored`` (objects by key, lists element-wise)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(contains, stored, sent))
    return bool(stored == sent)


@pytest.fixture
async def crds(kube: client.ApiClient) -> None:
    await install_crds_async(kube, third_party_crds())


@pytest.mark.usefixtures("crds")
async def test_closed_loop_example_renders_accepted_ocirepository_and_helmrelease(
    kube: client.ApiClient, namespace: str
) -> None:
    process = convert(example("closed-loop-ephemeral", namespace), Process)
    docs = [as_json(m) for m in render_children(process, owner_uid=UID, routing=CFG)]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("OCIRepository", "closed-loop-attest"),
        ("HelmRelease", "closed-loop-attest"),
    ]
    assert docs[1]["spec"]["releaseName"] == "demo-app-consolidated"
    assert docs[1]["spec"]["values"]["profile"] == "all-in-one"
    await check_accepted(kube, docs)


@pytest.mark.usefixtures("crds")
async def test_observability_example_with_flux_intent_and_routing_is_accepted(
    kube: client.ApiClient, namespace: str
) -> None:
    raw = example("observability-stack", namespace)
    with pytest.raises(IntentNotSupported, match="nix"):
        render_children(convert(raw, Process), owner_uid=UID, routing=CFG)

    raw["spec"]["intent"] = {
        "flux": {"gitRepository": "k8s", "path": "./shared/infrastructure/observability", "targetNamespace": "obs"}
    }
    raw["spec"]["routing"] = {
        "hostnames": [{"app": "grafana"}, {"app": "prometheus", "instance": "main"}],
        "backend": {"service": "grafana", "port": 3000, "ingressAnnotations": {"nginx.ingress.kubernetes.io/x": "y"}},
        "stableNameClaim": True,
    }
    held = {"pleme-dev/grafana", "pleme-dev/prometheus"}
    docs = [as_json(m) for m in render_children(convert(raw, Process), owner_uid=UID, routing=CFG, stable_keys=held)]
    assert [d["kind"] for d in docs] == ["Kustomization"] + ["Ingress", "DNSEndpoint"] * 4
    await check_accepted(kube, docs)
