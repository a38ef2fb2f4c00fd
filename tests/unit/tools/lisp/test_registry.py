"""defephemeral (docs/lisp.md#defephemeral) and the domain registry (docs/lisp.md#registry)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain.api.codec import to_wire
from shared.domain.api.ephemeral import EphemeralSpec
from tools.lisp import (
    LispError,
    compile_ephemeral_source,
    compile_source,
    lookup,
    read,
    register_all,
    registered_keywords,
)

A = ':aplicacao (:chart-ref "oci://x" :version "1.0.0")'

APLICACAO = {"chartRef": "oci://x", "version": "1.0.0", "valuesOverlay": None}

SIGNALS = {"sigtermGraceSeconds": 480, "sigkillForce": True, "sighupStrategy": "Reconverge", "startSuspended": False}


def ephemeral(src: str) -> EphemeralSpec:
    (d,) = compile_ephemeral_source(src)
    return d.spec


def test_r1_defaults_follow_the_in_tree_copy() -> None:
    assert to_wire(ephemeral(f"(defephemeral e {A})")) == {
        "aplicacao": APLICACAO,
        "ttl": "1h",
        "teardown": "Always",
        "maxConcurrent": 1,
        "postconditions": [],
        "preconditions": [],
    }


def test_r2_lowering_to_a_process_spec() -> None:
    assert to_wire(ephemeral(f"(defephemeral e {A})").to_process_spec()) == {
        "identity": {},
        "classification": {
            "pointType": "Gate",
            "substrate": "Compute",
            "horizon": {"kind": "Bounded"},
            "calm": "Monotone",
            "dataClassification": "Internal",
        },
        "intent": {"aplicacao": APLICACAO},
        "boundary": {"preconditions": [], "postconditions": []},
        "compliance": {"bindings": [], "autoRemediate": False},
        "dependsOn": [],
        "signals": SIGNALS,
        "lifetime": {"ephemeral": {"ttl": "1h", "teardownPolicy": "Always", "maxConcurrent": 1}},
        "suspended": False,
    }


ERROR_CASES = [
    ("R3 a symbol ttl", f"(defephemeral e {A} :ttl 1h)", "compile error in :ttl: expected string, got symbol"),
    (
        "R4 a symbol parent",
        f"(defephemeral e {A} :parent seph.1)",
        "compile error in :parent: expected string, got symbol",
    ),
    (
        "R5 a negative max-concurrent is out of u32 range",
        f"(defephemeral e {A} :max-concurrent -1)",
        "compile error in :max-concurrent: -1 is out of range for u32",
    ),
    (
        "R5 a max-concurrent above u32 range",
        f"(defephemeral e {A} :max-concurrent 4294967296)",
        "compile error in :max-concurrent: 4294967296 is out of range for u32",
    ),
    (
        "R5 a float max-concurrent",
        f"(defephemeral e {A} :max-concurrent 2.0)",
        "compile error in :max-concurrent: expected int, got float",
    ),
    (
        "R6 a wrongly cased teardown",
        f"(defephemeral e {A} :teardown onattested)",
        "compile error in :teardown: deserialize: ",
    ),
    (
        "R7 an aplicacao without version",
        '(defephemeral e :aplicacao (:chart-ref "x"))',
        "compile error in :aplicacao: deserialize: ",
    ),
    ("R a missing aplicacao", "(defephemeral e)", "compile error in :aplicacao: required but not provided"),
    (
        "R teardown-policy belongs to the defpoint spelling",
        f"(defephemeral e {A} :teardown-policy Never)",
        "compile error in :teardown-policy: unknown keyword (did you mean :teardown?; allowed: :aplicacao, :ttl,",
    ),
]


@pytest.mark.parametrize(("src", "prefix"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_ephemeral_compile_error(src: str, prefix: str) -> None:
    with pytest.raises(LispError) as err:
        compile_ephemeral_source(src)
    assert err.value.message.startswith(prefix), err.value.message


def test_r5_max_concurrent_bounds_are_inclusive() -> None:
    assert ephemeral(f"(defephemeral e {A} :max-concurrent 0)").max_concurrent == 0
    assert ephemeral(f"(defephemeral e {A} :max-concurrent 4294967295)").max_concurrent == 2**32 - 1


def test_r8_every_optional_field_lands_in_the_lowered_spec() -> None:
    spec = ephemeral(
        f'(defephemeral e {A} :parent "seph.1" :verify-timeout "5m" :teardown Never '
        ":classification (:point-type Observe :substrate Network :calm NonMonotone))"
    ).to_process_spec()
    wire: dict[str, Any] = to_wire(spec)
    assert wire["identity"] == {"parent": "seph.1"}
    assert wire["boundary"]["timeout"] == "5m"
    assert wire["lifetime"]["ephemeral"]["teardownPolicy"] == "Never"
    assert wire["classification"] == {
        "pointType": "Observe",
        "substrate": "Network",
        "horizon": {"kind": "Bounded"},
        "calm": "NonMonotone",
        "dataClassification": "Internal",
    }


def test_r9_the_defpoint_compiler_skips_defephemeral() -> None:
    assert compile_source(f"(defephemeral e {A})") == []


def test_the_defephemeral_compiler_skips_defpoint() -> None:
    assert compile_ephemeral_source("(defpoint x :classification (Gate Compute) :intent ())") == []


def test_r10_registering_twice_is_harmless() -> None:
    register_all()
    register_all()
    assert lookup("defpoint") is not None
    assert lookup("defephemeral") is not None
    assert lookup("defnothing") is None
    assert {"defpoint", "defephemeral"} <= set(registered_keywords())


def test_r11_handler_returns_the_serialized_spec_with_defaults() -> None:
    register_all()
    handler = lookup("defpoint")
    assert handler is not None
    args = read(':classification (:point-type Gate :substrate Compute) :intent (:nix (:flake-ref "f" :attribute "a"))')
    assert handler.compile(args) == {
        "identity": {},
        "classification": {
            "pointType": "Gate",
            "substrate": "Compute",
            "horizon": {"kind": "Bounded"},
            "calm": "Monotone",
            "dataClassification": "Internal",
        },
        "intent": {"nix": {"flakeRef": "f", "attribute": "a", "extraArgs": [], "delegateToNixBuild": False}},
        "boundary": {"preconditions": [], "postconditions": []},
        "compliance": {"bindings": [], "autoRemediate": False},
        "dependsOn": [],
        "signals": SIGNALS,
        "suspended": False,
    }


def test_r12_handler_given_a_named_tail_rejects_the_name() -> None:
    register_all()
    handler = lookup("defpoint")
    assert handler is not None
    with pytest.raises(LispError, match=r"^compile error in kwargs\[0\]: expected keyword, got symbol$"):
        handler.compile(read("x :classification (Gate Compute) :intent ()"))


def test_defephemeral_handler_output() -> None:
    register_all()
    handler = lookup("defephemeral")
    assert handler is not None
    assert handler.compile(read(f'{A} :ttl "30m"')) == {
        "aplicacao": APLICACAO,
        "ttl": "30m",
        "teardown": "Always",
        "maxConcurrent": 1,
        "postconditions": [],
        "preconditions": [],
    }


def test_handler_output_decodes_back_to_the_same_spec() -> None:
    register_all()
    handler = lookup("defephemeral")
    assert handler is not None
    wire = handler.compile(read(f"{A} :max-concurrent 3"))
    assert msgspec.convert(wire, EphemeralSpec) == ephemeral(f"(defephemeral e {A} :max-concurrent 3)")
