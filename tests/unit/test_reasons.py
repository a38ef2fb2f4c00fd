"""One closed set of reasons per reconciler (docs/behaviour.md#reasons, docs/behaviour.md#pool-reasons):
no condition or Event reason is spelled as a string literal outside ``reasons.py``, the spellings on the
wire are the ones written before the sets existed, and the tables in behaviour.md are generated from the
sets."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from pool_reconciler.reasons import PoolReason
from reconciler.reasons import REFUSAL_REASONS, Reason, phase_event, signal_reason
from reconciler.signals import EffectKind, effect_of
from reconciler.transitions import LEGAL
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.signal import ProcessSignal, SignalPolicy
from shared.domain.reasons import On
from tools import gen_reasons

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("reconciler", "pool_reconciler")

NOT_YET: set[str] = set()
"""Files whose reasons are still literals (none: every file uses the sets)."""

POSITIONAL: dict[str, int] = {
    "Event.warning": 0,  # Event.warning(reason, message)
    "Event.normal": 0,  # Event.normal(reason, message)
    "Event": 1,  # Event(type, reason, message)
    "record": 3,  # recorder.record(resource, object, type, reason, message)
    "conditions_for": 3,
    "pool_conditions": 3,
    "allocation_conditions": 2,
    "with_conditions": 2,
    "DependencyProblem": 0,
}
"""Builders of conditions and Events: callee name → the index of its positional reason argument."""

KEYWORDS = frozenset({"reason", "why"})
"""Keyword arguments that carry a reason, on any call but :data:`NOT_A_REASON`'s."""

NOT_A_REASON = frozenset({"ConvergenceAction", "ChildState", "JobWaiting"})
"""Callees whose ``reason=`` is not one we write: a pause's sentence (``ConvergenceAction``), another
object's reason as read from the API (a child's condition, a Job's Warning Event)."""


def _callee(call: ast.Call) -> str:
    """``Event.warning`` for a method of a name, ``record`` for one of an expression, ``f`` for a name."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return f"{func.value.id}.{func.attr}" if isinstance(func.value, ast.Name) else func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _literals(node: ast.AST) -> list[ast.AST]:
    """String constants and f-strings anywhere in ``node`` (``a if c else "X"``, ``r or "X"`` count)."""
    return [n for n in ast.walk(node)
            if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))]


def literal_reasons(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every reason argument of a condition or Event builder in ``source`` that is
    spelled with a string literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node)
        short = name.rpartition(".")[2]
        args: list[ast.expr] = []
        at = POSITIONAL.get(name, POSITIONAL.get(short) if short == "record" else None)
        if at is not None and len(node.args) > at:
            args.append(node.args[at])
        if short not in NOT_A_REASON:
            args += [k.value for k in node.keywords if k.arg in KEYWORDS]
        found += [(arg.lineno, ast.unparse(arg)) for arg in args if _literals(arg)]
    return found


def spelled_reasons(source: str, values: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, value)`` of every string constant in ``source`` equal to a reason of the sets (a
    ``REASON = "X"`` beside the set), except the names in ``__all__`` and docstrings."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skipped.update(id(n) for n in ast.walk(node.value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in values and id(n) not in skipped]


def product_files() -> Iterator[Path]:
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name != "reasons.py" and rel not in NOT_YET:
                yield path


VALUES = frozenset({r.value for r in Reason} | {r.value for r in PoolReason})


def test_no_reason_is_a_string_literal_at_a_builder() -> None:
    found = {path.relative_to(ROOT).as_posix(): literal_reasons(path.read_text()) for path in product_files()}
    assert {k: v for k, v in found.items() if v} == {}


def test_no_reason_is_spelled_outside_the_sets() -> None:
    found = {path.relative_to(ROOT).as_posix(): spelled_reasons(path.read_text(), VALUES) for path in product_files()}
    assert {k: v for k, v in found.items() if v} == {}


@pytest.mark.parametrize("source", [
    'phase_write(observed, P.FAILED, "m", reason="Oops", requeue_after=1.0)',
    'message_write(observed, "m", reason="A" if x else Reason.DRAINING)',
    'Event.warning("Oops", message)',
    'Event.normal(f"Phase{target.value}", message)',
    'Event(EventType.NORMAL, reason or "Pending", message)',
    'conditions_for(phase, 1, now, "Oops", message)',
    'await recorder.record(R, table, EventType.WARNING, "Oops", message)',
    'WriteRefused("apply", ref, detail, status=403, why="Oops")',
])
def test_the_scan_finds_a_literal_reason(source: str) -> None:
    """The check itself can fail: each way a literal reason was once written is found."""
    assert len(literal_reasons(source)) == 1


def test_the_scans_pass_members_and_sentences() -> None:
    source = ('phase_write(o, P.FAILED, "a sentence", reason=Reason.DRAINING, requeue_after=1.0)\n'
              'Event.warning(REASON_HELD, f"held by {who}")\n'
              'ConvergenceAction("Pause", reason=f"{n} member(s) failed")\n'
              '__all__ = ["WriteRefused"]\n')
    assert literal_reasons(source) == []
    assert spelled_reasons(source, VALUES) == []
    assert spelled_reasons('WRITE_REFUSED = "WriteRefused"\n', VALUES) == [(1, "WriteRefused")]


# Every reason the reconcilers write, spelled as the code wrote it as a literal before the sets existed (the
# few added since, such as CelTypeError, ExportJobWaiting, MaxSizeReached and ResetRefused, as docs/behaviour.md names
# them): the sets must keep each byte for byte, and hold no other.
PROCESS_WIRE = {
    "MaxConcurrent", "Declared", "DependenciesUnmet", "SelfDependency", "DependencyCycle", "ParentNotFound",
    "PidRefused", "DependenciesSatisfied", "InvalidSpec", "BoundaryTimeout", "InvalidCelExpression",
    "CelTypeError", "CelEvaluationFailed", "PreconditionsUnmet", "IntentNotSupported", "Rendered",
    "ChildNotReady", "ChildStalled", "PostconditionsUnmet", "Attested", "SpecChanged", "Drift", "Reconverging",
    "LifetimeExpired", "Released", "ExportsRunning", "ExportJobWaiting", "ExportJobLost", "InvalidExport",
    "ExportFailed", "ExportsComplete", "ExportsFailed", "DeletionRequested", "Draining", "Exited", "Reaped",
    "WriteRefused", "KindNotServed", "StableNameGranted", "StableNameHeld", "StableNameReleased",
    "RoutingDrift", "SignalReceived", "SignalIgnored", "InvalidSignal", "SignalHup", "SignalTerm",
    "SignalKill", "SignalUsr1", "SignalUsr2", "IllegalTransition", "PhaseForking", "PhaseExecing",
    "PhaseRunning", "PhaseAttested", "PhaseReconverging", "PhaseReleasing", "PhaseExiting", "PhaseFailed",
    "PhaseZombie", "PhaseReaped", "Adopted", "DuplicatePid", "Counted", "Deleting", "ProcessTableRecreated",
    "ProcessTableInUse",
}
POOL_WIRE = {
    "MembersCreated", "InvalidTemplate", "MembersDeleted", "Paused", "MaxSizeReached", "Draining",
    "MemberReturned", "ResetStarted", "ResetFailed", "MemberReplacing", "Bound", "InvalidTtl", "MemberLost",
    "SpawnTimeout", "ResetRefused", "PoolOnOtherShard",
}


@pytest.mark.parametrize(("reasons", "wire"), [(Reason, PROCESS_WIRE), (PoolReason, POOL_WIRE)])
def test_the_sets_keep_the_wire_spellings(reasons: type[Reason] | type[PoolReason], wire: set[str]) -> None:
    assert sorted(r.value for r in reasons) == sorted(wire)
    assert all(str(r) == r.value and f"{r}" == r.value for r in reasons), "a member prints as its spelling"
    assert all(r.description and r.on for r in reasons), "each reason says where it is written and why"


def test_a_phase_change_event_has_a_member_for_every_target() -> None:
    targets = {t for ts in LEGAL.values() for t in ts}
    assert {phase_event(t).value for t in targets} == {f"Phase{t.value}" for t in targets}
    assert ProcessPhase.PENDING not in targets
    with pytest.raises(ValueError, match="not a Reason"):
        phase_event(ProcessPhase.PENDING)


def test_a_signal_phase_write_has_a_member_for_every_signal_that_writes_one() -> None:
    writes = {s for s in ProcessSignal for p in ProcessPhase
              if effect_of(s, p, SignalPolicy(sigkill_force=True)).kind not in (EffectKind.NOTHING, EffectKind.SUSPEND,
                                                                                EffectKind.RESUME)}
    assert {signal_reason(s).value for s in writes} == {"SignalHup", "SignalTerm", "SignalKill", "SignalUsr1",
                                                        "SignalUsr2"}


def test_refusals_are_the_two_write_stalls() -> None:
    assert sorted(REFUSAL_REASONS) == ["KindNotServed", "WriteRefused"]
    assert all(On.CONDITION in r.on and On.WARNING in r.on for r in REFUSAL_REASONS)


def test_the_behaviour_tables_are_current() -> None:
    assert gen_reasons.main(["--check"]) == 0


def test_a_stale_table_is_found() -> None:
    """The drift test can fail: a row edited by hand, or one missing, is written back by the generator."""
    text = gen_reasons.BEHAVIOUR.read_text()
    row = f"| `{Reason.DRAINING.value}` | {Reason.DRAINING.on.label} | {Reason.DRAINING.description} |"
    assert row in text
    assert gen_reasons.render(text.replace(row + "\n", "")) == text
    assert gen_reasons.render(text.replace(row, row.replace("Exiting", "Exited"))) == text
    with pytest.raises(ValueError, match="pool-reasons:begin"):
        gen_reasons.render(text.replace("<!-- pool-reasons:begin -->", ""))
