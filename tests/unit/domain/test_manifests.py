"""shared.domain.manifests: each rendered kind is written as its API documents it (expected JSON written out)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.manifests.flux import (
    CrossNamespaceSourceReference,
    Decryption,
    HelmChartTemplate,
    HelmChartTemplateSpec,
    HelmRelease,
    HelmReleaseSpec,
    Kustomization,
    KustomizationSpec,
    LocalObjectReference,
    OCIRepository,
    OCIRepositoryRef,
    OCIRepositorySpec,
    ReleaseAction,
    Remediation,
)
from shared.domain.manifests.routing import (
    DNSEndpoint,
    DNSEndpointSpec,
    Endpoint,
    HTTPIngressPath,
    HTTPIngressRuleValue,
    Ingress,
    IngressBackend,
    IngressRule,
    IngressServiceBackend,
    IngressSpec,
    IngressTLS,
    ServiceBackendPort,
)
from shared.kube.meta import ObjectMeta, OwnerReference, as_json

META = ObjectMeta(name="p", namespace="ns", annotations={"b": "2", "a": "1"},
                  owner_references=[OwnerReference(api_version="tatara.pleme.io/v1alpha1", kind="Process", name="p",
                                                   uid="u", controller=True, block_owner_deletion=True)])
META_JSON = {"name": "p", "namespace": "ns", "annotations": {"a": "1", "b": "2"},
             "ownerReferences": [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "name": "p",
                                  "uid": "u", "controller": True, "blockOwnerDeletion": True}]}
ACTION = ReleaseAction(timeout="25m", remediation=Remediation(retries=3))
BACKEND = IngressBackend(service=IngressServiceBackend(name="svc", port=ServiceBackendPort(number=80)))

CASES: list[tuple[Any, dict[str, Any]]] = [
    (
        Kustomization(metadata=META, spec=KustomizationSpec(
            interval="1m", path="./x", prune=True,
            source_ref=CrossNamespaceSourceReference(kind="GitRepository", name="repo", namespace="flux-system"),
            decryption=Decryption(provider="sops", secret_ref=LocalObjectReference(name="sops-age")))),
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": META_JSON,
         "spec": {"interval": "1m", "path": "./x", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "flux-system"},
                  "decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}}}},
    ),
    (
        Kustomization(metadata=META, spec=KustomizationSpec(
            interval="1m", path="./x", prune=False, target_namespace="apps",
            source_ref=CrossNamespaceSourceReference(kind="GitRepository", name="repo"))),
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": META_JSON,
         "spec": {"interval": "1m", "path": "./x", "prune": False,
                  "sourceRef": {"kind": "GitRepository", "name": "repo"}, "targetNamespace": "apps"}},
    ),
    (
        HelmRelease(metadata=META, spec=HelmReleaseSpec(
            interval="5m", release_name="r", target_namespace="t", install=ACTION, upgrade=ACTION,
            chart=HelmChartTemplate(spec=HelmChartTemplateSpec(
                chart="redis", version="^1",
                source_ref=CrossNamespaceSourceReference(kind="HelmRepository", name="bitnami",
                                                         namespace="flux-system"))),
            values={"z": 1, "a": {"y": None, "b": [2]}})),
        {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": META_JSON,
         "spec": {"interval": "5m", "releaseName": "r", "targetNamespace": "t",
                  "chart": {"spec": {"chart": "redis", "version": "^1",
                                     "sourceRef": {"kind": "HelmRepository", "name": "bitnami",
                                                   "namespace": "flux-system"}}},
                  "install": {"timeout": "25m", "remediation": {"retries": 3}},
                  "upgrade": {"timeout": "25m", "remediation": {"retries": 3}},
                  "values": {"a": {"b": [2], "y": None}, "z": 1}}},
    ),
    (
        OCIRepository(metadata=META, spec=OCIRepositorySpec(interval="5m", url="oci://r/c",
                                                            ref=OCIRepositoryRef(tag="1.0.0"))),
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "metadata": META_JSON,
         "spec": {"interval": "5m", "url": "oci://r/c", "ref": {"tag": "1.0.0"}}},
    ),
    (
        Ingress(metadata=META, spec=IngressSpec(
            ingress_class_name="nginx", tls=[IngressTLS(hosts=["h.example"], secret_name="p-tls")],
            rules=[IngressRule(host="h.example", http=HTTPIngressRuleValue(
                paths=[HTTPIngressPath(path="/", path_type="Prefix", backend=BACKEND)]))])),
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": META_JSON,
         "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["h.example"], "secretName": "p-tls"}],
                  "rules": [{"host": "h.example", "http": {"paths": [
                      {"path": "/", "pathType": "Prefix",
                       "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}},
    ),
    (
        DNSEndpoint(metadata=META, spec=DNSEndpointSpec(endpoints=[
            Endpoint(dns_name="h.example", record_type="CNAME", record_ttl=60, targets=["lb.example"])])),
        {"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint", "metadata": META_JSON,
         "spec": {"endpoints": [{"dnsName": "h.example", "recordType": "CNAME", "recordTTL": 60,
                                 "targets": ["lb.example"]}]}},
    ),
]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    CASES,
    ids=[
        "a Kustomization with sops decryption",
        "a Kustomization with a target namespace and no decryption leaves the unset fields out",
        "a HelmRelease from a HelmRepository chart, values keys sorted and nulls kept",
        "an OCIRepository",
        "an Ingress",
        "a DNSEndpoint spells recordTTL as external-dns does",
    ],
)
def test_a_manifest_is_written_as_its_api_documents_it(manifest: Any, expected: dict[str, Any]) -> None:
    assert as_json(manifest) == expected


@pytest.mark.parametrize(
    ("manifest", "expected"),
    CASES,
    ids=[f"a {type(m).__name__} writes the apiVersion and kind of its RESOURCE" for m, _ in CASES],
)
def test_api_version_and_kind_are_those_of_the_resource(manifest: Any, expected: dict[str, Any]) -> None:
    resource = type(manifest).RESOURCE
    assert (resource.api_version, resource.kind) == (expected["apiVersion"], expected["kind"])
