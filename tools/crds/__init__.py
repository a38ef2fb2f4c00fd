"""The CRDs the product installs: tatara's own (generated from the models) and schema-only copies
of the Flux and external-dns CRDs it renders (``third_party/``, written by ``python -m tools.strip_crds``),
and :func:`install_crds`, the one way ``tatara up``, the tests and the benchmarks put CRDs on a cluster."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import yaml

from shared.kube.client import CUSTOM_RESOURCE_DEFINITIONS, KubeClient, Resource
from shared.kube.errors import ApiError, Conflict
from tools.crd import crd_document, render_yaml, tatara_resources, tatara_union_rule
from tools.wait import wait_for

THIRD_PARTY_CRDS = Path(__file__).resolve().parent / "third_party"
"""Schema-only Flux (HelmRelease, Kustomization, OCIRepository, GitRepository, HelmRepository) and
DNSEndpoint CRDs."""

NOT_YET_SERVED = (0, 404, 429, 503)
"""LIST answers of a kind whose CRD is Established but not yet served: right after ``Established`` the
API server may still answer 404, or 429/503 "storage is (re)initializing"; 0 is no answer within
:data:`PROBE_TIMEOUT` (a fresh API server on a loaded machine once took over 30 s to answer the first LIST
of a new kind, while its watch cache started)."""

PROBE_TIMEOUT = 10.0
"""Seconds one Established / listable probe may take; a slower one counts as "not yet" and is retried until
:func:`install_crds`'s deadline, so the deadline, not one stuck request, decides."""


def tatara_crds() -> list[dict[str, Any]]:
    """The four tatara CRDs (Process, ProcessTable, EphemeralPool, EphemeralAllocation)."""
    return [crd_document(r, unions=tatara_union_rule) for r in tatara_resources()]


def third_party_crds() -> list[dict[str, Any]]:
    """The Flux and DNSEndpoint schema CRDs, in file-name order."""
    return [doc for path in sorted(THIRD_PARTY_CRDS.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def all_crds() -> list[dict[str, Any]]:
    """Every CRD ``tatara up`` installs: tatara's first, then the third-party schemas."""
    return tatara_crds() + third_party_crds()


def render_all() -> str:
    """Every CRD as one multi-document YAML stream (what ``tatara crds`` prints)."""
    return "".join(f"---\n{render_yaml(doc)}" for doc in all_crds())


def served_resource(crd: dict[str, Any]) -> Resource:
    """The endpoint of a CRD document's kind, at its first served version."""
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served", True))
    return Resource(spec["group"], version, spec["names"]["plural"], spec["names"]["kind"],
                    namespaced=spec["scope"] == "Namespaced")


async def install_crds(client: KubeClient, docs: Iterable[dict[str, Any]], within: float = 60.0) -> None:
    """Create (or replace) each CRD in ``docs``, then wait until each is ``Established`` and its kind listable.

    Raises:
        TimeoutError: a CRD was not Established, or its kind not listable, within ``within`` seconds.
        shared.kube.errors.ApiError: the API server refused a CRD.
    """
    docs = list(docs)
    for doc in docs:
        await _create_or_replace(client, doc)
    for doc in docs:
        name = doc["metadata"]["name"]
        await wait_for(partial(_established, client, name), timeout=within, what=f"CRD {name} Established")
    for doc in docs:
        resource = served_resource(doc)
        await wait_for(partial(_listable, client, resource), timeout=within,
                       what=f"{resource.plural} to be listable")


async def _create_or_replace(client: KubeClient, doc: dict[str, Any]) -> None:
    name = doc["metadata"]["name"]
    try:
        await client.create(CUSTOM_RESOURCE_DEFINITIONS, doc)
    except Conflict:
        current = msgspec.json.decode(await client.get(CUSTOM_RESOURCE_DEFINITIONS, name))
        body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        await client.replace(CUSTOM_RESOURCE_DEFINITIONS, name, body)


async def _established(client: KubeClient, name: str) -> bool:
    try:
        body = await client.request("GET", CUSTOM_RESOURCE_DEFINITIONS.path(None, name),
                                    request_timeout=PROBE_TIMEOUT)
    except ApiError as err:
        if err.status == 0:  # no answer in time: ask again
            return False
        raise
    crd = msgspec.json.decode(body)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


async def _listable(client: KubeClient, resource: Resource) -> bool:
    try:
        await client.list(resource, limit=1, request_timeout=PROBE_TIMEOUT)
    except ApiError as err:
        if err.status in NOT_YET_SERVED:
            return False
        raise
    return True
