"""Render a Process into the child manifests the executor server-side applies.

What each intent and the routing spec render, and the ownership stamps every child carries:
docs/behaviour.md#rendering (exactly one controller ownerReference, no ``/`` in a label value).

Pure: no I/O. :func:`render_children` returns typed manifests (:data:`Manifest`,
from :mod:`shared.domain.manifests`) with ``apiVersion``, ``kind``, ``metadata.name`` and
``metadata.namespace`` set, in apply order. :data:`RENDERED_KINDS` lists the kinds it can emit:
the reconciler watches exactly those.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from blake3 import blake3

from reconciler.children import ChildRef, is_flux_resource
from reconciler.claims import claim_key
from shared.domain import annotations as ann
from shared.domain import labels
from shared.domain.api.encapsulates import EncapsulationMode
from shared.domain.api.intent import AplicacaoIntent, FluxIntent
from shared.domain.api.process import FluxResourceRef, Process
from shared.domain.api.routing import RoutingHostname, RoutingSpec
from shared.domain.duration import DurationError, parse_duration_ns, to_go_duration
from shared.domain.group import API_VERSION
from shared.domain.hostnames import (
    DEFAULT_FLEET_CLUSTER,
    DEFAULT_FLEET_DOMAIN,
    DEFAULT_FLEET_LOCATION,
    HostnameError,
    hostname_cluster,
)
from shared.domain.hostnames import fqdn as domain_fqdn
from shared.domain.identity import ephemeral_id
from shared.domain.manifests.batch import Job
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
from shared.domain.sharding import shard_labels
from shared.kube.client import Resource
from shared.kube.meta import ObjectMeta, OwnerReference, namespace_of

__all__ = [
    "FIELD_MANAGER",
    "RENDERED_KINDS",
    "IntentNotSupported",
    "Manifest",
    "RenderError",
    "RoutingConfig",
    "flux_resource_refs",
    "manifest_ref",
    "owned_metadata",
    "process_label_value",
    "render_children",
]

FIELD_MANAGER: Final = "tatara-reconciler"
"""Server-side apply field manager and the ``managed-by`` value (docs/wire-format.md#field-managers)."""

Manifest = Kustomization | HelmRelease | OCIRepository | Ingress | DNSEndpoint
"""Every kind :func:`render_children` can emit."""

RENDERED_KINDS: Final[tuple[Resource, ...]] = tuple(kind.RESOURCE for kind in typing.get_args(Manifest))
"""The resources of :data:`Manifest`, in that order: the child kinds the reconciler watches, and deletes at Reaped."""

_GO_DURATION: Final = re.compile(r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$")
_DEFAULT_INSTALL_TIMEOUT: Final = "25m"


class IntentNotSupported(Exception):
    """The intent variant is one this controller does not render: nix, lisp, container, guest."""

    def __init__(self, intent: str) -> None:
        self.intent = intent
        super().__init__(f"intent {intent!r} is not supported: only 'flux' and 'aplicacao' are rendered")


class RenderError(ValueError):
    """The spec cannot be rendered: an invalid routing label, a reserved app, no Process uid."""


@dataclass(frozen=True)
class RoutingConfig:
    """Fleet settings for routing (docs/wire-format.md#hostnames): ``TATARA_FLEET_*`` and
    ``--dns-lb-target`` (DNSEndpoints are left out when it is empty)."""

    cluster: str = DEFAULT_FLEET_CLUSTER
    location: str = DEFAULT_FLEET_LOCATION
    domain: str = DEFAULT_FLEET_DOMAIN
    dns_lb_target: str = ""


# ── naming and metadata ────────────────────────────────────────────────────────


def process_label_value(namespace: str, name: str) -> str:
    """A legal label value naming the Process: ``<namespace>.<name>``.

    (A ``<ns>/<name>`` value would be rejected in a label.) A namespace has no dots, so the first
    ``.`` splits it back. Over 63 characters the value is cut to 54 and suffixed
    ``-<8 hex of BLAKE3(ns/name)>`` so it stays unique.
    """
    value = f"{namespace}.{name}"
    if len(value) <= 63:
        return value
    digest = blake3(f"{namespace}/{name}".encode()).hexdigest()[:8]
    return f"{value[:54].rstrip('-_.')}-{digest}"


def _name(process: Process) -> str:
    if not process.metadata.name:
        raise RenderError("Process has no metadata.name")
    return process.metadata.name


@dataclass(frozen=True)
class _Owner:
    """What every child of one Process carries: its ownerReference and its stamp annotations."""

    process: Process
    reference: OwnerReference
    stamps: Mapping[str, str]

    def metadata(self, name: str, annotations: Mapping[str, str] | None = None,
                 labels: Mapping[str, str] | None = None) -> ObjectMeta:
        """A child's metadata: in the Process's namespace, ``annotations`` under the stamps (which win), and
        the Process's shard label, so a Flux shard of the same name reconciles it (docs/architecture.md#sharding)."""
        return ObjectMeta(name=name, namespace=namespace_of(self.process),
                          annotations={**(annotations or {}), **self.stamps},
                          labels={**(labels or {}), **shard_labels(self.process.metadata.labels)},
                          owner_references=[self.reference])


def _owner(process: Process, owner_uid: str) -> _Owner:
    """The ownerReference (controller, blockOwnerDeletion) and the stamps: ``managed-by``, ``process``, and
    ``pid``, ``content-hash``, ``generation``, ``attestation-root`` when set in status (the last two are
    the *previous* attestation's)."""
    name, namespace = _name(process), namespace_of(process)
    reference = OwnerReference(api_version=API_VERSION, kind="Process", name=name, uid=owner_uid,
                               controller=True, block_owner_deletion=True)
    stamps = {ann.MANAGED_BY: FIELD_MANAGER, ann.PROCESS: ann.qualified_ref(namespace, name)}
    status = process.status
    if status is not None:
        if status.pid:
            stamps[ann.PID] = status.pid
        if status.identity is not None:
            stamps[ann.CONTENT_HASH] = status.identity.content_hash
        if status.attestation is not None:
            stamps[ann.GENERATION] = str(status.attestation.generation)
            stamps[ann.ATTESTATION_ROOT] = status.attestation.composed_root
    return _Owner(process, reference, stamps)


def owned_metadata(process: Process, owner_uid: str, name: str, *,
                   labels: Mapping[str, str] | None = None) -> ObjectMeta:
    """The metadata every rendered child carries (the one controller ownerReference, the stamp
    annotations), for a child rendered outside :func:`render_children` (an export Job).

    Raises:
        RenderError: no ``owner_uid``, or the Process has no name.
    """
    if not owner_uid:
        raise RenderError("Process has no metadata.uid; cannot set an ownerReference")
    return _owner(process, owner_uid).metadata(name, labels=labels)


# ── intents ────────────────────────────────────────────────────────────────────


def _kustomization(owner: _Owner, flux: FluxIntent) -> Kustomization:
    """A ``flux`` intent: one Kustomization named after the Process."""
    return Kustomization(
        metadata=owner.metadata(_name(owner.process)),
        spec=KustomizationSpec(
            interval="1m",
            path=flux.path,
            prune=True,
            source_ref=CrossNamespaceSourceReference(
                kind="GitRepository", name=flux.git_repository,
                namespace=flux.git_repository_namespace or "flux-system"),
            target_namespace=flux.target_namespace or None,
            decryption=(Decryption(provider="sops", secret_ref=LocalObjectReference(name="sops-age"))
                        if flux.decrypt_sops else None),
        ),
    )


def _install_timeout(value: str | None) -> str:
    """``installTimeout`` or ``25m``; a humantime value Flux's Go pattern rejects (``1h 30m``)
    is rewritten as a Go duration (docs/divergences.md#render-installtimeout)."""
    text = value or _DEFAULT_INSTALL_TIMEOUT
    if _GO_DURATION.match(text):
        return text
    try:
        return to_go_duration(parse_duration_ns(text))
    except DurationError as err:
        raise RenderError(f"intent.aplicacao.installTimeout {text!r}: {err}") from None


def _values(app: AplicacaoIntent) -> dict[str, object]:
    """The Helm values: the overlay object (``{}`` for null, a non-object wrapped as ``_overlay``), then ``profile``."""
    overlay: object = app.values_overlay
    values: dict[str, object]
    if overlay is None:
        values = {}
    elif isinstance(overlay, dict):
        values = dict(overlay)
    else:
        values = {"_overlay": overlay}
    if app.profile:
        values["profile"] = app.profile
    return values


def _adopt_annotations(process: Process) -> dict[str, str]:
    """Adopt-mode annotations for aplicacao children."""
    enc = process.spec.encapsulates
    if enc is None or enc.mode is not EncapsulationMode.ADOPT:
        return {}
    out = {ann.ENCAPSULATION_MODE: EncapsulationMode.ADOPT.value}
    populated = enc.kind.populated()
    if len(populated) == 1 and enc.kind.existing_helm_release is not None:
        existing = enc.kind.existing_helm_release
        out[ann.ADOPTED_RELEASE] = f"{existing.namespace}/{existing.release_name}"
    return out


def _aplicacao(owner: _Owner, app: AplicacaoIntent) -> list[Manifest]:
    """An ``aplicacao`` intent: [OCIRepository, HelmRelease] for ``oci://`` charts, else [HelmRelease]."""
    process = owner.process
    name, namespace = _name(process), namespace_of(process)
    annotations = _adopt_annotations(process)
    docs: list[Manifest] = []
    chart_ref: CrossNamespaceSourceReference | None = None
    chart: HelmChartTemplate | None = None
    if app.chart_ref.startswith("oci://"):
        docs.append(OCIRepository(
            metadata=owner.metadata(name, annotations),
            spec=OCIRepositorySpec(interval="5m", url=app.chart_ref, ref=OCIRepositoryRef(tag=app.version)),
        ))
        chart_ref = CrossNamespaceSourceReference(kind="OCIRepository", name=name, namespace=namespace)
    else:
        repo, sep, chart_name = app.chart_ref.partition("/")
        if not sep:
            repo, chart_name = "default", app.chart_ref
        chart = HelmChartTemplate(spec=HelmChartTemplateSpec(
            chart=chart_name, version=app.version,
            source_ref=CrossNamespaceSourceReference(kind="HelmRepository", name=repo, namespace="flux-system")))
    action = ReleaseAction(timeout=_install_timeout(app.install_timeout), remediation=Remediation(retries=3))
    docs.append(HelmRelease(
        metadata=owner.metadata(name, annotations),
        spec=HelmReleaseSpec(
            interval="5m",
            release_name=app.release_name or name,
            target_namespace=app.target_namespace or namespace,
            chart_ref=chart_ref,
            chart=chart,
            install=action,
            upgrade=action,
            values=_values(app),
        ),
    ))
    return docs


def _intent_children(owner: _Owner) -> list[Manifest]:
    process = owner.process
    enc = process.spec.encapsulates
    if enc is not None and not enc.mode.emits_workload:
        return []  # Observe
    intent = process.spec.intent
    kind = intent.kind().value  # raises VariantError for zero or several variants
    if intent.flux is not None:
        return [_kustomization(owner, intent.flux)]
    if intent.aplicacao is not None:
        return _aplicacao(owner, intent.aplicacao)
    raise IntentNotSupported(kind)


# ── routing ───────────────────────────────────────────────────────────────────


def _fqdn(app: str, eph: str | None, cluster: str, cfg: RoutingConfig) -> str:
    """``<app>[.<eph>].<cluster>.<location>.<domain>`` (docs/wire-format.md#hostnames); the domain's
    :func:`shared.domain.hostnames.fqdn`, its error as a :class:`RenderError` with the same text."""
    try:
        return domain_fqdn(app, eph, cluster, cfg.location, cfg.domain)
    except HostnameError as err:
        raise RenderError(str(err)) from None


def _routing_pair(owner: _Owner, routing: RoutingSpec, host: RoutingHostname, *, form: str, suffix: str,
                  fqdn: str, cfg: RoutingConfig) -> list[Manifest]:
    """The Ingress for ``fqdn`` and, with a ``--dns-lb-target``, its CNAME DNSEndpoint."""
    process = owner.process
    name, namespace = _name(process), namespace_of(process)
    ingress_name = f"{name}-{host.app}-{suffix}"
    route_labels = {
        labels.MANAGED_BY: FIELD_MANAGER,
        labels.PROCESS: process_label_value(namespace, name),
        labels.APP: host.app,
        labels.ROUTING_FORM: form,
    }
    ingress_ann = {ann.ROUTING_FORM: form, **routing.backend.ingress_annotations}
    ingress_ann["cert-manager.io/cluster-issuer"] = routing.backend.tls_issuer or "letsencrypt-prod"
    backend = IngressBackend(service=IngressServiceBackend(
        name=routing.backend.service, port=ServiceBackendPort(number=routing.backend.port)))
    docs: list[Manifest] = [Ingress(
        metadata=owner.metadata(ingress_name, ingress_ann, route_labels),
        spec=IngressSpec(
            ingress_class_name="nginx",
            tls=[IngressTLS(hosts=[fqdn], secret_name=f"{ingress_name}-tls")],
            rules=[IngressRule(host=fqdn, http=HTTPIngressRuleValue(
                paths=[HTTPIngressPath(path="/", path_type="Prefix", backend=backend)]))],
        ),
    )]
    if cfg.dns_lb_target:
        docs.append(DNSEndpoint(
            metadata=owner.metadata(f"{ingress_name}-dns", labels=route_labels),
            spec=DNSEndpointSpec(endpoints=[Endpoint(dns_name=fqdn, record_type="CNAME", record_ttl=60,
                                                     targets=[cfg.dns_lb_target])]),
        ))
    return docs


def _routing_children(owner: _Owner, cfg: RoutingConfig, stable_keys: AbstractSet[str]) -> list[Manifest]:
    process = owner.process
    routing = process.spec.routing
    if routing is None:
        return []
    fallback: str | None = None
    docs: list[Manifest] = []
    for host in routing.hostnames:
        cluster = hostname_cluster(host, cfg.cluster)
        if host.instance:
            eph = host.instance
        else:
            fallback = fallback or ephemeral_id(process.spec)
            eph = fallback
        fqdn = _fqdn(host.app, eph, cluster, cfg)
        docs += _routing_pair(owner, routing, host, form="instance", suffix=eph, fqdn=fqdn, cfg=cfg)
        if routing.stable_name_claim and claim_key(host, cfg.cluster) in stable_keys:
            stable = _fqdn(host.app, None, cluster, cfg)
            docs += _routing_pair(owner, routing, host, form="stable", suffix="stable", fqdn=stable, cfg=cfg)
    return docs


def render_children(
    process: Process,
    *,
    owner_uid: str,
    routing: RoutingConfig | None = None,
    stable_keys: AbstractSet[str] = frozenset(),
) -> list[Manifest]:
    """The child manifests of ``process`` in apply order: intent children, then routing children.

    Every manifest is in the Process's namespace, has exactly one controller ownerReference to the
    Process, and the stamp annotations (``pid``, ``content-hash``, ``generation``,
    ``attestation-root`` only when set in status).

    Args:
        owner_uid: the Process's ``metadata.uid`` (required: an ownerReference needs it).
        routing: fleet settings for ``spec.routing``; defaults to :class:`RoutingConfig`.
        stable_keys: the claims keys (``<cluster>/<app>``) this Process holds: each hostname whose key is
            among them also renders its stable pair (docs/behaviour.md#stable-name-claims).

    Raises:
        IntentNotSupported: nix, lisp, container or guest intent (outside Observe mode).
        VariantError: the intent has zero or several variants.
        RenderError: no uid, an invalid routing label or install timeout.
    """
    if not owner_uid:
        raise RenderError("Process has no metadata.uid; cannot set an ownerReference")
    owner = _owner(process, owner_uid)
    return [*_intent_children(owner), *_routing_children(owner, routing or RoutingConfig(), stable_keys)]


# ── refs of rendered children ────────────────────────────────────────────────


def manifest_ref(manifest: Manifest | Job) -> ChildRef:
    """The ref of a rendered manifest or export Job (a missing namespace reads as ``default``)."""
    meta = manifest.metadata
    return ChildRef(manifest.api_version, manifest.kind, meta.namespace or "default", meta.name or "")


def flux_resource_refs(manifests: Sequence[Manifest], now: datetime) -> list[FluxResourceRef]:
    """``status.fluxResources`` after applying ``manifests``: the Flux children in order,
    ``ready: false``, ``message: "applied; awaiting reconciliation"``."""
    out = []
    for manifest in manifests:
        ref = manifest_ref(manifest)
        if is_flux_resource(ref):
            out.append(FluxResourceRef(api_version=ref.api_version, kind=ref.kind, name=ref.name,
                                       namespace=ref.namespace, ready=False,
                                       message="applied; awaiting reconciliation", last_check=now))
    return out
