"""``defenvmatrix``, ``defencapsulates`` and ``defrouting`` (docs/lisp.md#defenvmatrix,
docs/lisp.md#defencapsulates, docs/lisp.md#defrouting): the same strictness and diagnostics as
``defpoint``/``defephemeral`` (docs/lisp.md#errors)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from shared.domain.api.codec import to_wire
from tools.lisp import (
    LispError,
    compile_encapsulates_source,
    compile_env_matrix_source,
    compile_routing_source,
    lookup,
    read,
    register_all,
)

BASE = ':base (:aplicacao (:chart-ref "oci://x/echo" :version "0.1.0"))'
AXES = ':axes ((:name "version" :path "@version" :values ("0.1.0" "0.2.0")))'
BASE_WIRE = {
    "aplicacao": {"chartRef": "oci://x/echo", "version": "0.1.0", "valuesOverlay": None},
    "ttl": "1h",
    "teardown": "Always",
    "maxConcurrent": 1,
    "postconditions": [],
    "preconditions": [],
}
AXES_WIRE = [{"name": "version", "path": "@version", "values": ["0.1.0", "0.2.0"]}]

Compile = Callable[[str], list[Any]]


@pytest.mark.parametrize(
    ("compile_", "source", "name", "wire"),
    [
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix sweep {BASE} {AXES})",
            "sweep",
            {"base": BASE_WIRE, "axes": AXES_WIRE, "select": "Cartesian", "budget": {"maxEnvs": 0}},
            id="a minimal matrix takes select Cartesian and a zero budget",
        ),
        pytest.param(
            compile_env_matrix_source,
            f'(defenvmatrix sweep {BASE} :axes ((:name v :path "a.b" :values ((:k 1) 2.5 #t))) :select Cartesian)',
            "sweep",
            {
                "base": BASE_WIRE,
                "axes": [{"name": "v", "path": "a.b", "values": [{"k": 1}, 2.5, True]}],
                "select": "Cartesian",
                "budget": {"maxEnvs": 0},
            },
            id="axis values are any JSON and the Cartesian symbol is accepted",
        ),
        pytest.param(
            compile_env_matrix_source,
            f'(defenvmatrix "s" {BASE} {AXES} :select (:Explicit ((1) (0))) '
            ':budget (:max-envs 1 :cost-ceiling "$5/h" :max-concurrent 3) '
            ':breathe (:dimensions ((:kind "cpu" :floor "100m" :ceiling "1")) :dry-run #f))',
            "s",
            {
                "base": BASE_WIRE,
                "axes": AXES_WIRE,
                "select": {"Explicit": [[1], [0]]},
                "budget": {"maxEnvs": 1, "costCeiling": "$5/h", "maxConcurrent": 3},
                "breathe": {
                    "dimensions": [{"kind": "cpu", "floor": "100m", "ceiling": "1"}],
                    "cooldownSeconds": 60,
                    "dryRun": False,
                    "targetKind": "Deployment",
                },
            },
            id="a full matrix writes Explicit, the budget and the breathe envelope",
        ),
        pytest.param(
            compile_routing_source,
            '(defrouting web :hostnames ((:app "echo" :instance "a")) :backend (:service "echo" :port 8080))',
            "web",
            {
                "hostnames": [{"app": "echo", "instance": "a"}],
                "backend": {"service": "echo", "port": 8080},
                "stableNameClaim": False,
                "priority": 0,
            },
            id="a routing spec fills its defaults",
        ),
        pytest.param(
            compile_routing_source,
            "(defrouting web :backend (echo 80) :stable-name-claim #t :priority -1)",
            "web",
            {"hostnames": [], "backend": {"service": "echo", "port": 80}, "stableNameClaim": True, "priority": -1},
            id="a routing backend may be written positionally",
        ),
        pytest.param(
            compile_encapsulates_source,
            '(defencapsulates wrap :kind (:existing-kustomization (:namespace "flux-system" :name "apps")))',
            "wrap",
            {"kind": {"existingKustomization": {"namespace": "flux-system", "name": "apps"}}, "mode": "Manage"},
            id="an encapsulation takes mode Manage",
        ),
        pytest.param(
            compile_encapsulates_source,
            '(defencapsulates wrap :kind (:bare-workload (:namespace "n" :selector (:app "x"))) :mode Observe)',
            "wrap",
            {"kind": {"bareWorkload": {"namespace": "n", "selector": {"app": "x"}}}, "mode": "Observe"},
            id="an encapsulation takes another mode as a symbol",
        ),
    ],
)
def test_forms_compile_to_their_spec(compile_: Compile, source: str, name: str, wire: Any) -> None:
    (named,) = compile_(source)
    assert named.name == name
    assert to_wire(named.spec) == wire


@pytest.mark.parametrize(
    ("compile_", "source", "message"),
    [
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {AXES})",
            "compile error in :base: required but not provided",
            id="a matrix without base is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE})",
            "compile error in :axes: required but not provided",
            id="a matrix without axes is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE} {AXES} :axis ())",
            "compile error in :axis: unknown keyword (did you mean :axes?; "
            "allowed: :base, :axes, :select, :budget, :breathe)",
            id="an unknown keyword is refused with a suggestion",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE} {AXES} {AXES})",
            "compile error in :axes: duplicate keyword",
            id="a repeated keyword is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f'(defenvmatrix m {BASE} :axes "version")',
            "compile error in :axes: expected list, got string",
            id="axes that are not a list are refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f'(defenvmatrix m {BASE} :axes ((:name "v")))',
            "compile error in :axes[0]: deserialize: Object missing required field `values`",
            id="an axis without values is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE} {AXES} :select Diagonal)",
            "compile error in :select: deserialize:",
            id="an unknown select strategy is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE} {AXES} :select (:Explicit ((-1))))",
            "compile error in :select: deserialize:",
            id="a negative Explicit index is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix m {BASE} {AXES} :budget (:max-envs -1))",
            "compile error in :budget: deserialize: Expected `int` >= 0",
            id="a negative budget is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f'(defenvmatrix m :base (:ttl "1h") {AXES})',
            "compile error in :base: deserialize: Object missing required field `aplicacao`",
            id="a base without aplicacao is refused",
        ),
        pytest.param(
            compile_env_matrix_source,
            f"(defenvmatrix (m) {BASE} {AXES})",
            "compile error in defenvmatrix: positional NAME must be a symbol or string (got list)",
            id="a NAME that is a list is refused",
        ),
        pytest.param(
            compile_routing_source,
            '(defrouting r :hostnames ((:app "a")))',
            "compile error in :backend: required but not provided",
            id="routing without a backend is refused",
        ),
        pytest.param(
            compile_routing_source,
            "(defrouting r :backend (:service s :port 70000))",
            "compile error in :backend: deserialize: Expected `int` <= 65535",
            id="a backend port out of range is refused",
        ),
        pytest.param(
            compile_routing_source,
            "(defrouting r :backend (s 80) :priority 2147483648)",
            "compile error in :priority: 2147483648 is out of range for i32",
            id="a priority out of range is refused",
        ),
        pytest.param(
            compile_encapsulates_source,
            "(defencapsulates e :mode Adopt)",
            "compile error in :kind: required but not provided",
            id="an encapsulation without kind is refused",
        ),
        pytest.param(
            compile_encapsulates_source,
            '(defencapsulates e :kind (:existing-kustomization (:name "a" :namespace "n")) :mode Take)',
            "compile error in :mode: deserialize:",
            id="an unknown encapsulation mode is refused",
        ),
    ],
)
def test_bad_forms_are_refused_with_the_bridge_diagnostics(compile_: Compile, source: str, message: str) -> None:
    with pytest.raises(LispError) as caught:
        compile_(source)
    assert caught.value.message.startswith(message)


def test_each_domain_compiles_only_its_own_forms() -> None:
    source = f"(defpoint p :intent ()) (defenvmatrix m {BASE} {AXES}) (defrouting r :backend (s 80))"
    assert [n.name for n in compile_env_matrix_source(source)] == ["m"]
    assert [n.name for n in compile_routing_source(source)] == ["r"]
    assert compile_encapsulates_source(source) == []


@pytest.mark.parametrize(
    ("keyword", "args", "wire"),
    [
        pytest.param(
            "defenvmatrix",
            f"{BASE} {AXES}",
            {"axes": AXES_WIRE, "base": BASE_WIRE, "budget": {"maxEnvs": 0}, "select": "Cartesian"},
            id="defenvmatrix is registered",
        ),
        pytest.param(
            "defrouting",
            ":backend (s 80)",
            {"backend": {"port": 80, "service": "s"}, "hostnames": [], "priority": 0, "stableNameClaim": False},
            id="defrouting is registered",
        ),
        pytest.param(
            "defencapsulates",
            ':kind (:existing-helm-release (:namespace "n" :name "h" :release-name "r"))',
            {"kind": {"existingHelmRelease": {"name": "h", "namespace": "n", "releaseName": "r"}}, "mode": "Manage"},
            id="defencapsulates is registered",
        ),
    ],
)
def test_register_all_registers_the_new_domains(keyword: str, args: str, wire: Any) -> None:
    register_all()
    handler = lookup(keyword)
    assert handler is not None
    assert handler.compile(read(args)) == wire
