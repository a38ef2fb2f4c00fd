"""The upstream example files (examples/upstream/*.lisp) compile to the Processes written out below; their
YAML twins are hand-curated and differ from the compiler exactly where a ⚠ comment says so."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from shared.domain.api.codec import to_wire
from shared.domain.api.process import ProcessSpec
from tools.lisp import compile_ephemeral_source, compile_source

EXAMPLES = Path(__file__).resolve().parents[3] / "fixtures" / "upstream-tatara" / "examples"


def twin(stem: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text(encoding="utf-8"))
    return doc


def test_every_lisp_example_has_a_test() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.lisp")) == ["closed-loop-ephemeral", "observability-stack"]


# ── observability-stack ──────────────────────────────────────────────────────

OBSERVABILITY_COMPILED = {
    "identity": {"parent": "seph.1"},
    "classification": {
        "pointType": "Gate",
        "substrate": "Observability",
        "horizon": {"kind": "Bounded"},
        "calm": "Monotone",
        "dataClassification": "Internal",
    },
    "intent": {
        "nix": {
            "flakeRef": "github:pleme-io/k8s?dir=shared/infrastructure",
            "attribute": "observability",
            "atticCache": "main",
            "extraArgs": [],
            "delegateToNixBuild": False,
        }
    },
    "boundary": {
        "preconditions": [],
        "postconditions": [
            {"kind": "KustomizationHealthy", "params": {"name": "observability-stack", "namespace": "flux-system"}},
            {"kind": "HelmReleaseReleased", "params": {"name": "kube-prometheus-stack", "namespace": "observability"}},
            {"kind": "PromQL", "params": {"query": "up{job='prometheus'} == 1"}},
        ],
        "timeout": "15m",
    },
    "compliance": {
        "baseline": "fedramp-moderate",
        "bindings": [
            {
                "framework": "nist-800-53",
                "controlId": "SC-7",
                "phase": "AtBoundary",
                "description": "Boundary protection",
            },
            {"framework": "cis-k8s-v1.8", "controlId": "5.1.1", "phase": "PostConvergence"},
        ],
        "autoRemediate": False,
    },
    "dependsOn": [{"name": "secret-injection", "mustReach": "Attested"}],
    "signals": {
        "sigtermGraceSeconds": 480,
        "sigkillForce": True,
        "sighupStrategy": "Reconverge",
        "startSuspended": False,
    },
    "suspended": False,
}


@pytest.fixture(scope="module")
def observability() -> tuple[str, ProcessSpec]:
    (d,) = compile_source((EXAMPLES / "observability-stack.lisp").read_text(encoding="utf-8"))
    return d.name, d.spec


def test_observability_compiles_to_the_9_1_spec(observability: tuple[str, ProcessSpec]) -> None:
    name, spec = observability
    assert name == "observability-stack"
    assert to_wire(spec) == OBSERVABILITY_COMPILED


def test_observability_twin_differs_only_where_9_1_says(observability: tuple[str, ProcessSpec]) -> None:
    _, spec = observability
    doc = twin("observability-stack")
    assert doc["metadata"]["name"] == "observability-stack"
    # ⚠ the twin has a ProcessPhase precondition the Lisp does not declare
    assert [c["kind"] for c in doc["spec"]["boundary"]["preconditions"]] == ["ProcessPhase"]
    assert spec.boundary.preconditions == []
    # ⚠ namespace and the point-type/substrate labels are the twin's own; a compile yields a name only
    assert doc["metadata"]["namespace"] == "seph"
    assert set(doc["metadata"]["labels"]) == {"tatara.pleme.io/point-type", "tatara.pleme.io/substrate"}
    curated = copy.deepcopy(doc["spec"])
    curated["boundary"]["preconditions"] = []
    assert msgspec.convert(curated, ProcessSpec) == spec


# ── closed-loop-ephemeral ────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def closed_loop() -> tuple[str, ProcessSpec]:
    (d,) = compile_ephemeral_source((EXAMPLES / "closed-loop-ephemeral.lisp").read_text(encoding="utf-8"))
    return d.name, d.spec.to_process_spec()


def test_closed_loop_lowers_to_the_9_2_spec(closed_loop: tuple[str, ProcessSpec]) -> None:
    name, spec = closed_loop
    assert name == "closed-loop-attest"
    wire = to_wire(spec)
    assert wire["identity"] == {}
    assert wire["classification"] == {
        "pointType": "Gate",
        "substrate": "Compute",
        "horizon": {"kind": "Bounded"},
        "calm": "Monotone",
        "dataClassification": "Internal",
    }
    assert wire["intent"] == {
        "aplicacao": {
            "chartRef": "oci://ghcr.io/pleme-io/charts/lareira-demo-app",
            "version": "0.5.5",
            "profile": "all-in-one",
            "valuesOverlay": {
                "cluster": {"name": "ephemeral-test-01"},
                "closedLoopProbe": {
                    "consumer": {"port": 8000, "service": "demo-app-gateway"},
                    "enabled": True,
                    "issuer": {"port": 8080, "service": "demo-app-issuer"},
                },
                "compliance": {"overlays": "[]"},
                "data": {
                    "mysql": {"persistence": {"enabled": False}},
                    "rabbitmq": {"persistence": {"enabled": False}},
                },
            },
            "releaseName": "demo-app-consolidated",
            "targetNamespace": "demo-test",
            "installTimeout": "25m",
        }
    }
    assert wire["boundary"]["preconditions"] == []
    assert "timeout" not in wire["boundary"]
    assert [c["kind"] for c in wire["boundary"]["postconditions"]] == ["HelmReleaseReleased", "ClosedLoopAuth"]
    assert wire["boundary"]["postconditions"][1]["params"] == {
        "consumer": {"authPath": "/v2/whoami", "port": 8000, "service": "demo-app-gateway"},
        "issuer": {"jwksPath": "/.well-known/jwks.json", "port": 8080, "service": "demo-app-issuer"},
        "probeImage": "ghcr.io/pleme-io/closed-loop-probe:0.1.0",
    }
    assert wire["lifetime"] == {"ephemeral": {"ttl": "1h", "teardownPolicy": "OnAttested", "maxConcurrent": 1}}
    assert wire["compliance"] == {"bindings": [], "autoRemediate": False}
    assert wire["dependsOn"] == []
    assert wire["suspended"] is False
    assert "routing" not in wire
    assert "encapsulates" not in wire


def test_closed_loop_twin_differs_only_where_9_2_says(closed_loop: tuple[str, ProcessSpec]) -> None:
    _, spec = closed_loop
    doc = twin("closed-loop-ephemeral")
    assert doc["metadata"]["name"] == "closed-loop-attest"
    curated = copy.deepcopy(doc["spec"])
    # ⚠ the twin says NonMonotone; the lowering's default class is Monotone
    assert curated["classification"]["calm"] == "NonMonotone"
    assert spec.classification.calm == "Monotone"
    curated["classification"]["calm"] = "Monotone"
    # ⚠ `[]` in Lisp is a symbol, so the overlay holds the string "[]", not an empty list
    overlay = curated["intent"]["aplicacao"]["valuesOverlay"]
    assert overlay["compliance"]["overlays"] == []
    assert spec.intent.aplicacao is not None
    assert spec.intent.aplicacao.values_overlay is not None
    assert spec.intent.aplicacao.values_overlay["compliance"]["overlays"] == "[]"
    overlay["compliance"]["overlays"] = "[]"
    # ⚠ namespace and labels are the twin's own
    assert doc["metadata"]["namespace"] == "demo-test"
    assert msgspec.convert(curated, ProcessSpec) == spec


def test_closed_loop_booleans_stay_booleans(closed_loop: tuple[str, ProcessSpec]) -> None:
    _, spec = closed_loop
    assert spec.intent.aplicacao is not None
    overlay = spec.intent.aplicacao.values_overlay
    assert overlay is not None
    assert overlay["data"]["mysql"]["persistence"]["enabled"] is False
    assert overlay["closedLoopProbe"]["enabled"] is True
