"""The routing objects tatara renders: a ``networking.k8s.io/v1`` Ingress and an external-dns DNSEndpoint.

Only the fields tatara sets are declared, named and nested as the Kubernetes API reference
(Ingress) and external-dns's ``externaldns.k8s.io/v1alpha1`` CRD write them. ``apiVersion`` and
``kind`` come from :mod:`shared.domain.resources`. What tatara puts in each field:
docs/behaviour.md "Ingress and DNSEndpoint".
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from shared.domain.api.wire import WireStruct
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES
from shared.kube.client import Resource
from shared.kube.meta import ObjectMeta

__all__ = [
    "DNSEndpoint",
    "DNSEndpointSpec",
    "Endpoint",
    "HTTPIngressPath",
    "HTTPIngressRuleValue",
    "Ingress",
    "IngressBackend",
    "IngressRule",
    "IngressServiceBackend",
    "IngressSpec",
    "IngressTLS",
    "ServiceBackendPort",
]


# ── networking.k8s.io/v1 Ingress ─────────────────────────────────────────────


class ServiceBackendPort(WireStruct):
    """The Service port, by number."""

    number: int


class IngressServiceBackend(WireStruct):
    """A Service (by name) and its port."""

    name: str
    port: ServiceBackendPort


class IngressBackend(WireStruct):
    """Where matching requests go: a Service."""

    service: IngressServiceBackend


class HTTPIngressPath(WireStruct):
    """One path of a rule: ``path_type`` is ``Prefix``, ``Exact`` or ``ImplementationSpecific``."""

    path: str
    path_type: str
    backend: IngressBackend


class HTTPIngressRuleValue(WireStruct):
    """The HTTP paths of a rule."""

    paths: list[HTTPIngressPath]


class IngressRule(WireStruct):
    """Requests for ``host`` and their paths."""

    host: str
    http: HTTPIngressRuleValue


class IngressTLS(WireStruct):
    """TLS for ``hosts`` with the certificate in Secret ``secret_name``."""

    hosts: list[str]
    secret_name: str


class IngressSpec(WireStruct):
    """``spec`` of an Ingress."""

    ingress_class_name: str
    tls: list[IngressTLS]
    rules: list[IngressRule]


class Ingress(WireStruct):
    """A ``networking.k8s.io/v1`` Ingress."""

    RESOURCE: ClassVar[Resource] = INGRESSES

    api_version: str = INGRESSES.api_version
    kind: str = INGRESSES.kind
    metadata: ObjectMeta
    spec: IngressSpec


# ── externaldns.k8s.io/v1alpha1 DNSEndpoint ──────────────────────────────────


class Endpoint(WireStruct):
    """One DNS record: ``record_ttl`` in seconds (written ``recordTTL``, as external-dns spells it)."""

    dns_name: str
    record_type: str
    record_ttl: int = msgspec.field(name="recordTTL")
    targets: list[str]


class DNSEndpointSpec(WireStruct):
    """``spec`` of a DNSEndpoint: the records external-dns maintains."""

    endpoints: list[Endpoint]


class DNSEndpoint(WireStruct):
    """An ``externaldns.k8s.io/v1alpha1`` DNSEndpoint."""

    RESOURCE: ClassVar[Resource] = DNS_ENDPOINTS

    api_version: str = DNS_ENDPOINTS.api_version
    kind: str = DNS_ENDPOINTS.kind
    metadata: ObjectMeta
    spec: DNSEndpointSpec
