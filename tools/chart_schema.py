"""Write ``values.schema.json`` of both controller charts (shared keys once, per-chart ``config``).

Usage: ``python -m tools.chart_schema [--check]`` — ``--check`` writes nothing and exits 1 when a
schema file differs from what this module generates.

Objects the chart owns are closed (``additionalProperties: false``), so a typo in a key fails
``helm lint``/``template``/``install`` with a message naming it. The Kubernetes-typed passthrough values
``resources``, ``securityContext``, ``podSecurityContext``, ``affinity``, ``tolerations`` and
``topologySpreadConstraints``, and the items of ``imagePullSecrets``, ``extraEnv`` and ``rbac.extraRules``,
are the Kubernetes release's own types (``tools.k8s_types``, closed too, under ``definitions``), so
``securityContext.readOnlyRootFilesytem`` or ``resources.limits.memroy`` is refused as well.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tools.generated import generator_main
from tools.k8s_types import ROOTS, definitions

ROOT = Path(__file__).resolve().parents[1]

_STR: dict[str, Any] = {"type": "string"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_PORT: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 65535}
_SECONDS: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
_DURATION: dict[str, Any] = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"}
_NAME: dict[str, Any] = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
_NS: dict[str, Any] = {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 63}
_NAMESPACES: dict[str, Any] = {"type": "array", "uniqueItems": True, "items": {**_NS, "minLength": 1}}
"""A list of namespace names (each given RoleBindings)."""


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def _k8s(key: str) -> dict[str, Any]:
    return {"$ref": f"#/definitions/{ROOTS[key]}"}


def _probe() -> dict[str, Any]:
    return _closed({k: {"type": "integer", "minimum": 0 if k == "initialDelaySeconds" else 1}
                    for k in ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold")})


def common_properties(lease_name: str) -> dict[str, Any]:
    """The keys both charts share."""
    return {
        "nameOverride": _STR,
        "fullnameOverride": _STR,
        "image": _closed({
            "repository": {"type": "string", "minLength": 1},
            "tag": _STR,
            "digest": {"type": "string", "pattern": r"^(sha256:[a-f0-9]{64})?$"},
            "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        }, ("repository",)),
        "imagePullSecrets": {"type": "array", "items": _k8s("imagePullSecret")},
        "replicaCount": {"type": "integer", "minimum": 0},
        # a shard name is a label value and a suffix of Deployment and Lease names: a short DNS label
        "shards": {"type": "array", "uniqueItems": True,
                   "items": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 20}},
        "dynamicSharding": _closed({"enabled": _BOOL}),
        "leaderElection": _closed({
            "enabled": _BOOL,
            "leaseName": {**_NAME, "default": lease_name},
            "namespace": _NS,
            "leaseDuration": _SECONDS,
            "renewDeadline": _SECONDS,
            "retryPeriod": _SECONDS,
            **({"tableLeaseName": _NAME} if lease_name == "tatara-reconciler" else {}),
        }),
        "watchNamespace": _NS,
        "logLevel": {"enum": ["trace", "debug", "info", "warn", "warning", "error"]},
        "healthPort": _PORT,
        "extraArgs": {"type": "array", "items": {"type": "string"}},
        "extraEnv": {"type": "array", "items": _k8s("envVar")},
        "tracing": _closed({
            "otlpEndpoint": _STR,
            "sampler": {"enum": ["always_on", "always_off", "traceidratio", "parentbased_always_on",
                                 "parentbased_always_off", "parentbased_traceidratio"]},
            "samplerRatio": {"type": "string", "pattern": r"^(0(\.[0-9]+)?|1(\.0+)?)$"},
        }),
        "serviceAccount": _closed({
            "create": _BOOL, "name": _STR, "annotations": _STR_MAP, "automountServiceAccountToken": _BOOL,
        }),
        "rbac": _closed({"create": _BOOL, "extraRules": {"type": "array", "items": _k8s("policyRule")},
                         "jobNamespaces": _NAMESPACES}),
        "resources": _k8s("resources"),
        "podSecurityContext": _k8s("podSecurityContext"),
        "securityContext": _k8s("securityContext"),
        "topologySpread": _closed({
            "enabled": _BOOL,
            "maxSkew": {"type": "integer", "minimum": 1},
            "topologyKey": {"type": "string", "minLength": 1},
            "whenUnsatisfiable": {"enum": ["DoNotSchedule", "ScheduleAnyway"]},
        }),
        "topologySpreadConstraints": {"type": "array", "items": _k8s("topologySpreadConstraint")},
        "podAnnotations": _STR_MAP,
        "podLabels": _STR_MAP,
        "nodeSelector": _STR_MAP,
        "tolerations": {"type": "array", "items": _k8s("toleration")},
        "affinity": _k8s("affinity"),
        "priorityClassName": _STR,
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
        "probes": _closed({"liveness": _probe(), "readiness": _probe()}),
        "service": _closed({
            "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
            "port": _PORT,
            "annotations": _STR_MAP,
        }),
        "serviceMonitor": _closed({
            "enabled": _BOOL, "interval": _DURATION, "scrapeTimeout": _DURATION, "labels": _STR_MAP,
        }),
        "prometheusRule": _closed({"enabled": _BOOL, "labels": _STR_MAP}),
        "dashboards": _closed({
            "enabled": _BOOL,
            "namespace": _NS,
            "labels": _STR_MAP,
            "annotations": _STR_MAP,
        }),
        "podDisruptionBudget": _closed({
            "enabled": _BOOL,
            "minAvailable": {"oneOf": [{"type": "integer", "minimum": 0},
                                       {"type": "string", "pattern": r"^[0-9]+%$"}]},
        }),
    }


RECONCILER_CONFIG: dict[str, Any] = _closed({
    "heartbeatSeconds": {"type": "integer", "minimum": 1},
    "exportWorkerImage": {"type": "string", "minLength": 1},
    "exportWorkerServiceAccount": _NAME,
    "fleetCluster": _STR,
    "fleetLocation": _STR,
    "fleetDomain": _STR,
    "dnsLbTarget": _STR,
    "prometheusUrl": {"type": "string", "pattern": r"^(https?://.+)?$"},
    "tableStatusInterval": _SECONDS,
    "workers": {"type": "integer", "minimum": 1},
})

EXPORT_WORKER: dict[str, Any] = _closed({
    "clusterRole": _BOOL,
    "namespaces": _NAMESPACES,
})
"""The export worker's RBAC (tatara-reconciler chart only): its ClusterRole, and the namespaces that get its
ServiceAccount and a RoleBinding."""

POOL_CONFIG: dict[str, Any] = _closed({
    "heartbeatSeconds": {"type": "integer", "minimum": 1},
    "spawnTimeout": _DURATION,
    "resetImage": {"type": "string", "minLength": 1},
    "workers": {"type": "integer", "minimum": 1},
})


def schema(chart: str) -> dict[str, Any]:
    """The values schema of ``chart`` (``tatara-reconciler`` or ``tatara-pool-reconciler``)."""
    props = common_properties(chart)
    props["config"] = RECONCILER_CONFIG if chart == "tatara-reconciler" else POOL_CONFIG
    if chart == "tatara-reconciler":
        props["exportWorker"] = EXPORT_WORKER
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": f"{chart} values",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "definitions": definitions(),
    }


CHARTS = ("tatara-reconciler", "tatara-pool-reconciler")


def render(chart: str) -> str:
    return json.dumps(schema(chart), indent=2) + "\n"


def schemas() -> dict[Path, str]:
    """``{values.schema.json path: text}`` of every chart."""
    return {ROOT / "charts" / chart / "values.schema.json": render(chart) for chart in CHARTS}


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.chart_schema", __doc__, schemas, argv)


if __name__ == "__main__":
    sys.exit(main())
