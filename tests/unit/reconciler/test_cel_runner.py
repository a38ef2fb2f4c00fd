"""reconciler.cel_runner and the worker-side limits of reconciler.cel: evaluations run in a real worker
process under a CPU-time and a memory limit, and results are reused only for the same inputs
(docs/behaviour.md#cel-conditions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.cel import CelResult, evaluate_expression, inputs_digest, referenced
from reconciler.cel_runner import CelRunner, expressions
from shared.domain.api.boundary import Condition
from shared.domain.api.codec import convert

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
VARIABLES: dict[str, Any] = {"process": {"metadata": {"name": "p"}}, "children": [{"ready": True}],
                             "childProcesses": [], "now": NOW}

# Each step doubles the value's size: comparing two such values costs 2**steps (2**24 ≈ 1.7e7 node
# comparisons, over 20 s of CPU measured on this machine; the limit is 0.25 s).
DOUBLING = "[1]" + ".map(x, [x, x])" * 24
EXPONENTIAL = f"({DOUBLING}) == ({DOUBLING})"
# Each step doubles a string: 8 bytes · 2**40 is far beyond any memory limit.
MEMORY_BOMB = "size(['aaaaaaaa']" + ".map(x, x + x)" * 40 + ") == 1"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        pytest.param("true", (), id="a constant reads nothing"),
        pytest.param("children.all(c, c.ready == true)", ("children",), id="a comprehension variable is not an input"),
        pytest.param("now > timestamp('2020-01-01T00:00:00Z') && process.x == 1", ("process", "now"),
                     id="inputs come in the fixed order process, children, childProcesses, now"),
        pytest.param("childProcesses.size() == 0", ("childProcesses",), id="childProcesses alone"),
    ],
)
def test_referenced_names_the_variables_an_expression_reads(source: str, names: tuple[str, ...]) -> None:
    assert referenced(source) == names


@pytest.mark.parametrize(
    ("source", "changed", "same"),
    [
        pytest.param("children.all(c, c.ready)", {"now": NOW + timedelta(seconds=1)}, True,
                     id="a new instant does not change an expression that does not read now"),
        pytest.param("now > timestamp('2020-01-01T00:00:00Z')", {"now": NOW + timedelta(seconds=1)}, False,
                     id="a new instant changes one that reads now"),
        pytest.param("children.all(c, c.ready)", {"children": [{"ready": False}]}, False,
                     id="a child's status changes the inputs of one that reads children"),
        pytest.param("process.metadata.name == 'p'", {"children": []}, True,
                     id="children do not matter to one that reads only the process"),
        pytest.param("process.metadata.name == 'p'", {"process": {"metadata": {"name": "p"}, "status": {}}}, False,
                     id="a status write changes the inputs of one that reads the process"),
    ],
)
def test_the_inputs_digest_changes_exactly_when_a_read_variable_changes(
        source: str, changed: dict[str, Any], same: bool) -> None:
    assert (inputs_digest(source, VARIABLES) == inputs_digest(source, {**VARIABLES, **changed})) is same


def test_the_digest_names_the_expression() -> None:
    assert inputs_digest("true", VARIABLES) != inputs_digest("true == true", VARIABLES)


def test_expressions_lists_the_cel_conditions_that_compile_once_each() -> None:
    conditions = convert([
        {"kind": "Cel", "params": {"expression": "true"}},
        {"kind": "Cel", "params": {"expression": "1 +"}},
        {"kind": "PromQL", "params": {"query": "up"}},
        {"kind": "Cel", "params": {"expression": "true"}},
        {"kind": "Cel", "params": {}},
    ], list[Condition])
    assert expressions(conditions) == ["true"]


@pytest.mark.parametrize(
    ("source", "value"),
    [
        pytest.param("children.all(c, c.ready == true)", True, id="true"),
        pytest.param("process.metadata.name == 'q'", False, id="false"),
        pytest.param("now == timestamp('2025-06-01T12:00:00Z')", True, id="now is the given instant"),
        pytest.param("1 / 0 == 1", None, id="a runtime error"),
        pytest.param("process.nope == 1", None, id="a missing key"),
        pytest.param("1 +", None, id="no compile"),
    ],
)
async def test_a_worker_evaluates_as_the_pure_function_does_in_process(source: str, value: bool | None) -> None:
    result = await CelRunner().evaluate(source, VARIABLES)
    assert result.value is value
    assert result == evaluate_expression(source, VARIABLES)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(EXPONENTIAL, id="an exponential comparison is stopped at its CPU limit"),
        pytest.param(MEMORY_BOMB, id="an exponential string is stopped at its memory or CPU limit"),
    ],
)
async def test_an_expression_beyond_its_cost_is_stopped_and_the_next_one_still_runs(source: str) -> None:
    runner = CelRunner()
    result = await runner.evaluate(source, VARIABLES)
    assert result == CelResult(None, "CEL expression exceeded its cost: evaluation stopped at its limit of "
                                     "0.25 s of CPU time or 128 MiB of memory")
    assert runner.stats.exceeded == 1
    assert await runner.evaluate("true", VARIABLES) == CelResult(True)


async def test_a_result_is_reused_for_the_same_inputs_only() -> None:
    runner = CelRunner()
    source = "children.all(c, c.ready == true)"
    assert await runner.evaluate(source, VARIABLES) == CelResult(True)
    assert await runner.evaluate(source, {**VARIABLES, "now": NOW + timedelta(seconds=5)}) == CelResult(True)
    assert (runner.stats.evaluations, runner.stats.hits) == (1, 1)
    assert await runner.evaluate(source, {**VARIABLES, "children": [{"ready": False}]}) == CelResult(False)
    assert (runner.stats.evaluations, runner.stats.hits) == (2, 1)


async def test_a_cost_overrun_is_remembered_for_the_same_inputs() -> None:
    runner = CelRunner()
    first = await runner.evaluate(EXPONENTIAL, VARIABLES)
    assert await runner.evaluate(EXPONENTIAL, VARIABLES) == first
    assert (runner.stats.evaluations, runner.stats.hits, runner.stats.exceeded) == (1, 1, 1)


async def test_a_worker_that_gives_no_answer_in_time_is_an_error_for_this_pass_only() -> None:
    runner = CelRunner(wall_seconds=0.0)
    result = await runner.evaluate("true", VARIABLES)
    assert result == CelResult(None, "CEL evaluation error: no answer within 0 s")
    assert (await runner.evaluate("true", VARIABLES)).error == result.error
    assert runner.stats.hits == 0


async def test_an_expression_that_exceeded_its_cost_is_held_back_for_any_inputs_until_the_backoff_ends() -> None:
    """Reading ``now``, it has new inputs each pass: without the hold-back every pass would cost a worker."""
    clock = [1000.0]
    runner = CelRunner(overrun_backoff=300.0, clock=lambda: clock[0])
    source = f"{EXPONENTIAL} && now > timestamp('2020-01-01T00:00:00Z')"
    first = await runner.evaluate(source, VARIABLES)
    assert first.error.startswith("CEL expression exceeded its cost")
    clock[0] += 299.0
    assert await runner.evaluate(source, {**VARIABLES, "now": NOW + timedelta(seconds=1)}) == first
    assert (runner.stats.evaluations, runner.stats.exceeded, runner.stats.held_back) == (1, 1, 1)
    assert await runner.evaluate("true", VARIABLES) == CelResult(True)  # other expressions still run
    clock[0] += 2.0
    assert await runner.evaluate(source, {**VARIABLES, "now": NOW + timedelta(seconds=2)}) == first
    assert (runner.stats.evaluations, runner.stats.exceeded, runner.stats.held_back) == (3, 2, 1)
