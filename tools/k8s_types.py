"""Kubernetes types for the charts' values schemas, extracted from the Kubernetes release we test.

``python -m tools.k8s_types [--check]`` reads ``api/openapi-spec/swagger.json`` of
``k8s.io/kubernetes@<KUBERNETES_VERSION>`` (the module ``tatara control-plane build`` downloads, found
in the Go module cache) and writes :data:`DEFINITIONS_FILE`: the definitions in :data:`ROOTS` and every
definition they reference, as JSON-schema draft-07, **closed** (``additionalProperties: false`` on every
object with properties), descriptions dropped. ``tools.chart_schema`` reads that checked-in file, so
generating the values schemas needs neither Go nor the network.

Conversions: ``$ref`` kept (``#/definitions/<name>``); ``Quantity`` → a string or a number (``cpu: 1``);
``IntOrString`` → a string or an integer; ``format`` and ``x-kubernetes-*`` dropped. ``requests`` and
``limits`` of ResourceRequirements also get ``propertyNames``: a standard resource name (``cpu``,
``memory``, ``ephemeral-storage``, ``hugepages-<size>``) or a domain-qualified one (``nvidia.com/gpu``),
the names the API server accepts for a container — so ``limits.memroy`` is refused by ``helm lint``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tools.controlplane.build import KUBERNETES_VERSION
from tools.generated import generator_main

ROOT = Path(__file__).resolve().parents[1]

DEFINITIONS_FILE = ROOT / "tools" / "data" / f"kubernetes-{KUBERNETES_VERSION}-values-types.json"
"""The checked-in extract (generated; a unit test fails when it drifts from the swagger, where present)."""

CORE = "io.k8s.api.core.v1."

ROOTS: dict[str, str] = {
    "resources": CORE + "ResourceRequirements",
    "securityContext": CORE + "SecurityContext",
    "podSecurityContext": CORE + "PodSecurityContext",
    "affinity": CORE + "Affinity",
    "toleration": CORE + "Toleration",
    "topologySpreadConstraint": CORE + "TopologySpreadConstraint",
    "imagePullSecret": CORE + "LocalObjectReference",
    "envVar": CORE + "EnvVar",
    "policyRule": "io.k8s.api.rbac.v1.PolicyRule",
}
"""values key (or list item) → the Kubernetes definition it is."""

RESOURCE_NAME_PATTERN = (
    r"^(cpu|memory|ephemeral-storage|hugepages-[0-9]+[A-Za-z]*|[a-z0-9.-]+\.[a-z]+/[-A-Za-z0-9_.]+)$"
)
"""Container resource names the API server accepts: standard ones, or ``<domain>/<name>``."""

_SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": ["string", "number"]},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": ["string", "integer"]},
}

_KEEP = ("type", "enum", "required", "minimum", "maximum")


def swagger_path(version: str = KUBERNETES_VERSION) -> Path:
    """Where the Go module cache keeps the release's swagger.json (it may not exist)."""
    cache = os.environ.get("GOMODCACHE")
    if not cache:
        try:
            cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True,
                                   timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            cache = str(Path.home() / "go" / "pkg" / "mod")
    return Path(cache) / f"k8s.io/kubernetes@{version}" / "api" / "openapi-spec" / "swagger.json"


def _convert(node: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].removeprefix("#/definitions/")
        wanted.append(name)
        return {"$ref": f"#/definitions/{name}"}
    out: dict[str, Any] = {k: node[k] for k in _KEEP if k in node}
    if "properties" in node:
        out["type"] = "object"
        out["additionalProperties"] = False
        out["properties"] = {k: _convert(v, wanted) for k, v in sorted(node["properties"].items())}
    elif isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _convert(node["additionalProperties"], wanted)
    if isinstance(node.get("items"), dict):
        out["items"] = _convert(node["items"], wanted)
    return out


def extract(swagger: dict[str, Any]) -> dict[str, Any]:
    """The closed draft-07 definitions of :data:`ROOTS` and everything they reference, sorted by name."""
    source: dict[str, Any] = swagger["definitions"]
    out: dict[str, Any] = {}
    wanted = list(ROOTS.values())
    while wanted:
        name = wanted.pop()
        if name in out:
            continue
        out[name] = dict(_SPECIAL[name]) if name in _SPECIAL else _convert(source[name], wanted)
    requirements = out[CORE + "ResourceRequirements"]["properties"]
    for key in ("limits", "requests"):
        requirements[key]["propertyNames"] = {"pattern": RESOURCE_NAME_PATTERN}
    return dict(sorted(out.items()))


def definitions() -> dict[str, Any]:
    """The checked-in extract."""
    loaded: dict[str, Any] = json.loads(DEFINITIONS_FILE.read_text())
    return loaded


def render(swagger: dict[str, Any]) -> str:
    return json.dumps(extract(swagger), indent=1, sort_keys=False) + "\n"


def files() -> dict[Path, str]:
    path = swagger_path()
    if not path.is_file():
        raise SystemExit(f"{path} not found: run `tatara control-plane build` (it downloads k8s.io/kubernetes)")
    return {DEFINITIONS_FILE: render(json.loads(path.read_text()))}


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.k8s_types", __doc__, files, argv)


if __name__ == "__main__":
    sys.exit(main())
