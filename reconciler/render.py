"""Render a Process into the child documents the executor server-side applies.

— spec/process-reconciler.md §7 (ownership and annotations §7.1.1, Ready parsing §7.1.5,
flux §7.2, aplicacao §7.3, encapsulation §7.4, other intents §7.5, routing §7.6),
with DESIGN.md §2.3 (one controller ownerReference, no ``/`` in label values).

Pure: no I/O. ``render_children`` returns plain JSON-ready dicts with ``apiVersion``,
``kind``, ``metadata.name`` and ``metadata.namespace`` set, in apply order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from blake3 import blake3

from reconciler.decision import ChildRef, ChildState
from shared.domain import annotations as ann
from shared.domain import labels
from shared.domain.api.encapsulates import EncapsulationMode
from shared.domain.api.intent import AplicacaoIntent, FluxIntent
from shared.domain.api.process import FluxResourceRef, Process
from shared.domain.api.routing import RoutingHostname, RoutingSpec
from shared.domain.duration import DurationError, parse_duration_ns, to_go_duration
from shared.domain.group import API_VERSION
from shared.domain.identity import ephemeral_id

__all__ = [
    "DNS_ENDPOINT_API_VERSION",
    "FIELD_MANAGER",
    "FLUX_API_GROUPS",
    "HELM_RELEASE_API_VERSION",
    "INGRESS_API_VERSION",
    "KUSTOMIZATION_API_VERSION",
    "OCI_REPOSITORY_API_VERSION",
    "TERMINAL_REASONS",
    "IntentNotSupported",
    "RenderError",
    "RoutingConfig",
    "child_ref",
    "child_state",
    "flux_resource_refs",
    "is_flux_resource",
    "process_label_value",
    "render_children",
]

FIELD_MANAGER: Final = "tatara-reconciler"
"""SSA field manager and the ``managed-by`` value (spec §0.3)."""

# Pinned to the served+storage versions of tools/crds/third_party (Flux v2.x, external-dns).
KUSTOMIZATION_API_VERSION: Final = "kustomize.toolkit.fluxcd.io/v1"
HELM_RELEASE_API_VERSION: Final = "helm.toolkit.fluxcd.io/v2"
OCI_REPOSITORY_API_VERSION: Final = "source.toolkit.fluxcd.io/v1"
"""The reference writes ``v1beta2``; current Flux serves only ``v1`` (docs/divergences.md)."""
INGRESS_API_VERSION: Final = "networking.k8s.io/v1"
DNS_ENDPOINT_API_VERSION: Final = "externaldns.k8s.io/v1alpha1"

FLUX_API_GROUPS: Final = frozenset(
    {"kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"}
)
"""Children from these groups are the Process's *flux refs* (spec §2.3.3 step 3); routing is not."""

TERMINAL_REASONS: Final = frozenset({"RetriesExceeded", "InvalidChartReference", "MissingRollbackTarget"})
"""Flux ``Ready=False`` reasons that no retry will fix: the child is stalled (DESIGN §2.7)."""

_DNS_LABEL: Final = re.compile(r"[a-z0-9-]*")
_RESERVED_APPS: Final = frozenset({"auth", "cracha"})
_GO_DURATION: Final = re.compile(r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$")
_DEFAULT_INSTALL_TIMEOUT: Final = "25m"


class IntentNotSupported(Exception):
    """The intent variant is one this controller does not render (spec §7.5): nix, lisp, container, guest."""

    def __init__(self, intent: str) -> None:
        self.intent = intent
        super().__init__(f"intent {intent!r} is not supported: only 'flux' and 'aplicacao' are rendered")


class RenderError(ValueError):
    """The spec cannot be rendered: an invalid routing label, a reserved app, no Process uid."""


@dataclass(frozen=True)
class RoutingConfig:
    """Fleet settings for routing (spec §7.6, process-crd §10.1): ``TATARA_FLEET_*`` and
    ``--dns-lb-target`` (DNSEndpoints are left out when it is empty)."""

    cluster: str = "pleme-dev"
    location: str = "use1"
    domain: str = "quero.lol"
    dns_lb_target: str = ""


# ── naming helpers ─────────────────────────────────────────────────────────────


def process_label_value(namespace: str, name: str) -> str:
    """A legal label value naming the Process: ``<namespace>.<name>`` (DESIGN §2.3).

    The reference writes ``<ns>/<name>``, which the API server rejects in a label. A
    namespace has no dots, so the first ``.`` splits it back. Over 63 characters the
    value is cut to 54 and suffixed ``-<8 hex of BLAKE3(ns/name)>`` so it stays unique.
    """
    value = f"{namespace}.{name}"
    if len(value) <= 63:
        return value
    digest = blake3(f"{namespace}/{name}".encode()).hexdigest()[:8]
    return f"{value[:54].rstrip('-_.')}-{digest}"


def _ns(process: Process) -> str:
    return process.metadata.namespace or "default"


def _name(process: Process) -> str:
    if not process.metadata.name:
        raise RenderError("Process has no metadata.name")
    return process.metadata.name


def _base(api_version: str, kind: str, name: str, namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
    }


# ── intents ────────────────────────────────────────────────────────────────────


def _kustomization(process: Process, flux: FluxIntent, base_ann: dict[str, str]) -> dict[str, Any]:
    """spec §7.2."""
    spec: dict[str, Any] = {
        "interval": "1m",
        "path": flux.path,
        "prune": True,
        "sourceRef": {
            "kind": "GitRepository",
            "name": flux.git_repository,
            "namespace": flux.git_repository_namespace or "flux-system",
        },
    }
    if flux.target_namespace:
        spec["targetNamespace"] = flux.target_namespace
    if flux.decrypt_sops:
        spec["decryption"] = {"provider": "sops", "secretRef": {"name": "sops-age"}}
    doc = _base(KUSTOMIZATION_API_VERSION, "Kustomization", _name(process), _ns(process), base_ann)
    doc["spec"] = spec
    return doc


def _install_timeout(value: str | None) -> str:
    """``installTimeout`` or ``25m``; a humantime value Flux's Go pattern rejects (``1h 30m``)
    is rewritten as a Go duration (docs/divergences.md)."""
    text = value or _DEFAULT_INSTALL_TIMEOUT
    if _GO_DURATION.match(text):
        return text
    try:
        return to_go_duration(parse_duration_ns(text))
    except DurationError as err:
        raise RenderError(f"intent.aplicacao.installTimeout {text!r}: {err}") from None


def _aplicacao(process: Process, app: AplicacaoIntent, base_ann: dict[str, str]) -> list[dict[str, Any]]:
    """spec §7.3: [OCIRepository, HelmRelease] for ``oci://`` charts, else [HelmRelease]."""
    name, namespace = _name(process), _ns(process)
    overlay: Any = app.values_overlay
    values: dict[str, Any]
    if overlay is None:
        values = {}
    elif isinstance(overlay, dict):
        values = dict(overlay)
    else:
        values = {"_overlay": overlay}
    if app.profile:
        values["profile"] = app.profile

    docs: list[dict[str, Any]] = []
    spec: dict[str, Any] = {
        "interval": "5m",
        "releaseName": app.release_name or name,
        "targetNamespace": app.target_namespace or namespace,
    }
    if app.chart_ref.startswith("oci://"):
        oci = _base(OCI_REPOSITORY_API_VERSION, "OCIRepository", name, namespace, base_ann)
        oci["spec"] = {"interval": "5m", "url": app.chart_ref, "ref": {"tag": app.version}}
        docs.append(oci)
        spec["chartRef"] = {"kind": "OCIRepository", "name": name, "namespace": namespace}
    else:
        repo, sep, chart = app.chart_ref.partition("/")
        if not sep:
            repo, chart = "default", app.chart_ref
        spec["chart"] = {
            "spec": {
                "chart": chart,
                "version": app.version,
                "sourceRef": {"kind": "HelmRepository", "name": repo, "namespace": "flux-system"},
            }
        }
    timeout = _install_timeout(app.install_timeout)
    spec["install"] = {"timeout": timeout, "remediation": {"retries": 3}}
    spec["upgrade"] = {"timeout": timeout, "remediation": {"retries": 3}}
    spec["values"] = values
    release = _base(HELM_RELEASE_API_VERSION, "HelmRelease", name, namespace, base_ann)
    release["spec"] = spec
    docs.append(release)
    return docs


def _adopt_annotations(process: Process) -> dict[str, str]:
    """spec §7.4: Adopt-mode annotations for aplicacao children."""
    enc = process.spec.encapsulates
    if enc is None or enc.mode is not EncapsulationMode.ADOPT:
        return {}
    out = {ann.ENCAPSULATION_MODE: EncapsulationMode.ADOPT.value}
    populated = enc.kind.populated()
    if len(populated) == 1 and enc.kind.existing_helm_release is not None:
        existing = enc.kind.existing_helm_release
        out[ann.ADOPTED_RELEASE] = f"{existing.namespace}/{existing.release_name}"
    return out


def _intent_children(process: Process, base_ann: dict[str, str]) -> list[dict[str, Any]]:
    enc = process.spec.encapsulates
    if enc is not None and not enc.mode.emits_workload:
        return []  # Observe (§7.4)
    intent = process.spec.intent
    kind = intent.kind().value  # raises VariantError for zero or several variants (§2.3.3 step 2)
    if intent.flux is not None:
        return [_kustomization(process, intent.flux, base_ann)]
    if intent.aplicacao is not None:
        docs = _aplicacao(process, intent.aplicacao, base_ann)
        extra = _adopt_annotations(process)
        for doc in docs:
            doc["metadata"]["annotations"].update(extra)
        return docs
    raise IntentNotSupported(kind)


# ── routing (§7.6) ────────────────────────────────────────────────────────────


def _check_label(label: str, segment: str) -> None:
    """process-crd §10.2 label rules; message ``invalid DNS label "<l>" for segment <s>: <why>``."""
    reason = None
    if not 1 <= len(label.encode()) <= 63:
        reason = "must be 1–63 characters"
    elif label.startswith("-") or label.endswith("-"):
        reason = "must not start or end with a hyphen"
    elif not _DNS_LABEL.fullmatch(label):
        reason = "must contain only [a-z0-9-]"
    if reason:
        raise RenderError(f'invalid DNS label "{label}" for segment {segment}: {reason}')


def _fqdn(app: str, eph: str | None, cluster: str, cfg: RoutingConfig) -> str:
    """process-crd §10.1–§10.2, checks in the documented order."""
    _check_label(app, "app")
    if app in _RESERVED_APPS:
        raise RenderError(f'app label "{app}" is reserved for the saguão control plane')
    if eph is not None:
        _check_label(eph, "ephemeral_id")
    _check_label(cluster, "cluster")
    _check_label(cfg.location, "location")
    if not cfg.domain:
        raise RenderError('invalid DNS label "" for segment domain: must not be empty')
    for piece in cfg.domain.split("."):
        _check_label(piece, "domain")
    middle = f"{eph}." if eph is not None else ""
    return f"{app}.{middle}{cluster}.{cfg.location}.{cfg.domain}"


def _routing_pair(
    process: Process,
    routing: RoutingSpec,
    host: RoutingHostname,
    *,
    form: str,
    suffix: str,
    fqdn: str,
    cfg: RoutingConfig,
    base_ann: dict[str, str],
) -> list[dict[str, Any]]:
    name, namespace = _name(process), _ns(process)
    ingress_name = f"{name}-{host.app}-{suffix}"
    route_labels = {
        labels.MANAGED_BY: FIELD_MANAGER,
        labels.PROCESS: process_label_value(namespace, name),
        labels.APP: host.app,
        labels.ROUTING_FORM: form,
    }
    ingress_ann = {**base_ann, ann.ROUTING_FORM: form, **routing.backend.ingress_annotations}
    ingress_ann["cert-manager.io/cluster-issuer"] = routing.backend.tls_issuer or "letsencrypt-prod"
    ingress = _base(INGRESS_API_VERSION, "Ingress", ingress_name, namespace, ingress_ann)
    ingress["metadata"]["labels"] = dict(route_labels)
    ingress["spec"] = {
        "ingressClassName": "nginx",
        "tls": [{"hosts": [fqdn], "secretName": f"{ingress_name}-tls"}],
        "rules": [
            {
                "host": fqdn,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {
                                "service": {"name": routing.backend.service, "port": {"number": routing.backend.port}}
                            },
                        }
                    ]
                },
            }
        ],
    }
    docs = [ingress]
    if cfg.dns_lb_target:
        dns = _base(DNS_ENDPOINT_API_VERSION, "DNSEndpoint", f"{ingress_name}-dns", namespace, base_ann)
        dns["metadata"]["labels"] = dict(route_labels)
        dns["spec"] = {
            "endpoints": [{"dnsName": fqdn, "recordType": "CNAME", "recordTTL": 60, "targets": [cfg.dns_lb_target]}]
        }
        docs.append(dns)
    return docs


def _routing_children(
    process: Process, cfg: RoutingConfig, holds_claim: bool, base_ann: dict[str, str]
) -> list[dict[str, Any]]:
    routing = process.spec.routing
    if routing is None:
        return []
    fallback: str | None = None
    docs: list[dict[str, Any]] = []
    for host in routing.hostnames:
        cluster = host.cluster or cfg.cluster
        if host.instance:
            eph = host.instance
        else:
            fallback = fallback or ephemeral_id(process.spec)
            eph = fallback
        fqdn = _fqdn(host.app, eph, cluster, cfg)
        docs += _routing_pair(
            process, routing, host, form="instance", suffix=eph, fqdn=fqdn, cfg=cfg, base_ann=base_ann
        )
        if routing.stable_name_claim and holds_claim:
            stable = _fqdn(host.app, None, cluster, cfg)
            docs += _routing_pair(
                process, routing, host, form="stable", suffix="stable", fqdn=stable, cfg=cfg, base_ann=base_ann
            )
    return docs


# ── ownership and stamps (§7.1.1) ─────────────────────────────────────────────


def _stamp(doc: dict[str, Any], process: Process, owner_uid: str) -> None:
    meta = doc["metadata"]
    meta["ownerReferences"] = [
        {
            "apiVersion": API_VERSION,
            "kind": "Process",
            "name": _name(process),
            "uid": owner_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    stamps = meta["annotations"]
    stamps[ann.MANAGED_BY] = FIELD_MANAGER
    stamps[ann.PROCESS] = ann.qualified_ref(_ns(process), _name(process))
    status = process.status
    if status is None:
        return
    if status.pid:
        stamps[ann.PID] = status.pid
    if status.identity is not None:
        stamps[ann.CONTENT_HASH] = status.identity.content_hash
    if status.attestation is not None:
        stamps[ann.GENERATION] = str(status.attestation.generation)
        stamps[ann.ATTESTATION_ROOT] = status.attestation.composed_root


def render_children(
    process: Process,
    *,
    owner_uid: str,
    routing: RoutingConfig | None = None,
    holds_claim: bool = False,
) -> list[dict[str, Any]]:
    """The child documents of ``process`` in apply order: intent children then routing (spec §7).

    Every document has ``apiVersion``, ``kind``, ``metadata.name``/``namespace`` (the Process
    namespace), exactly one controller ownerReference to the Process, and the §7.1.1 annotations
    (``pid``, ``content-hash``, ``generation``, ``attestation-root`` only when set in status; the
    last two are the *previous* attestation's).

    Args:
        owner_uid: the Process's ``metadata.uid`` (required: an ownerReference needs it).
        routing: fleet settings for ``spec.routing``; defaults to :class:`RoutingConfig`.
        holds_claim: this Process holds a stable-name claim (spec §5.4.4).

    Raises:
        IntentNotSupported: nix, lisp, container or guest intent (outside Observe mode).
        VariantError: the intent has zero or several variants.
        RenderError: no uid, an invalid routing label or install timeout.
    """
    if not owner_uid:
        raise RenderError("Process has no metadata.uid; cannot set an ownerReference")
    base_ann = {ann.MANAGED_BY: FIELD_MANAGER, ann.PROCESS: ann.qualified_ref(_ns(process), _name(process))}
    docs = _intent_children(process, base_ann)
    docs += _routing_children(process, routing or RoutingConfig(), holds_claim, base_ann)
    for doc in docs:
        _stamp(doc, process, owner_uid)
    return docs


# ── reading children back ────────────────────────────────────────────────────


def child_ref(doc: dict[str, Any]) -> ChildRef:
    """The ref of a rendered or cached document (namespace defaults to ``default``, spec §2.3.3)."""
    meta = doc.get("metadata") or {}
    return ChildRef(
        api_version=str(doc.get("apiVersion", "")),
        kind=str(doc.get("kind", "")),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
    )


def is_flux_resource(doc_or_ref: dict[str, Any] | ChildRef) -> bool:
    """True for Flux kinds (counted in ``status.fluxResources`` and the artifact hash); False for routing."""
    api_version = doc_or_ref.api_version if isinstance(doc_or_ref, ChildRef) else str(doc_or_ref.get("apiVersion"))
    return api_version.partition("/")[0] in FLUX_API_GROUPS


def flux_resource_refs(docs: list[dict[str, Any]], now: datetime) -> list[FluxResourceRef]:
    """``status.fluxResources`` after applying ``docs`` (spec §2.3.3 step 3): Flux children in order,
    ``ready: false``, ``message: "applied; awaiting reconciliation"``."""
    out = []
    for doc in docs:
        if not is_flux_resource(doc):
            continue
        ref = child_ref(doc)
        out.append(
            FluxResourceRef(
                api_version=ref.api_version,
                kind=ref.kind,
                name=ref.name,
                namespace=ref.namespace,
                ready=False,
                message="applied; awaiting reconciliation",
                last_check=now,
            )
        )
    return out


def _conditions(doc: dict[str, Any]) -> list[dict[str, Any]]:
    status = doc.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _first(conds: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conds if c.get("type") == type_), None)


def child_state(doc: dict[str, Any]) -> ChildState:
    """Readiness of a Flux/kstatus object (spec §7.1.5, DESIGN §2.7).

    ``ready``: the first ``Ready`` condition — ``"True"`` → True, ``"False"`` → False, else None;
    None too while ``status.observedGeneration`` is behind ``metadata.generation`` (stale status).
    ``stalled``: ``Stalled=True``, or ``Ready=False`` with a reason in :data:`TERMINAL_REASONS`.
    ``reason``/``message``: from the Stalled condition when stalled, else from Ready.
    """
    conds = _conditions(doc)
    ready_cond = _first(conds, "Ready")
    stalled_cond = _first(conds, "Stalled")
    ready: bool | None = None
    if ready_cond is not None:
        ready = {"True": True, "False": False}.get(str(ready_cond.get("status")))
    status = doc.get("status") if isinstance(doc.get("status"), dict) else {}
    observed = status.get("observedGeneration") if isinstance(status, dict) else None
    generation = (doc.get("metadata") or {}).get("generation")
    if isinstance(observed, int) and isinstance(generation, int) and observed < generation:
        ready = None
    stalled = False
    source = ready_cond
    if stalled_cond is not None and stalled_cond.get("status") == "True":
        stalled, source = True, stalled_cond
    elif ready is False and ready_cond is not None and ready_cond.get("reason") in TERMINAL_REASONS:
        stalled = True
    return ChildState(
        ref=child_ref(doc),
        ready=ready,
        stalled=stalled,
        reason=str((source or {}).get("reason") or ""),
        message=str((source or {}).get("message") or ""),
        object=doc,
    )
