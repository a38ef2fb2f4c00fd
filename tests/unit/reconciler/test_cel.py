"""reconciler.cel: the cost bounds, the time limit and its per-generation memo, and the compile
problems the phase machine stalls on (docs/behaviour.md#cel-conditions)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.boundary import Outcome, cel_problems, check
from reconciler.cel import (
    CelError,
    CelResult,
    check_bounds,
    compile_problem,
    constant_type_error,
    evaluate_expression,
    is_error,
)
from reconciler.children import ChildRef, ChildState
from reconciler.decision import Observed
from shared.domain.api.boundary import Condition
from shared.domain.api.codec import convert
from shared.domain.api.process import Process

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("[1, 2].all(a, [3].exists(b, a < b))", id="two nested comprehensions are allowed"),
        pytest.param("[1].map(a, a).filter(b, b > 0).all(c, c > 0)", id="chained comprehensions do not nest"),
        pytest.param('"x.all(a, y.all(b, z.all(c, true)))" != ""', id="macro text inside a string is not counted"),
        pytest.param("'''.all(''' + \"\" == '''.all('''", id="triple-quoted strings are skipped"),
        pytest.param("all(1) // .all(a, .all(b, .all(c,", id="a comment is skipped"),
        pytest.param("x" * 1024, id="exactly the longest source is allowed"),
    ],
)
def test_sources_within_the_bounds_pass(source: str) -> None:
    check_bounds(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(
            "[1].all(a, [1].map(b, [1].filter(c, true)))",
            "comprehensions nested 3 deep; at most 2 are allowed",
            id="three nested comprehensions are refused",
        ),
        pytest.param(
            "[1] . exists (a, [1].exists_one(b, [1] .all( c, true)))",
            "comprehensions nested 3 deep",
            id="spaces around the macro name do not hide it",
        ),
        pytest.param(
            "x" * 1025, "expression is 1025 characters long; at most 1024 are allowed", id="one more is refused"
        ),
    ],
)
def test_sources_beyond_the_bounds_are_refused(source: str, message: str) -> None:
    with pytest.raises(CelError, match=message):
        check_bounds(source)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        pytest.param("true", None, id="a valid expression has no problem"),
        pytest.param(None, "params.expression must be a string", id="a missing expression is a problem"),
        pytest.param(3, "params.expression must be a string", id="a number is not an expression"),
        pytest.param("a &&", "CEL expression does not compile: Failed to parse", id="a syntax error is a problem"),
    ],
)
def test_compile_problem(source: object, problem: str | None) -> None:
    got = compile_problem(source)
    if problem is None:
        assert got is None
    else:
        assert got is not None
        assert got.startswith(problem)


def test_an_evaluation_depends_only_on_its_expression_and_variables() -> None:
    variables = {"x": 2}
    first = [evaluate_expression("x > 1", variables) for _ in range(3)]
    assert first == [CelResult(True)] * 3
    assert evaluate_expression("x > 1", {"x": 0}) == CelResult(False)


def _process(pre: list[Any], post: list[Any]) -> Process:
    return convert(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "classification": {"pointType": "Gate", "substrate": "Compute"},
                "intent": {},
                "boundary": {"preconditions": pre, "postconditions": post},
            },
        },
        Process,
    )


@pytest.mark.parametrize(
    ("pre", "post", "problems"),
    [
        pytest.param(
            [], [{"kind": "Cel", "params": {"expression": "true"}}], [], id="compiling conditions give nothing"
        ),
        pytest.param(
            [{"kind": "PromQL", "params": {"query": "up"}}, {"kind": "Cel", "params": {"expression": "1 +"}}],
            [],
            ["spec.boundary.preconditions[1]: CEL expression does not compile: Failed to parse"],
            id="a precondition that does not compile is named by its index",
        ),
        pytest.param(
            [],
            [{"kind": "Cel", "params": None}],
            ["spec.boundary.postconditions[0]: params.expression must be a string"],
            id="a postcondition without params is named",
        ),
        pytest.param([{"kind": "NixEval", "params": None}], [], [], id="other kinds are not checked"),
    ],
)
def test_cel_problems_name_each_bad_condition(pre: list[Any], post: list[Any], problems: list[str]) -> None:
    got = cel_problems(_process(pre, post))
    assert len(got) == len(problems)
    for text, prefix in zip(got, problems, strict=True):
        assert text.startswith(prefix)


def _child(name: str, phase: str) -> Process:
    return convert(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"}, "intent": {}},
            "status": {"phase": phase},
        },
        Process,
    )


@pytest.mark.parametrize(
    ("expression", "outcome"),
    [
        pytest.param(
            'childProcesses.map(p, p.name) == ["a", "b"]', Outcome.SATISFIED, id="child processes are listed by name"
        ),
        pytest.param(
            'childProcesses.all(p, p.phase == "Attested")', Outcome.UNSATISFIED, id="child phases are visible"
        ),
        pytest.param(
            'childProcesses.exists(p, p.status.phase == "Running" && p.namespace == "ns")',
            Outcome.SATISFIED,
            id="child statuses are visible",
        ),
        pytest.param(
            "children.map(c, c.name) == ['j', 'k']",
            Outcome.SATISFIED,
            id="children are sorted by kind, namespace, name",
        ),
    ],
)
def test_an_expression_sees_the_child_processes_and_the_children(expression: str, outcome: Outcome) -> None:
    children = {
        c.ref: c
        for c in (
            ChildState(ref=ChildRef("batch/v1", "Job", "ns", "k"), ready=None),
            ChildState(ref=ChildRef("batch/v1", "Job", "ns", "j"), ready=None),
        )
    }
    observed = Observed(
        process=_child("me", "Running"),
        now=NOW,
        children=children,
        child_processes=(_child("a", "Attested"), _child("b", "Running")),
    )
    condition = convert({"kind": "Cel", "params": {"expression": expression}}, Condition)
    assert check(condition, observed.process, observed).outcome is outcome


@pytest.mark.parametrize(
    ("results", "verdict"),
    [
        pytest.param({"x == 1": CelResult(True)}, (Outcome.SATISFIED, ""), id="a true result is satisfied"),
        pytest.param({"x == 1": CelResult(False)}, (Outcome.UNSATISFIED, "CEL expression 'x == 1' is false"),
                     id="a false result is unsatisfied"),
        pytest.param({"x == 1": CelResult(None, "CEL expression exceeded its cost: …")},
                     (Outcome.UNKNOWN, "CEL expression exceeded its cost: …"), id="a cost overrun is unknown"),
        pytest.param({}, (Outcome.UNKNOWN, "CEL expression 'x == 1' is not evaluated yet"),
                     id="a missing result is unknown for this pass, not an evaluation error"),
    ],
)
def test_a_decision_reads_the_results_evaluated_beforehand(
        results: dict[str, CelResult], verdict: tuple[Outcome, str]) -> None:
    # `x` is no variable: evaluated here it would be an error, so the verdict must come from `results`
    observed = Observed(process=_child("me", "Running"), now=NOW, cel=results)
    condition = convert({"kind": "Cel", "params": {"expression": "x == 1"}}, Condition)
    found = check(condition, observed.process, observed)
    assert (found.outcome, found.message) == verdict
    # only the cost overrun is an evaluation error (a CelEvaluationFailed Warning); a missing result is not
    assert is_error(found.message) is found.message.startswith("CEL expression exceeded")


@pytest.mark.parametrize(("expression", "kind"), [
    ("'ready'", "string"), ("process.metadata.name", "string"), ("size(children)", "int"), ("2.5", "double"),
    ("b'x'", "bytes"), ("[true]", "list"), ("{'a': true}", "map"), ("now", "timestamp"), ("duration('1s')", "duration"),
    ("null", None), ("process.metadata.nothere", None), ("1 / 0 == 1", None), ("true", None), ("1 > 2", None),
], ids=lambda v: str(v))
def test_a_constant_type_error_is_a_value_of_a_kind_other_than_bool_or_null(expression: str, kind: str | None) -> None:
    variables = {"process": {"metadata": {"name": "p"}}, "children": [], "childProcesses": [], "now": NOW}
    result = evaluate_expression(expression, variables)
    assert constant_type_error(result.error or None) == kind
