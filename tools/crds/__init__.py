"""The CRDs the product installs: tatara's own (generated from the models) and schema-only copies
of the Flux and external-dns CRDs it renders (``third_party/``, written by ``python -m tools.strip_crds``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tools.crd import crd_document, render_yaml, tatara_resources, tatara_union_rule

THIRD_PARTY_CRDS = Path(__file__).resolve().parent / "third_party"
"""Schema-only Flux (HelmRelease, Kustomization, OCIRepository, GitRepository, HelmRepository) and
DNSEndpoint CRDs."""


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
