"""EnvMatrixSpec: wire shapes, coordinates, expand, apply_axis, slugs and breathe bands —
docs/wire-format.md#envmatrixspec. Expected values are the spec's own examples or worked by hand."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain.api.codec import DecodeError, decode, to_wire
from shared.domain.api.envmatrix import (
    USIZE_MAX,
    BreatheDimension,
    BreatheEnvelope,
    EnvMatrixSpec,
    ExplicitSelect,
    MatrixAxis,
    MatrixBudget,
    SelectStrategy,
    apply_axis,
    breathe_bands,
    slug,
    slug_value,
)
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.intent import AplicacaoIntent

APLICACAO = AplicacaoIntent(chart_ref="oci://x/echo", version="0.1.0")
BASE = EphemeralSpec(aplicacao=APLICACAO)
BASE_WIRE = {
    "aplicacao": {"chartRef": "oci://x/echo", "version": "0.1.0", "valuesOverlay": None},
    "ttl": "1h",
    "teardown": "Always",
    "maxConcurrent": 1,
    "postconditions": [],
    "preconditions": [],
}


def matrix(*lengths: int, select: SelectStrategy = "Cartesian", **kw: Any) -> EnvMatrixSpec:
    """A matrix whose axis ``i`` is named ``a<i>`` with values ``0 … L-1``."""
    axes = [MatrixAxis(name=f"a{i}", path=f"a{i}", values=list(range(n))) for i, n in enumerate(lengths)]
    return EnvMatrixSpec(base=BASE, axes=axes, select=select, **kw)


# ── wire shapes ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[]),
            {"base": BASE_WIRE, "axes": [], "select": "Cartesian", "budget": {"maxEnvs": 0}},
            id="a bare matrix writes select Cartesian and a zero budget, and leaves breathe out",
        ),
        pytest.param(
            MatrixAxis(name="v", values=[1]),
            {"name": "v", "values": [1]},
            id="an axis leaves an empty path out",
        ),
        pytest.param(
            MatrixAxis(name="v", path="a.b", values={"k": 1}),
            {"name": "v", "path": "a.b", "values": {"k": 1}},
            id="an axis writes a set path and any JSON as values",
        ),
        pytest.param(
            ExplicitSelect(explicit=[[0, 1], [1, 0]]),
            {"Explicit": [[0, 1], [1, 0]]},
            id="Explicit is externally tagged with its Rust variant name",
        ),
        pytest.param(
            MatrixBudget(max_envs=3, cost_ceiling="$5/h", max_concurrent=2),
            {"maxEnvs": 3, "costCeiling": "$5/h", "maxConcurrent": 2},
            id="a full budget writes all three keys",
        ),
        pytest.param(
            BreatheEnvelope(dimensions=[BreatheDimension(kind="cpu", floor="100m", ceiling="1")]),
            {
                "dimensions": [{"kind": "cpu", "floor": "100m", "ceiling": "1"}],
                "cooldownSeconds": 60,
                "dryRun": True,
                "targetKind": "Deployment",
            },
            id="a breathe envelope always writes its four keys with their defaults",
        ),
    ],
)
def test_the_models_write_the_spec_wire_shapes(value: msgspec.Struct, wire: Any) -> None:
    assert to_wire(value) == wire


@pytest.mark.parametrize(
    ("document", "select"),
    [
        pytest.param(b'"Cartesian"', "Cartesian", id="the bare string Cartesian decodes"),
        pytest.param(b'{"Explicit":[[0,2]]}', ExplicitSelect(explicit=[[0, 2]]), id="an Explicit object decodes"),
    ],
)
def test_select_decodes_from_both_spellings(document: bytes, select: SelectStrategy) -> None:
    got = decode(
        b'{"base":{"aplicacao":{"chartRef":"c","version":"1"}},"axes":[],"select":' + document + b"}", EnvMatrixSpec
    )
    assert got.select == select


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(b'{"axes":[]}', id="a matrix without base is refused"),
        pytest.param(b'{"base":{"aplicacao":{"chartRef":"c","version":"1"}}}', id="a matrix without axes is refused"),
        pytest.param(
            b'{"base":{"aplicacao":{"chartRef":"c","version":"1"}},"axes":[{"name":"v"}]}',
            id="an axis without values is refused",
        ),
        pytest.param(
            b'{"base":{"aplicacao":{"chartRef":"c","version":"1"}},"axes":[],"select":"Diagonal"}',
            id="an unknown select strategy is refused",
        ),
    ],
)
def test_required_keys_and_unknown_strategies_are_refused(document: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(document, EnvMatrixSpec)


# ── coordinates ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("spec", "coordinates"),
    [
        pytest.param(matrix(), [[]], id="no axes give exactly one empty coordinate"),
        pytest.param(matrix(2, 0, 3), [], id="an empty axis gives no coordinates"),
        pytest.param(matrix(3), [[0], [1], [2]], id="one axis counts up its values"),
        pytest.param(
            matrix(2, 2, 2),
            [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1], [1, 1, 1]],
            id="axis 0 changes fastest",
        ),
        pytest.param(
            matrix(3, 2), [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]], id="mixed radices follow their own lengths"
        ),
        pytest.param(
            matrix(2, 3, select=ExplicitSelect(explicit=[[1, 2], [0, 0], [1, 2]])),
            [[1, 2], [0, 0], [1, 2]],
            id="Explicit keeps its tuples in order with duplicates",
        ),
        pytest.param(
            matrix(2, 3, select=ExplicitSelect(explicit=[[2, 0], [0, 3], [0], [0, 0, 0], [1, 1]])),
            [[1, 1]],
            id="Explicit drops tuples out of range or of the wrong length",
        ),
        pytest.param(
            matrix(select=ExplicitSelect(explicit=[[], [0]])), [[]], id="Explicit with no axes keeps only empty tuples"
        ),
    ],
)
def test_coordinates_follow_the_spec_rules(spec: EnvMatrixSpec, coordinates: list[list[int]]) -> None:
    assert list(spec.coordinates()) == coordinates
    assert spec.selection_size() == len(coordinates)


@pytest.mark.parametrize(
    ("values", "length"),
    [
        pytest.param([], 0, id="an empty array has no values"),
        pytest.param({"a": 1}, 0, id="an object has no values"),
        pytest.param("abc", 0, id="a string has no values"),
        pytest.param(None, 0, id="null has no values"),
        pytest.param([None, [1]], 2, id="an array counts its items whatever they are"),
    ],
)
def test_only_an_array_contributes_values(values: Any, length: int) -> None:
    assert MatrixAxis(name="v", values=values).length == length


def test_the_selection_size_saturates_without_building_coordinates() -> None:
    big = matrix(*[2**16] * 5)
    assert big.selection_size() == USIZE_MAX


def test_invalid_tuples_are_reported_with_their_positions() -> None:
    spec = matrix(2, select=ExplicitSelect(explicit=[[0], [5], [0, 0]]))
    assert spec.invalid_tuples() == [(1, [5]), (2, [0, 0])]


# ── expand ──────────────────────────────────────────────────────────────────────

SWEEP = EnvMatrixSpec(
    base=BASE,
    axes=[
        MatrixAxis(name="version", path="@version", values=["0.1.0", "0.2.0"]),
        MatrixAxis(name="replicas", path="replicaCount", values=[1, 3]),
        MatrixAxis(name="flag", path="feature.flag", values=["on", "off"]),
    ],
)


def test_the_spec_example_sweep_names_every_environment_axis_0_fastest() -> None:
    assert [env.name for env in SWEEP.expand("echo-sweep")] == [
        "echo-sweep-version-0-1-0-replicas-1-flag-on",
        "echo-sweep-version-0-2-0-replicas-1-flag-on",
        "echo-sweep-version-0-1-0-replicas-3-flag-on",
        "echo-sweep-version-0-2-0-replicas-3-flag-on",
        "echo-sweep-version-0-1-0-replicas-1-flag-off",
        "echo-sweep-version-0-2-0-replicas-1-flag-off",
        "echo-sweep-version-0-1-0-replicas-3-flag-off",
        "echo-sweep-version-0-2-0-replicas-3-flag-off",
    ]


def test_the_last_environment_carries_every_axis_value_and_its_name_as_release() -> None:
    last = SWEEP.expand("echo-sweep")[-1]
    assert to_wire(last) == {
        "name": "echo-sweep-version-0-2-0-replicas-3-flag-off",
        "spec": {
            **BASE_WIRE,
            "aplicacao": {
                "chartRef": "oci://x/echo",
                "version": "0.2.0",
                "valuesOverlay": {"feature": {"flag": "off"}, "replicaCount": 3},
                "releaseName": "echo-sweep-version-0-2-0-replicas-3-flag-off",
            },
        },
    }


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        pytest.param(matrix(), ["m"], id="no axes name the one environment after the matrix"),
        pytest.param(matrix(4, budget=MatrixBudget(max_envs=2)), ["m-a0-0", "m-a0-1"], id="maxEnvs keeps the first N"),
        pytest.param(
            matrix(2, budget=MatrixBudget(max_envs=5)), ["m-a0-0", "m-a0-1"], id="maxEnvs above the size keeps all"
        ),
        pytest.param(
            matrix(3, budget=MatrixBudget(max_envs=0)), ["m-a0-0", "m-a0-1", "m-a0-2"], id="maxEnvs 0 is no cap"
        ),
        pytest.param(matrix(0), [], id="an empty axis expands to nothing"),
        pytest.param(
            matrix(2, select=ExplicitSelect(explicit=[[1], [1]])),
            ["m-a0-1", "m-a0-1"],
            id="duplicate tuples duplicate names",
        ),
    ],
)
def test_expand_applies_the_budget_cap_in_order(spec: EnvMatrixSpec, names: list[str]) -> None:
    assert [env.name for env in spec.expand("m")] == names


def test_the_matrix_name_is_neither_slugged_nor_truncated() -> None:
    long = "My_Matrix" + "x" * 80
    (env,) = EnvMatrixSpec(base=BASE, axes=[MatrixAxis(name="V", values=["A B"])]).expand(long)
    assert env.name == f"{long}-v-a-b"


@pytest.mark.parametrize(
    ("budget", "max_concurrent"),
    [
        pytest.param(MatrixBudget(), 1, id="without a budget maxConcurrent the base value stays"),
        pytest.param(MatrixBudget(max_concurrent=4), 4, id="the budget maxConcurrent overrides the base"),
        pytest.param(MatrixBudget(max_concurrent=0), 0, id="a budget maxConcurrent of zero still overrides"),
    ],
)
def test_the_budget_max_concurrent_overrides_every_spec(budget: MatrixBudget, max_concurrent: int) -> None:
    assert [env.spec.max_concurrent for env in matrix(2, budget=budget).expand("m")] == [max_concurrent] * 2


def test_the_release_name_replaces_the_base_value() -> None:
    base = EphemeralSpec(aplicacao=msgspec.structs.replace(APLICACAO, release_name="fixed"))
    (env,) = EnvMatrixSpec(base=base, axes=[]).expand("solo")
    assert env.spec.aplicacao.release_name == "solo"


def test_expand_never_mutates_the_base_overlay() -> None:
    base = EphemeralSpec(aplicacao=msgspec.structs.replace(APLICACAO, values_overlay={"a": {"b": 1}}))
    spec = EnvMatrixSpec(base=base, axes=[MatrixAxis(name="b", path="a.b", values=[2, 3])])
    assert [env.spec.aplicacao.values_overlay for env in spec.expand("m")] == [{"a": {"b": 2}}, {"a": {"b": 3}}]
    assert base.aplicacao.values_overlay == {"a": {"b": 1}}


# ── apply_axis ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        pytest.param("@version", "9.9.9", "version", "9.9.9", id="at-version sets the version"),
        pytest.param("@profile", "lean", "profile", "lean", id="at-profile sets the profile"),
        pytest.param("@chart-ref", "oci://y", "chart_ref", "oci://y", id="at-chart-ref sets the chart ref"),
        pytest.param("@version", 2, "version", "0.1.0", id="a non-string at a magic path changes nothing"),
        pytest.param("@version", 2, "values_overlay", None, id="a non-string at a magic path writes no overlay"),
    ],
)
def test_magic_paths_set_aplicacao_fields_for_strings_only(path: str, value: Any, field: str, expected: Any) -> None:
    assert getattr(apply_axis(APLICACAO, path, value), field) == expected


@pytest.mark.parametrize(
    ("overlay", "path", "value", "expected"),
    [
        pytest.param(None, "a", 1, {"a": 1}, id="a null overlay becomes an object"),
        pytest.param([1], "a", 1, {"a": 1}, id="a non-object overlay is replaced"),
        pytest.param({"k": 0}, "a.b.c", True, {"k": 0, "a": {"b": {"c": True}}}, id="missing parents are created"),
        pytest.param({"a": 5}, "a.b", 1, {"a": {"b": 1}}, id="a non-object parent is replaced"),
        pytest.param({"a": {"b": 1, "c": 2}}, "a.b", [9], {"a": {"b": [9], "c": 2}}, id="the last segment is replaced"),
        pytest.param(
            {"a": 1, "b": 2}, "", {"b": 3, "c": 4}, {"a": 1, "b": 3, "c": 4}, id="an empty path merges an object"
        ),
        pytest.param({"a": 1}, "", 7, {"a": 1}, id="an empty path with a non-object does nothing"),
        pytest.param(None, "", "x", {}, id="an empty path with a non-object still makes the overlay an object"),
        pytest.param({}, "@release-name", "r", {"@release-name": "r"}, id="other at-paths are ordinary keys"),
        pytest.param({}, "a..b", 1, {"a": {"": {"b": 1}}}, id="an empty segment is an empty key"),
    ],
)
def test_other_paths_write_into_the_values_overlay(overlay: Any, path: str, value: Any, expected: Any) -> None:
    aplicacao = msgspec.structs.replace(APLICACAO, values_overlay=overlay)
    assert apply_axis(aplicacao, path, value).values_overlay == expected


# ── slugs ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Python", "python", id="letters are lowercased"),
        pytest.param("0.2.0", "0-2-0", id="dots become dashes"),
        pytest.param("a--b__c", "a-b-c", id="runs collapse into one dash"),
        pytest.param("--edge--", "edge", id="dashes are trimmed from both ends"),
        pytest.param("café", "caf", id="non-ASCII letters become dashes"),
        pytest.param("ÄB", "b", id="non-ASCII capitals are not kept"),
        pytest.param("", "x", id="an empty slug becomes x"),
        pytest.param("!!!", "x", id="a slug of punctuation becomes x"),
    ],
)
def test_slug(text: str, expected: str) -> None:
    assert slug(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("Postgres 16", "postgres-16", id="a string is slugged"),
        pytest.param(True, "true", id="true is true"),
        pytest.param(False, "false", id="false is false"),
        pytest.param(3, "3", id="an integer is its digits"),
        pytest.param(-3, "3", id="a negative integer loses its sign"),
        pytest.param(1.5, "1-5", id="a fraction becomes dashes"),
        pytest.param(2.0, "2-0", id="a whole float keeps its fraction as serde_json writes it"),
        pytest.param(1e21, "1e-21", id="a large float is written in exponent form"),
        pytest.param(None, "null", id="null is null"),
        pytest.param([1, 2], "1-2", id="an array is its compact JSON slugged"),
        pytest.param({"b": 1, "a": 2}, "a-2-b-1", id="an object is its compact JSON with sorted keys slugged"),
    ],
)
def test_slug_value(value: Any, expected: str) -> None:
    assert slug_value(value) == expected


# ── breathe bands ───────────────────────────────────────────────────────────────


def _breathe(*kinds: str, **kw: Any) -> BreatheEnvelope:
    return BreatheEnvelope(dimensions=[BreatheDimension(kind=k, floor="1", ceiling="2") for k in kinds], **kw)


def test_no_breathe_gives_no_bands() -> None:
    spec = matrix()
    assert breathe_bands(spec, spec.expand("m")[0]) == []


def test_a_band_has_the_spec_object_shape() -> None:
    spec = matrix(
        budget=MatrixBudget(cost_ceiling="$5/h"), breathe=_breathe("Memory", cooldown_seconds=30, dry_run=False)
    )
    (env,) = spec.expand("m")
    assert breathe_bands(spec, env) == [
        {
            "apiVersion": "breathe.pleme.io/v1",
            "kind": "MemoryBand",
            "metadata": {
                "name": "m-memory",
                "namespace": "m",
                "labels": {"matrix-env": "m"},
                "annotations": {"breathe.pleme.io/cost-ceiling": "$5/h"},
            },
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "m"},
                "floor": "1",
                "ceiling": "2",
                "cooldownSeconds": 30,
                "dryRun": False,
            },
        }
    ]


@pytest.mark.parametrize(
    ("kinds", "bands"),
    [
        pytest.param(
            ("mem", "CPU", "disk"),
            [("MemoryBand", "m-memory"), ("CpuBand", "m-cpu"), ("StorageBand", "m-storage")],
            id="aliases map to their band kinds in order",
        ),
        pytest.param(
            ("storage", "gpu", "memory"),
            [("StorageBand", "m-storage"), ("MemoryBand", "m-memory")],
            id="unknown kinds are dropped",
        ),
        pytest.param(("cpu", "cpu"), [("CpuBand", "m-cpu"), ("CpuBand", "m-cpu")], id="duplicates are kept"),
    ],
)
def test_band_kinds_are_recognized_by_alias(kinds: tuple[str, ...], bands: list[tuple[str, str]]) -> None:
    spec = matrix(breathe=_breathe(*kinds))
    (env,) = spec.expand("m")
    assert [(b["kind"], b["metadata"]["name"]) for b in breathe_bands(spec, env)] == bands


def test_bands_target_the_namespace_and_have_no_annotations_without_a_cost_ceiling() -> None:
    base = EphemeralSpec(aplicacao=msgspec.structs.replace(APLICACAO, target_namespace="sweeps"))
    spec = EnvMatrixSpec(base=base, axes=[], breathe=_breathe("cpu", target_kind="StatefulSet"))
    (band,) = breathe_bands(spec, spec.expand("m")[0])
    assert band["metadata"]["namespace"] == "sweeps"
    assert band["metadata"]["annotations"] == {}
    assert band["spec"]["targetRef"] == {"kind": "StatefulSet", "name": "m"}


# ── diagnostics ─────────────────────────────────────────────────────────────────


def _axis(path: str, values: Any, name: str = "v") -> MatrixAxis:
    return MatrixAxis(name=name, path=path, values=values)


@pytest.mark.parametrize(
    ("spec", "messages"),
    [
        pytest.param(matrix(2, 3), [], id="a clean matrix has nothing to report"),
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[_axis("a", [])]),
            ["axis 'v' has no values (values must be a non-empty list): the matrix expands to nothing"],
            id="an empty axis is reported",
        ),
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[_axis("a", "abc")]),
            ["axis 'v' has no values (values must be a non-empty list): the matrix expands to nothing"],
            id="values that are not a list are reported",
        ),
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[_axis("@release-name", ["r"])]),
            [
                "axis 'v': path '@release-name' names no field (one of @version, @profile, @chart-ref); "
                "it is written into valuesOverlay as a key"
            ],
            id="an at-path that names no field is reported",
        ),
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[_axis("a..b", [1])]),
            ["axis 'v': path 'a..b' has an empty segment"],
            id="an empty path segment is reported",
        ),
        pytest.param(
            EnvMatrixSpec(base=BASE, axes=[_axis("@version", ["1.0.0", 2])]),
            ["axis 'v': value 1 is not a string; @version ignores it"],
            id="a non-string at a magic path is reported",
        ),
        pytest.param(
            matrix(2, 3, select=ExplicitSelect(explicit=[[0, 0], [2, 0], [0]])),
            [
                "select Explicit tuple 1 [2, 0] is out of range for axis lengths 2x3: dropped",
                "select Explicit tuple 2 [0] has 1 indices for 2 axes: dropped",
            ],
            id="explicit tuples out of range or of the wrong length are reported",
        ),
        pytest.param(
            matrix(2, 3, budget=MatrixBudget(max_envs=4)),
            ["budget maxEnvs 4 is below the 6 selected environments: 2 dropped"],
            id="a budget cap below the product is reported",
        ),
        pytest.param(matrix(2, 3, budget=MatrixBudget(max_envs=6)), [], id="a budget cap equal to the product is fine"),
    ],
)
def test_diagnostics_name_what_the_expansion_drops(spec: EnvMatrixSpec, messages: list[str]) -> None:
    assert spec.diagnostics() == messages
