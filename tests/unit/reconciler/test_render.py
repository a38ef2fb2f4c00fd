"""reconciler.render: expected documents written from docs/behaviour.md#rendering and docs/wire-format.md#hostnames,
compared as the JSON the API server receives (``as_json`` of each manifest)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from blake3 import blake3

from reconciler.render import (
    RENDERED_KINDS,
    IntentNotSupported,
    RenderError,
    RoutingConfig,
    flux_resource_refs,
    process_label_value,
    render_children,
)
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.domain.api.tagged_union import VariantError
from shared.domain.identity import ephemeral_id
from shared.kube.meta import as_json

UID = "0b7c6a3e-1111-4222-8333-444455556666"
CLASSIFICATION = {"pointType": "Gate", "substrate": "Compute"}
OWNER = {
    "apiVersion": "tatara.pleme.io/v1alpha1",
    "kind": "Process",
    "name": "p",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}
BASE_ANN = {"tatara.pleme.io/managed-by": "tatara-reconciler", "tatara.pleme.io/process": "ns1/p"}


def make(spec: dict[str, Any], status: dict[str, Any] | None = None, name: str = "p") -> Process:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns1", "uid": UID},
        "spec": {"classification": CLASSIFICATION, **spec},
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, Process)


def rendered(process: Process, **options: Any) -> list[dict[str, Any]]:
    """``render_children`` as the JSON documents server-side apply sends."""
    return [as_json(manifest) for manifest in render_children(process, **options)]


FLUX = {"flux": {"gitRepository": "repo", "path": "./apps"}}
OCI_APP = {
    "aplicacao": {
        "chartRef": "oci://ghcr.io/o/charts/app",
        "version": "1.2.3",
        "profile": "all-in-one",
        "valuesOverlay": {"a": {"b": 1}, "profile": "overwritten"},
    }
}


def kustomization(spec: dict[str, Any], annotations: dict[str, str] = BASE_ANN) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "p", "namespace": "ns1", "annotations": annotations, "ownerReferences": [OWNER]},
        "spec": spec,
    }


def test_flux_intent_renders_one_kustomization_with_sops_by_default() -> None:
    docs = rendered(make({"intent": FLUX}), owner_uid=UID)
    assert docs == [
        kustomization(
            {
                "interval": "1m",
                "path": "./apps",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "flux-system"},
                "decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}},
            }
        )
    ]


def test_flux_intent_with_namespaces_and_no_sops() -> None:
    intent = {
        "flux": {
            "gitRepository": "repo",
            "path": "./x",
            "gitRepositoryNamespace": "git",
            "targetNamespace": "apps",
            "decryptSops": False,
            "helmChart": "ignored",
        }
    }
    (doc,) = rendered(make({"intent": intent}), owner_uid=UID)
    assert doc["spec"] == {
        "interval": "1m",
        "path": "./x",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "git"},
        "targetNamespace": "apps",
    }


def test_status_stamps_pid_content_hash_and_previous_attestation() -> None:
    status = {
        "pid": "seph.1.3",
        "identity": {"name": "n", "content_hash": "abc", "name_override": True},
        "attestation": {
            "artifactHash": "",
            "intentHash": "i",
            "composedRoot": "root0",
            "generation": 4,
            "attestedAt": "2025-01-01T00:00:00Z",
        },
    }
    (doc,) = rendered(make({"intent": FLUX}, status), owner_uid=UID)
    assert doc["metadata"]["annotations"] == {
        **BASE_ANN,
        "tatara.pleme.io/pid": "seph.1.3",
        "tatara.pleme.io/content-hash": "abc",
        "tatara.pleme.io/generation": "4",
        "tatara.pleme.io/attestation-root": "root0",
    }


def test_oci_aplicacao_renders_ocirepository_then_helmrelease() -> None:
    docs = rendered(make({"intent": OCI_APP}), owner_uid=UID)
    meta = {"name": "p", "namespace": "ns1", "annotations": BASE_ANN, "ownerReferences": [OWNER]}
    assert docs == [
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": meta,
            "spec": {"interval": "5m", "url": "oci://ghcr.io/o/charts/app", "ref": {"tag": "1.2.3"}},
        },
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": meta,
            "spec": {
                "interval": "5m",
                "releaseName": "p",
                "targetNamespace": "ns1",
                "chartRef": {"kind": "OCIRepository", "name": "p", "namespace": "ns1"},
                "install": {"timeout": "25m", "remediation": {"retries": 3}},
                "upgrade": {"timeout": "25m", "remediation": {"retries": 3}},
                "values": {"a": {"b": 1}, "profile": "all-in-one"},
            },
        },
    ]


@pytest.mark.parametrize(
    ("chart_ref", "repo", "chart"),
    [("bitnami/redis", "bitnami", "redis"), ("redis", "default", "redis"), ("a/b/c", "a", "b/c")],
    ids=["repo-slash-chart splits at the slash", "no slash uses the default repo", "splits at the first slash"],
)
def test_repository_chart_selector(chart_ref: str, repo: str, chart: str) -> None:
    intent = {"aplicacao": {"chartRef": chart_ref, "version": "^1", "releaseName": "r", "targetNamespace": "t"}}
    (release,) = rendered(make({"intent": intent}), owner_uid=UID)
    assert release["kind"] == "HelmRelease"
    assert release["spec"]["chart"] == {
        "spec": {
            "chart": chart,
            "version": "^1",
            "sourceRef": {"kind": "HelmRepository", "name": repo, "namespace": "flux-system"},
        }
    }
    assert "chartRef" not in release["spec"]
    assert (release["spec"]["releaseName"], release["spec"]["targetNamespace"]) == ("r", "t")
    assert release["spec"]["values"] == {}


@pytest.mark.parametrize(
    ("given", "written"),
    [("10m", "10m"), ("1h30m", "1h30m"), ("1h 30m", "1h30m0s"), ("2 hours", "2h0m0s")],
    ids=["go form kept", "concatenated go form kept", "humantime with a space rewritten", "long unit rewritten"],
)
def test_install_timeout_is_a_go_duration(given: str, written: str) -> None:
    intent = {"aplicacao": {"chartRef": "r/c", "version": "1", "installTimeout": given}}
    (release,) = rendered(make({"intent": intent}), owner_uid=UID)
    assert release["spec"]["install"]["timeout"] == written
    assert release["spec"]["upgrade"]["timeout"] == written


def test_adopt_mode_annotates_aplicacao_children() -> None:
    encapsulates = {
        "kind": {"existingHelmRelease": {"namespace": "legacy", "name": "hr", "releaseName": "rel"}},
        "mode": "Adopt",
    }
    docs = rendered(make({"intent": OCI_APP, "encapsulates": encapsulates}), owner_uid=UID)
    for doc in docs:
        assert doc["metadata"]["annotations"]["tatara.pleme.io/encapsulation-mode"] == "Adopt"
        assert doc["metadata"]["annotations"]["tatara.pleme.io/adopted-release"] == "legacy/rel"


def test_adopt_mode_with_flux_intent_adds_nothing() -> None:
    encapsulates = {"kind": {"existingKustomization": {"namespace": "f", "name": "k"}}, "mode": "Adopt"}
    (doc,) = rendered(make({"intent": FLUX, "encapsulates": encapsulates}), owner_uid=UID)
    assert doc["metadata"]["annotations"] == BASE_ANN


@pytest.mark.parametrize(
    "intent",
    [FLUX, {"nix": {"flakeRef": "f", "attribute": "a"}}],
    ids=["observe renders nothing for flux", "observe renders nothing even for nix"],
)
def test_observe_mode_renders_nothing(intent: dict[str, Any]) -> None:
    encapsulates = {"kind": {"existingKustomization": {"namespace": "f", "name": "k"}}, "mode": "Observe"}
    assert rendered(make({"intent": intent, "encapsulates": encapsulates}), owner_uid=UID) == []


@pytest.mark.parametrize(
    ("intent", "name"),
    [
        ({"nix": {"flakeRef": "f", "attribute": "a"}}, "nix"),
        ({"lisp": {"source": "(x)"}}, "lisp"),
        ({"container": {"image": "busybox"}}, "container"),
        ({"guest": {"spec": {}}}, "guest"),
    ],
    ids=["nix is not rendered", "lisp is not rendered", "container is not rendered", "guest is not rendered"],
)
def test_unsupported_intents_raise(intent: dict[str, Any], name: str) -> None:
    with pytest.raises(IntentNotSupported, match=name) as info:
        rendered(make({"intent": intent}), owner_uid=UID)
    assert info.value.intent == name


def test_ambiguous_intent_raises_variant_error() -> None:
    with pytest.raises(VariantError, match="multiple variants"):
        rendered(make({"intent": {**FLUX, **OCI_APP}}), owner_uid=UID)


def test_missing_uid_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="uid"):
        rendered(make({"intent": FLUX}), owner_uid="")


# ── routing ─────────────────────────────────────────────────────────────────

ROUTING = {
    "hostnames": [{"app": "api", "instance": "demo-prod"}],
    "backend": {
        "service": "svc",
        "port": 8080,
        "ingressAnnotations": {"x/y": "1", "cert-manager.io/cluster-issuer": "u"},
    },
    "stableNameClaim": True,
}
CFG = RoutingConfig(cluster="pleme-dev", location="use1", domain="quero.lol", dns_lb_target="lb.example.")


def test_routing_renders_ingress_and_dnsendpoint_named_after_process_app_and_instance() -> None:
    docs = rendered(make({"intent": FLUX, "routing": ROUTING}, name="demo-prod"), owner_uid=UID, routing=CFG)
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    # <process>-<app>-<instance>, and the DNSEndpoint <ingress>-dns (docs/behaviour.md#ingress-and-dnsendpoint)
    assert kinds == [
        ("Kustomization", "demo-prod"),
        ("Ingress", "demo-prod-api-demo-prod"),
        ("DNSEndpoint", "demo-prod-api-demo-prod-dns"),
    ]
    ingress, dns = docs[1], docs[2]
    fqdn = "api.demo-prod.pleme-dev.use1.quero.lol"
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    assert ingress["metadata"]["labels"] == {
        "tatara.pleme.io/managed-by": "tatara-reconciler",
        "tatara.pleme.io/process": "ns1.demo-prod",
        "tatara.pleme.io/app": "api",
        "tatara.pleme.io/routing-form": "instance",
    }
    assert ingress["metadata"]["annotations"] == {
        "tatara.pleme.io/managed-by": "tatara-reconciler",
        "tatara.pleme.io/process": "ns1/demo-prod",
        "tatara.pleme.io/routing-form": "instance",
        "x/y": "1",
        "cert-manager.io/cluster-issuer": "letsencrypt-prod",
    }
    assert ingress["spec"] == {
        "ingressClassName": "nginx",
        "tls": [{"hosts": [fqdn], "secretName": "demo-prod-api-demo-prod-tls"}],
        "rules": [
            {
                "host": fqdn,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "svc", "port": {"number": 8080}}},
                        }
                    ]
                },
            }
        ],
    }
    assert dns["apiVersion"] == "externaldns.k8s.io/v1alpha1"
    assert dns["spec"] == {
        "endpoints": [{"dnsName": fqdn, "recordType": "CNAME", "recordTTL": 60, "targets": ["lb.example."]}]
    }
    assert dns["metadata"]["labels"] == ingress["metadata"]["labels"]
    for doc in docs:
        assert [r for r in doc["metadata"]["ownerReferences"] if r.get("controller")] == [
            {**OWNER, "name": "demo-prod"}
        ]
        assert all("/" not in v for v in doc["metadata"].get("labels", {}).values())


def test_stable_form_only_with_a_held_claim_and_no_dns_without_lb_target() -> None:
    process = make({"intent": FLUX, "routing": ROUTING})
    cfg = RoutingConfig()
    held = {"pleme-dev/api"}
    names = [d["metadata"]["name"] for d in rendered(process, owner_uid=UID, routing=cfg, stable_keys=held)]
    assert names == ["p", "p-api-demo-prod", "p-api-stable"]
    stable = rendered(process, owner_uid=UID, routing=cfg, stable_keys=held)[2]
    assert stable["spec"]["rules"][0]["host"] == "api.pleme-dev.use1.quero.lol"
    assert stable["metadata"]["labels"]["tatara.pleme.io/routing-form"] == "stable"
    assert [d["metadata"]["name"] for d in rendered(process, owner_uid=UID, routing=cfg)] == [
        "p",
        "p-api-demo-prod",
    ]


def test_hostname_without_instance_uses_the_spec_ephemeral_id() -> None:
    routing = {"hostnames": [{"app": "web", "cluster": "c2"}], "backend": {"service": "s", "port": 80}}
    process = make({"intent": FLUX, "routing": routing})
    eph = ephemeral_id(process.spec)
    ingress = rendered(process, owner_uid=UID)[1]
    assert ingress["metadata"]["name"] == f"p-web-{eph}"
    assert ingress["spec"]["rules"][0]["host"] == f"web.{eph}.c2.use1.quero.lol"


@pytest.mark.parametrize(
    ("hostname", "cfg", "message"),
    [
        ({"app": "auth"}, RoutingConfig(), 'app label "auth" is reserved for the saguão control plane'),
        ({"app": "API"}, RoutingConfig(), 'invalid DNS label "API" for segment app: must contain only [a-z0-9-]'),
        ({"app": "a", "instance": "-x"}, RoutingConfig(), "segment ephemeral_id: must not start or end with a hyphen"),
        ({"app": "a", "instance": "x"}, RoutingConfig(location=""), "segment location: must be 1–63 characters"),
        ({"app": "a", "instance": "x"}, RoutingConfig(domain=""), "segment domain: must not be empty"),
        ({"app": "a", "instance": "x"}, RoutingConfig(domain="a..b"), "segment domain: must be 1–63"),
    ],
    ids=["reserved app", "upper case app", "hyphen-edged instance", "empty location", "empty domain", "empty piece"],
)
def test_invalid_routing_labels_fail_the_render(hostname: dict[str, str], cfg: RoutingConfig, message: str) -> None:
    routing = {"hostnames": [hostname], "backend": {"service": "s", "port": 80}}
    with pytest.raises(RenderError, match=message.replace("[", r"\[").replace("]", r"\]")):
        rendered(make({"intent": FLUX, "routing": routing}), owner_uid=UID, routing=cfg)


def test_process_label_value_is_legal_and_bounded() -> None:
    assert process_label_value("ns", "name") == "ns.name"
    long = process_label_value("n" * 40, "x" * 200)
    # cut to 54 characters, then "-" and 8 hex of BLAKE3("<ns>/<name>")
    assert long == "n" * 40 + "." + "x" * 13 + "-" + blake3(("n" * 40 + "/" + "x" * 200).encode()).hexdigest()[:8]
    assert len(long) <= 63
    assert "/" not in long
    assert long != process_label_value("n" * 40, "x" * 199)


# ── kinds and refs ──────────────────────────────────────────────────────────


def test_rendered_kinds_are_the_flux_and_routing_kinds_in_apply_order() -> None:
    assert [(r.api_version, r.kind, r.plural) for r in RENDERED_KINDS] == [
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "kustomizations"),
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases"),
        ("source.toolkit.fluxcd.io/v1", "OCIRepository", "ocirepositories"),
        ("networking.k8s.io/v1", "Ingress", "ingresses"),
        ("externaldns.k8s.io/v1alpha1", "DNSEndpoint", "dnsendpoints"),
    ]


def test_every_rendered_document_is_of_a_rendered_kind() -> None:
    kinds = {(r.api_version, r.kind) for r in RENDERED_KINDS}
    docs = [
        *rendered(make({"intent": OCI_APP, "routing": ROUTING}), owner_uid=UID, routing=CFG,
                  stable_keys={"pleme-dev/api"}),
        *rendered(make({"intent": FLUX}), owner_uid=UID),
        *rendered(make({"intent": {"aplicacao": {"chartRef": "r/c", "version": "1"}}}), owner_uid=UID),
    ]
    assert {(d["apiVersion"], d["kind"]) for d in docs} == kinds


def test_flux_resource_refs_skip_routing() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    docs = render_children(make({"intent": OCI_APP, "routing": ROUTING}), owner_uid=UID)
    refs = flux_resource_refs(docs, now)
    assert [(r.kind, r.name, r.ready, r.message) for r in refs] == [
        ("OCIRepository", "p", False, "applied; awaiting reconciliation"),
        ("HelmRelease", "p", False, "applied; awaiting reconciliation"),
    ]
