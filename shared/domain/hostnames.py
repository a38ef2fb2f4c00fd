"""Routing host names: ``<app>.<id>.<cluster>.<location>.<domain>`` and the stable
``<app>.<cluster>.<location>.<domain>`` — docs/wire-format.md#hostnames.

Pure functions the Process reconciler's renderer calls; texts and check order are the
reference's (its ``fmt_fqdn`` / ``fmt_fqdn_stable``).
"""

from __future__ import annotations

import re
from typing import Final

from shared.domain.api.routing import RoutingHostname
from shared.domain.rust_text import debug_str

__all__ = [
    "DEFAULT_FLEET_CLUSTER",
    "DEFAULT_FLEET_DOMAIN",
    "DEFAULT_FLEET_LOCATION",
    "RESERVED_APPS",
    "HostnameError",
    "check_label",
    "fqdn",
    "hostname_cluster",
    "hostname_id",
]

DEFAULT_FLEET_CLUSTER: Final = "pleme-dev"
"""The cluster segment of host names (``--fleet-cluster``'s default), also the cluster of claims keys."""
DEFAULT_FLEET_LOCATION: Final = "use1"
"""The location segment of host names (``--fleet-location``'s default)."""
DEFAULT_FLEET_DOMAIN: Final = "quero.lol"
"""The domain suffix of host names (``--fleet-domain``'s default)."""

RESERVED_APPS: Final = frozenset({"auth", "cracha"})
"""App labels kept for the saguão control plane."""

_DNS_LABEL: Final = re.compile(r"[a-z0-9-]*")


class HostnameError(ValueError):
    """A host name cannot be formed; the text is the reference's, e.g.
    ``invalid DNS label "Rio" for segment cluster: must contain only [a-z0-9-]``."""


def check_label(label: str, segment: str) -> None:
    """Raise :class:`HostnameError` unless ``label`` is a DNS label: 1–63 bytes, no ``-`` at either
    end, only ``[a-z0-9-]`` (checked in that order). The label is quoted as Rust's ``{:?}``."""
    reason = None
    if not 1 <= len(label.encode()) <= 63:
        reason = "must be 1–63 characters"
    elif label.startswith("-") or label.endswith("-"):
        reason = "must not start or end with a hyphen"
    elif not _DNS_LABEL.fullmatch(label):
        reason = "must contain only [a-z0-9-]"
    if reason:
        raise HostnameError(f"invalid DNS label {debug_str(label)} for segment {segment}: {reason}")


def fqdn(app: str, eph: str | None, cluster: str, location: str, domain: str) -> str:
    """``<app>.<eph>.<cluster>.<location>.<domain>``, or the stable ``<app>.<cluster>.…`` when
    ``eph`` is None. Checks, first failure raised as :class:`HostnameError`: ``app``, the reserved
    apps (``app label "<app>" is reserved for the saguão control plane``), ``eph``, ``cluster``,
    ``location``, a non-empty ``domain`` and each of its dot-separated labels."""
    check_label(app, "app")
    if app in RESERVED_APPS:
        raise HostnameError(f"app label {debug_str(app)} is reserved for the saguão control plane")
    if eph is not None:
        check_label(eph, "ephemeral_id")
    check_label(cluster, "cluster")
    check_label(location, "location")
    if not domain:
        raise HostnameError('invalid DNS label "" for segment domain: must not be empty')
    for piece in domain.split("."):
        check_label(piece, "domain")
    middle = f"{eph}." if eph is not None else ""
    return f"{app}.{middle}{cluster}.{location}.{domain}"


def hostname_cluster(host: RoutingHostname, default: str) -> str:
    """The hostname's own ``cluster`` when present — even ``""``, which then fails the label
    check — else ``default`` (the reconciler's ``--fleet-cluster``)."""
    return host.cluster if host.cluster is not None else default


def hostname_id(host: RoutingHostname, ephemeral_id: str) -> str:
    """The ``<id>`` label: the hostname's ``instance`` when non-empty, else ``ephemeral_id``."""
    return host.instance if host.instance else ephemeral_id
