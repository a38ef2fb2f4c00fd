"""``tatara compile`` of ``defenvmatrix``: one Process per environment, breathe Bands after each, the
expansion's warnings, Cel conditions checked at compile time, and ``--dry-run``
(docs/lisp.md#tatara-compile)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from shared.domain.api.codec import decode_process
from tools.cli import main
from tools.opscli import CompileProblem, compile_lisp, compile_report

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lisp" / "echo-sweep.lisp"
BASE = ':base (:aplicacao (:chart-ref "oci://x/echo" :version "0.1.0"))'


def test_the_example_matrix_compiles_to_four_valid_processes_axis_0_fastest() -> None:
    docs = compile_lisp(EXAMPLE.read_text(), "tatara-examples")
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("Process", "echo-sweep-version-0-5-4-replicas-1", "tatara-examples"),
        ("Process", "echo-sweep-version-0-5-5-replicas-1", "tatara-examples"),
        ("Process", "echo-sweep-version-0-5-4-replicas-3", "tatara-examples"),
        ("Process", "echo-sweep-version-0-5-5-replicas-3", "tatara-examples"),
    ]
    for doc in docs:
        decode_process(msgspec.json.encode(doc), validate=True)
    last = docs[-1]["spec"]
    assert last["intent"]["aplicacao"]["version"] == "0.5.5"
    assert last["intent"]["aplicacao"]["valuesOverlay"] == {"replicaCount": 3, "service": {"port": 8080}}
    assert last["intent"]["aplicacao"]["releaseName"] == "echo-sweep-version-0-5-5-replicas-3"
    assert last["lifetime"]["ephemeral"] == {"ttl": "1h", "teardownPolicy": "Always", "maxConcurrent": 1}
    assert last["boundary"]["postconditions"][0]["kind"] == "Cel"


def test_breathe_bands_follow_the_process_of_their_environment() -> None:
    src = (
        f'(defenvmatrix m {BASE} :axes ((:name "n" :values (1 2)))'
        ' :breathe (:dimensions ((:kind "cpu" :floor "1" :ceiling "2") (:kind "mem" :floor "1" :ceiling "2"))))'
    )
    docs = compile_lisp(src)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Process", "m-n-1"),
        ("CpuBand", "m-n-1-cpu"),
        ("MemoryBand", "m-n-1-memory"),
        ("Process", "m-n-2"),
        ("CpuBand", "m-n-2-cpu"),
        ("MemoryBand", "m-n-2-memory"),
    ]


def test_matrices_come_after_the_defpoint_and_defephemeral_forms() -> None:
    src = (
        f'(defenvmatrix m {BASE} :axes ()) (defephemeral e :aplicacao (:chart-ref "c" :version "1"))'
        ' (defpoint p :classification (Gate Compute) :intent (:flux (:git-repository "g" :path ".")))'
    )
    assert [d["metadata"]["name"] for d in compile_lisp(src)] == ["p", "e", "m"]


@pytest.mark.parametrize(
    ("matrix", "warnings"),
    [
        pytest.param(
            ':axes ((:name "v" :path "@release-name" :values ("a")))',
            [
                "defenvmatrix m: axis 'v': path '@release-name' names no field (one of @version, @profile, "
                "@chart-ref); it is written into valuesOverlay as a key"
            ],
            id="an axis path that names no field is a warning",
        ),
        pytest.param(
            ':axes ((:name "v" :values (1 2))) :select (:Explicit ((0) (2)))',
            ["defenvmatrix m: select Explicit tuple 1 [2] is out of range for axis lengths 2: dropped"],
            id="an Explicit tuple out of range is a warning",
        ),
        pytest.param(
            ':axes ((:name "v" :values (1 2 3))) :budget (:max-envs 2)',
            ["defenvmatrix m: budget maxEnvs 2 is below the 3 selected environments: 1 dropped"],
            id="a budget cap below the product is a warning",
        ),
        pytest.param(
            ':axes ((:name "v" :values (1 1)))',
            ["defenvmatrix m-v-1: the name is used twice; the later document replaces the earlier"],
            id="two environments with one name are a warning",
        ),
    ],
)
def test_what_the_expansion_drops_is_reported_as_a_warning(matrix: str, warnings: list[str]) -> None:
    assert compile_report(f"(defenvmatrix m {BASE} {matrix})").warnings == warnings


def test_a_cel_condition_that_does_not_compile_fails_the_compile_naming_it() -> None:
    src = (
        f"(defenvmatrix m {BASE} :axes ())"
        ' (defephemeral e :aplicacao (:chart-ref "c" :version "1")'
        ' :preconditions ((:kind Cel :params (:expression "a &&"))))'
    )
    with pytest.raises(
        CompileProblem, match=r"^defephemeral e: spec\.boundary\.preconditions\[0\]: CEL expression does not compile: "
    ):
        compile_lisp(src)


def test_dry_run_prints_names_and_coordinates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(EXAMPLE), "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "NAME                                 FORM          COORDINATE  VALUES",
        "echo-sweep-version-0-5-4-replicas-1  defenvmatrix  [0,0]       version=0.5.4 replicas=1",
        "echo-sweep-version-0-5-5-replicas-1  defenvmatrix  [1,0]       version=0.5.5 replicas=1",
        "echo-sweep-version-0-5-4-replicas-3  defenvmatrix  [0,1]       version=0.5.4 replicas=3",
        "echo-sweep-version-0-5-5-replicas-3  defenvmatrix  [1,1]       version=0.5.5 replicas=3",
    ]


def test_the_cli_prints_warnings_on_stderr_and_fails_on_a_bad_cel_expression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warn = tmp_path / "warn.lisp"
    warn.write_text(f'(defenvmatrix m {BASE} :axes ((:name "v" :values ())))')
    assert main(["compile", str(warn)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"tatara: {warn}: warning: defenvmatrix m: axis 'v' has no values (values must be a non-empty list): "
        "the matrix expands to nothing",
        f"tatara: {warn}: nothing to write: no defpoint, defephemeral or defenvmatrix form, "
        "or only matrices that expand to nothing",
    ]
    bad = tmp_path / "bad.lisp"
    bad.write_text(
        '(defenvmatrix m :axes () :base (:aplicacao (:chart-ref "c" :version "1")'
        ' :postconditions ((:kind Cel :params (:expression "1 +")))))'
    )
    assert main(["compile", str(bad)]) == 1
    assert capsys.readouterr().err.startswith(f"tatara: {bad}: defenvmatrix m: spec.boundary.postconditions[0]: ")
