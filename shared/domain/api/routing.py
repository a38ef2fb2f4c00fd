"""``spec.routing``: hostnames, backend and the stable-name claim.

— docs/wire-format.md#routing (host names: docs/wire-format.md#hostnames).
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.grammar import DnsLabelInList
from shared.domain.api.wire import Int32, UInt16, WireStruct

__all__ = ["RoutingBackend", "RoutingHostname", "RoutingSpec"]


class RoutingHostname(WireStruct):
    """One hostname: ``<app>.<instance or ephemeral id>.<cluster>.<location>.<domain>``."""

    app: DnsLabelInList
    """A DNS label."""
    instance: str | None = None
    """Fixed instance label; empty counts as unset (the ephemeral id is used)."""
    cluster: DnsLabelInList | None = None
    """Absent → the reconciler's configured cluster."""

    @property
    def is_named(self) -> bool:
        """``instance`` is set and non-empty."""
        return bool(self.instance)


class RoutingBackend(WireStruct):
    """Service the Ingress points at. ``ingressAnnotations`` is left out when empty."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"ingress_annotations"})

    service: str
    """Name of the Service (in the Process's namespace) that receives the traffic."""
    port: UInt16
    """Port of the Service, 1–65535."""
    tls_issuer: str | None = None
    """cert-manager ClusterIssuer; absent → ``letsencrypt-prod``."""
    ingress_annotations: dict[str, str] = {}
    """Annotations added to the rendered Ingress: name → value. Default empty."""


class RoutingSpec(WireStruct):
    """Host names to route to a Service of this Process, with Ingress and DNS records (``spec.routing``)."""

    hostnames: list[RoutingHostname] = []
    """Host names to route to the backend; each becomes an Ingress host and DNS record. Default: none."""
    backend: RoutingBackend
    stable_name_claim: bool = False
    """Compete for the unprefixed ``<app>.<cluster>…`` name (ProcessTable claims)."""
    priority: Int32 = 0
    """Higher wins a claim; negative allowed."""

    @property
    def has_hostnames(self) -> bool:
        return bool(self.hostnames)

    def emitted_fqdn_count(self, claim_held: bool) -> int:
        """``len(hostnames) × (2 if claim_held else 1)``."""
        return len(self.hostnames) * (2 if claim_held else 1)
