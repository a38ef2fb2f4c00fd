"""``tatara up`` on a cluster it did not start (``--kubeconfig`` / ``$KUBECONFIG``): what keeps it safe there.

On such a cluster ``tatara up`` (docs/architecture.md#tatara-up-on-a-real-cluster):

- never overwrites a CRD: it installs only the CRDs that are missing (:func:`install_missing_crds`), after
  naming them, and leaves every existing one — the cluster's real Flux CRDs above all — as it is;
- starts no stand-in (neither the Flux stand-in, which would mark every Flux object Ready, nor the Job
  runner) and none of the local message sinks;
- refuses to start when a tatara controller already runs there (:func:`running_controllers`): a Lease of
  ours (the charts' ``leaderElection.leaseName`` defaults, :data:`OUR_LEASES`) held by someone in any
  namespace, or a Deployment labelled as one of the charts' controllers with replicas; ``--force`` overrides.

The decisions (:func:`held`, :func:`missing_crds`) are pure; the rest reads the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import msgspec

from shared.kube.client import CUSTOM_RESOURCE_DEFINITIONS, LEASES, KubeClient, Resource
from shared.kube.errors import Forbidden, NotFound
from tools.crds import install_crds

__all__ = ["CONTROLLER_SELECTOR", "DEPLOYMENTS", "OUR_LEASES", "held", "install_missing_crds", "missing_crds",
           "running_controllers"]

OUR_LEASES: Final = ("tatara-reconciler", "tatara-pool-reconciler")
"""Lease names of the two controllers (the charts' ``leaderElection.leaseName`` defaults)."""
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")
CONTROLLER_SELECTOR: Final = "app.kubernetes.io/part-of=tatara,app.kubernetes.io/component=controller"
"""Labels the charts put on both controllers' Deployments."""


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def held(lease: dict[str, Any], now: datetime) -> bool:
    """Whether ``lease`` has a holder whose term (``renewTime`` + ``leaseDurationSeconds``) has not run out at
    ``now``. A Lease without a holder was released; one without a readable ``renewTime`` counts as held (a
    holder is named: better refuse than run two controllers)."""
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return False
    renewed = _parse_time(spec.get("renewTime"))
    if renewed is None:
        return True
    return now < renewed + timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))


async def running_controllers(client: KubeClient, now: datetime | None = None) -> list[str]:
    """What shows that a tatara controller runs on the cluster: one line per held Lease of ours and per
    controller Deployment with replicas (empty: none). A list we are not allowed to read is a finding too
    ("cannot tell"): better refuse than run a second set of controllers blind."""
    now = now or datetime.now(UTC)
    found = []
    try:
        leases = msgspec.json.decode(await client.list(LEASES))["items"]
    except Forbidden as err:
        leases = []
        found.append(f"cannot tell: listing Leases in all namespaces is forbidden ({err})")
    for lease in leases:
        meta = lease["metadata"]
        if meta["name"] in OUR_LEASES and held(lease, now):
            found.append(f"Lease {meta['namespace']}/{meta['name']} held by {lease['spec']['holderIdentity']}")
    try:
        deployments = msgspec.json.decode(await client.list(DEPLOYMENTS, label_selector=CONTROLLER_SELECTOR))["items"]
    except NotFound:  # a cluster without apps/v1 runs no Deployment
        deployments = []
    except Forbidden as err:
        deployments = []
        found.append(f"cannot tell: listing Deployments in all namespaces is forbidden ({err})")
    for deployment in deployments:
        meta, replicas = deployment["metadata"], (deployment.get("spec") or {}).get("replicas", 1)
        if replicas:
            found.append(f"Deployment {meta['namespace']}/{meta['name']} ({replicas} replicas)")
    return found


def missing_crds(docs: Sequence[dict[str, Any]], existing: Iterable[str]) -> list[dict[str, Any]]:
    """The CRD documents among ``docs`` whose name is not in ``existing``, in order."""
    present = set(existing)
    return [doc for doc in docs if doc["metadata"]["name"] not in present]


async def install_missing_crds(client: KubeClient, docs: Sequence[dict[str, Any]],
                               announce: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """Install the CRDs of ``docs`` the cluster lacks, never touching one that exists.

    ``announce(line)`` is called with what will be installed (before) and what is kept.

    Returns:
        ``(installed names, kept names)``.
    """
    existing = [item["metadata"]["name"]
                for item in msgspec.json.decode(await client.list(CUSTOM_RESOURCE_DEFINITIONS))["items"]]
    missing = missing_crds(docs, existing)
    kept = [doc["metadata"]["name"] for doc in docs if doc not in missing]
    if kept:
        announce(f"kept {len(kept)} existing CRDs as they are (not overwritten): {', '.join(kept)}")
    if missing:
        announce(f"installing {len(missing)} missing CRDs: {', '.join(d['metadata']['name'] for d in missing)}")
        await install_crds(client, missing)
    else:
        announce("no CRD missing: nothing installed")
    return [d["metadata"]["name"] for d in missing], kept
