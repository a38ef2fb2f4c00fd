"""Boundary (pre/postcondition) evaluation over a snapshot: docs/behaviour.md#boundary-conditions
(each kind: docs/behaviour.md#condition-kinds; ``boundary.timeout``: docs/behaviour.md#boundary-timeout).

Pure: reads only :class:`~reconciler.decision.Observed`. Objects a condition names (a Job, a
receipt ConfigMap, a Kustomization in another namespace) are looked up in ``observed.children``
by :class:`ChildRef`; the controller fetches them beforehand (:mod:`reconciler.prefetch`):
:func:`referenced_refs` lists them and :func:`promql_queries` the PromQL queries for
``observed.prometheus``. Missing from the snapshot means absent (a 404). Nothing here raises: bad
params and unknown kinds give an Unknown row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Final, TypeVar

import msgspec

from reconciler import cel
from reconciler.children import ChildRef, ChildState
from reconciler.decision import Observed
from shared.domain.api.boundary import Condition, ConditionKind
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import CheckedCondition, Process
from shared.domain.api.receipt import ReceiptEnvelope, ReceiptError, parse_either
from shared.domain.duration import parse_duration
from shared.domain.resources import HELM_RELEASES, KUSTOMIZATIONS
from shared.kube.meta import namespace_of

__all__ = [
    "DEFAULT_TIMEOUT",
    "NIX_EVAL_MESSAGE",
    "BoundaryResult",
    "Outcome",
    "Verdict",
    "boundary_timeout",
    "cel_problems",
    "check",
    "evaluate",
    "promql_queries",
    "receipt_of",
    "referenced_refs",
    "timeout_exceeded",
]

DEFAULT_TIMEOUT: Final = timedelta(seconds=900)
"""``boundary.timeout`` when absent (the reference's ``default_boundary_timeout_seconds``)."""

_JOB: Final = ("batch/v1", "Job")
_CONFIG_MAP: Final = ("v1", "ConfigMap")
_CONVERGING: Final = frozenset({ProcessPhase.EXECING, ProcessPhase.RUNNING, ProcessPhase.RECONVERGING})


class Outcome(Enum):
    """One condition's result. Unknown counts as unsatisfied."""

    SATISFIED = "Satisfied"
    UNSATISFIED = "Unsatisfied"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Verdict:
    """One condition's outcome and its message (empty when satisfied)."""

    outcome: Outcome
    message: str = ""


@dataclass(frozen=True)
class BoundaryResult:
    """Rows for ``status.boundary.pre/postconditions`` (the conditions' order) and the overall verdict."""

    rows: tuple[CheckedCondition, ...]
    satisfied: bool
    """True when every row is satisfied (also for no rows)."""


# ── params ─────────────────────────────────────────────────────────────────────


S = TypeVar("S", bound=msgspec.Struct)


class _PhaseParams(msgspec.Struct, rename="camel"):
    process_ref: str
    phase: ProcessPhase
    namespace: str | None = None


class _NamedParams(msgspec.Struct, rename="camel"):
    name: str
    namespace: str | None = None


class _JobParams(msgspec.Struct, rename="camel"):
    name: str
    namespace: str | None = None
    expect_receipt: bool = False
    receipt_config_map: str | None = None


class _ClosedLoopParams(msgspec.Struct, rename="camel"):
    namespace: str | None = None
    job_name: str | None = None
    receipt_config_map: str | None = None
    expected_root: str | None = None


class _PromParams(msgspec.Struct, rename="camel"):
    query: str


class _CelParams(msgspec.Struct, rename="camel"):
    expression: str


NIX_EVAL_MESSAGE: Final = "no Nix evaluator is configured"
"""NixEval's Unknown message (docs/divergences.md#boundary-cel)."""


class _BadParams(Exception):
    pass


def _params(params: object, model: type[S]) -> S:
    try:
        return msgspec.convert(params if params is not None else {}, model)
    except msgspec.ValidationError as err:
        raise _BadParams(str(err)) from None


# ── per kind ────────────────────────────────────────────────────────────────────


def _process_phase(params: _PhaseParams, process: Process, observed: Observed) -> Verdict:
    ns = params.namespace or namespace_of(process)
    ref = f"{ns}/{params.process_ref}"
    target = observed.processes_by_ref.get(ref)
    if target is None:
        return Verdict(Outcome.UNSATISFIED, f"process {ref} not found")
    actual = target.phase
    if actual.rank >= params.phase.rank:
        return Verdict(Outcome.SATISFIED)
    return Verdict(Outcome.UNSATISFIED, f"{ref} is {actual.value}; need at least {params.phase.value}")


def _flux_ready(label: str, api_version: str, params: _NamedParams, process: Process, observed: Observed) -> Verdict:
    ns = params.namespace or namespace_of(process)
    state = observed.children.get(ChildRef(api_version, label, ns, params.name))
    if state is None:
        return Verdict(Outcome.UNSATISFIED, f"{label} {ns}/{params.name} not found")
    if state.ready is True:
        return Verdict(Outcome.SATISFIED)
    if state.ready is False:
        return Verdict(Outcome.UNSATISFIED, state.message or f"{label} not ready")
    return Verdict(Outcome.UNKNOWN, f"{label} condition unknown")


def _lookup(observed: Observed, api_kind: tuple[str, str], ns: str, name: str) -> ChildState | None:
    return observed.children.get(ChildRef(api_kind[0], api_kind[1], ns, name))


def _job_counts(job: ChildState) -> tuple[int, int, int]:
    status = job.object.get("status")
    status = status if isinstance(status, Mapping) else {}

    def count(key: str) -> int:
        value = status.get(key)
        return value if isinstance(value, int) else 0

    return count("succeeded"), count("failed"), count("active")


def receipt_of(config_map: ChildState) -> ReceiptEnvelope:
    """The receipt a ConfigMap holds: ``data["receipt.json"]``, else ``data["receipt.yaml"]``, parsed
    JSON first, YAML second (docs/wire-format.md#receipts).

    Raises:
        ReceiptError: neither key holds a string (``ConfigMap missing data['receipt.json' |
            'receipt.yaml'] string key``), or the value does not parse or has the wrong shape.
    """
    data = config_map.object.get("data")
    data = data if isinstance(data, Mapping) else {}
    payload = data.get("receipt.json")
    if not isinstance(payload, str):
        payload = data.get("receipt.yaml")
    if not isinstance(payload, str):
        raise ReceiptError("ConfigMap missing data['receipt.json' | 'receipt.yaml'] string key")
    return parse_either(payload)


def _receipt(observed: Observed, ns: str, cm: str, expected_root: str | None) -> str | None:
    """The receipt check (docs/wire-format.md#receipts): None when the receipt verifies, ``"missing"`` or
    a malformed reason otherwise."""
    state = _lookup(observed, _CONFIG_MAP, ns, cm)
    if state is None:
        return "missing"
    try:
        receipt_of(state).expect_root(expected_root)
    except ReceiptError as err:
        return str(err)
    return None


def _job_failure(observed: Observed, ns: str, name: str, where: str, *, counts: bool) -> Verdict | None:
    """None when Job ``ns/name`` succeeded; else why not (not found, failed, still running — with the
    succeeded/active counts when ``counts``). ``where`` names the Job in the message."""
    job = _lookup(observed, _JOB, ns, name)
    if job is None:
        return Verdict(Outcome.UNSATISFIED, f"{where} not found")
    succeeded, failed, active = _job_counts(job)
    if failed > 0:
        return Verdict(Outcome.UNSATISFIED, f"{where} failed (status.failed={failed})")
    if succeeded < 1:
        detail = f" (succeeded={succeeded}, active={active})" if counts else ""
        return Verdict(Outcome.UNSATISFIED, f"{where} still running{detail}")
    return None


def _receipt_verdict(observed: Observed, ns: str, cm: str, expected_root: str | None, *,
                     missing: str, malformed: str) -> Verdict:
    """Satisfied when receipt ConfigMap ``ns/cm`` verifies; else ``missing``, or ``malformed`` + ``: <why>``."""
    problem = _receipt(observed, ns, cm, expected_root)
    if problem == "missing":
        return Verdict(Outcome.UNSATISFIED, missing)
    if problem is not None:
        return Verdict(Outcome.UNSATISFIED, f"{malformed}: {problem}")
    return Verdict(Outcome.SATISFIED)


def _job_attested(params: _JobParams, process: Process, observed: Observed) -> Verdict:
    ns = params.namespace or namespace_of(process)
    where = f"Job {ns}/{params.name}"
    failure = _job_failure(observed, ns, params.name, where, counts=True)
    if failure is not None:
        return failure
    if not params.expect_receipt:
        return Verdict(Outcome.SATISFIED)
    cm = params.receipt_config_map or f"{params.name}-receipt"
    return _receipt_verdict(observed, ns, cm, None,
                            missing=f"{where} succeeded but receipt ConfigMap {ns}/{cm} missing",
                            malformed=f"{where} receipt malformed")


def _closed_loop(params: _ClosedLoopParams, process: Process, observed: Observed) -> Verdict:
    ns = params.namespace or namespace_of(process)
    job_name = params.job_name or f"{process.metadata.name}-closed-loop-probe"
    failure = _job_failure(observed, ns, job_name, f"closed-loop probe Job {ns}/{job_name}", counts=False)
    if failure is not None:
        return failure
    cm = params.receipt_config_map or f"{job_name}-receipt"
    return _receipt_verdict(observed, ns, cm, params.expected_root,
                            missing=f"closed-loop receipt ConfigMap {ns}/{cm} missing",
                            malformed="closed-loop receipt malformed")


def _promql(params: _PromParams, observed: Observed) -> Verdict:
    """Truthy scalar → Satisfied; the controller pre-fetched the result (:mod:`reconciler.prefetch`)."""
    if params.query not in observed.prometheus:
        return Verdict(Outcome.UNKNOWN, "no Prometheus URL configured")
    value = observed.prometheus[params.query]
    if value is None:
        return Verdict(Outcome.UNKNOWN, f"PromQL query {params.query!r} failed or returned no sample")
    if value != 0 and value == value:  # NaN is not truthy
        return Verdict(Outcome.SATISFIED)
    return Verdict(Outcome.UNSATISFIED, f"PromQL query {params.query!r} returned {value:g}")


NOT_EVALUATED: Final = "CEL expression {expression!r} is not evaluated yet"
"""A Cel row whose result ``observed.cel`` lacks: the controller evaluates the conditions of the cached
phase, so a decision made on a live object in another phase can miss one. Unknown for that pass, not an
evaluation error (no Warning); the next pass evaluates it."""


def _cel(params: _CelParams, process: Process, observed: Observed) -> Verdict:
    """True → Satisfied, False → Unsatisfied, no bool → Unknown (docs/behaviour.md#cel-conditions).

    The result comes from ``observed.cel`` (evaluated beforehand in a bounded worker); when that is None
    (a pure caller), the expression is evaluated here.
    """
    if observed.cel is not None:
        result = observed.cel.get(params.expression) or cel.CelResult(
            None, NOT_EVALUATED.format(expression=params.expression))
    else:
        variables = cel.activation(process, observed.children, observed.child_processes, observed.now)
        result = cel.evaluate_expression(params.expression, variables)
    if result.value is None:
        return Verdict(Outcome.UNKNOWN, result.error)
    if result.value:
        return Verdict(Outcome.SATISFIED)
    return Verdict(Outcome.UNSATISFIED, f"CEL expression {params.expression!r} is false")


_PARAM_LABEL: Final[Mapping[ConditionKind, str]] = {
    ConditionKind.PROCESS_PHASE: "ProcessPhase",
    ConditionKind.KUSTOMIZATION_HEALTHY: "Kustomization",
    ConditionKind.HELM_RELEASE_RELEASED: "HelmRelease",
    ConditionKind.JOB_ATTESTED: "JobAttested",
    ConditionKind.CLOSED_LOOP_AUTH: "ClosedLoopAuth",
    ConditionKind.PROM_QL: "PromQL",
    ConditionKind.CEL: "Cel",
}


def check(condition: Condition, process: Process, observed: Observed) -> Verdict:
    """One condition's verdict. Never raises."""
    kind = condition.kind
    try:
        if kind is ConditionKind.PROCESS_PHASE:
            return _process_phase(_params(condition.params, _PhaseParams), process, observed)
        if kind is ConditionKind.KUSTOMIZATION_HEALTHY:
            named = _params(condition.params, _NamedParams)
            return _flux_ready("Kustomization", KUSTOMIZATIONS.api_version, named, process, observed)
        if kind is ConditionKind.HELM_RELEASE_RELEASED:
            named = _params(condition.params, _NamedParams)
            return _flux_ready("HelmRelease", HELM_RELEASES.api_version, named, process, observed)
        if kind is ConditionKind.JOB_ATTESTED:
            return _job_attested(_params(condition.params, _JobParams), process, observed)
        if kind is ConditionKind.CLOSED_LOOP_AUTH:
            return _closed_loop(_params(condition.params, _ClosedLoopParams), process, observed)
        if kind is ConditionKind.PROM_QL:
            return _promql(_params(condition.params, _PromParams), observed)
        if kind is ConditionKind.CEL:
            return _cel(_params(condition.params, _CelParams), process, observed)
        if kind is ConditionKind.NIX_EVAL:
            return Verdict(Outcome.UNKNOWN, NIX_EVAL_MESSAGE)
    except _BadParams as err:
        return Verdict(Outcome.UNKNOWN, f"{_PARAM_LABEL[kind]} params invalid: {err}")
    except Exception as err:  # a bug in one evaluator must not block the Process
        return Verdict(Outcome.UNKNOWN, f"{kind.value} evaluation error: {err}")
    return Verdict(Outcome.UNKNOWN, kind.stub_message or f"condition kind {kind.value!r} is not supported")


def evaluate(conditions: Sequence[Condition], observed: Observed) -> BoundaryResult:
    """Evaluate ``conditions`` in order against ``observed``.

    Each row: ``{kind, params, satisfied, lastCheck: observed.now, message}`` with the message
    left out when satisfied. ``satisfied`` on the result is the AND of all rows.
    """
    process = observed.process
    rows = []
    for condition in conditions:
        verdict = check(condition, process, observed)
        ok = verdict.outcome is Outcome.SATISFIED
        rows.append(
            CheckedCondition(
                kind=condition.kind,
                params=condition.params,
                satisfied=ok,
                last_check=observed.now,
                message=None if ok else verdict.message,
            )
        )
    return BoundaryResult(rows=tuple(rows), satisfied=all(r.satisfied for r in rows))


# ── what must be fetched beforehand ───────────────────────────────────────────


def referenced_refs(conditions: Sequence[Condition], process: Process) -> list[ChildRef]:
    """Objects the conditions read from ``observed.children`` (Kustomizations, HelmReleases,
    Jobs, receipt ConfigMaps), in order, without duplicates. Bad params are skipped."""
    ns = namespace_of(process)
    out: list[ChildRef] = []
    for c in conditions:
        try:
            if c.kind is ConditionKind.KUSTOMIZATION_HEALTHY:
                p = _params(c.params, _NamedParams)
                out.append(ChildRef(KUSTOMIZATIONS.api_version, "Kustomization", p.namespace or ns, p.name))
            elif c.kind is ConditionKind.HELM_RELEASE_RELEASED:
                p = _params(c.params, _NamedParams)
                out.append(ChildRef(HELM_RELEASES.api_version, "HelmRelease", p.namespace or ns, p.name))
            elif c.kind is ConditionKind.JOB_ATTESTED:
                j = _params(c.params, _JobParams)
                out.append(ChildRef(*_JOB, j.namespace or ns, j.name))
                if j.expect_receipt:
                    out.append(ChildRef(*_CONFIG_MAP, j.namespace or ns, j.receipt_config_map or f"{j.name}-receipt"))
            elif c.kind is ConditionKind.CLOSED_LOOP_AUTH:
                cl = _params(c.params, _ClosedLoopParams)
                job = cl.job_name or f"{process.metadata.name}-closed-loop-probe"
                out.append(ChildRef(*_JOB, cl.namespace or ns, job))
                out.append(ChildRef(*_CONFIG_MAP, cl.namespace or ns, cl.receipt_config_map or f"{job}-receipt"))
        except _BadParams:
            continue
    return list(dict.fromkeys(out))


def cel_problems(process: Process) -> list[str]:
    """Why the Cel conditions of ``process`` can never be evaluated, each
    ``spec.boundary.<pre|post>conditions[<i>]: <why>`` (params missing or not a string, an expression
    too long or too nested, not CEL): the phase machine marks the Process Stalled with them
    (docs/behaviour.md#cel-conditions). Empty when every Cel condition compiles."""
    out: list[str] = []
    spec = process.spec.boundary
    for field, conditions in (("preconditions", spec.preconditions), ("postconditions", spec.postconditions)):
        for i, c in enumerate(conditions):
            if c.kind is not ConditionKind.CEL:
                continue
            params = c.params if isinstance(c.params, Mapping) else {}
            problem = cel.compile_problem(params.get("expression"))
            if problem is not None:
                out.append(f"spec.boundary.{field}[{i}]: {problem}")
    return out


def promql_queries(conditions: Sequence[Condition]) -> list[str]:
    """The PromQL queries to pre-fetch into ``observed.prometheus``, in order, deduplicated."""
    out: list[str] = []
    for c in conditions:
        if c.kind is ConditionKind.PROM_QL:
            try:
                out.append(_params(c.params, _PromParams).query)
            except _BadParams:
                continue
    return list(dict.fromkeys(out))


# ── timeout ───────────────────────────────────────────────────────────────────


def boundary_timeout(process: Process) -> timedelta:
    """``spec.boundary.timeout`` parsed (humantime), or :data:`DEFAULT_TIMEOUT` (15m).

    Raises :class:`shared.domain.duration.DurationError` for an unparsable value (an invalid spec).
    """
    text = process.spec.boundary.timeout
    return DEFAULT_TIMEOUT if text is None else parse_duration(text)


def timeout_exceeded(process: Process, now: datetime) -> bool:
    """True when a converging Process (Execing, Running, Reconverging) is past its boundary deadline.

    The deadline is ``status.boundary.deadline`` when the phase machine wrote one (on entering
    Execing: ``now + boundary_timeout``), else ``status.phaseSince + boundary_timeout``. Other
    phases, or no anchor → False. Raises ``DurationError`` for an unparsable ``boundary.timeout``.
    """
    deadline = boundary_deadline(process)
    return deadline is not None and now >= deadline


def boundary_deadline(process: Process) -> datetime | None:
    """The instant a converging Process times out (see :func:`timeout_exceeded`), or None.

    Raises ``DurationError`` for an unparsable ``boundary.timeout``.
    """
    status = process.status
    if status is None or status.phase not in _CONVERGING:
        return None
    if status.boundary.deadline is not None:
        return status.boundary.deadline
    if status.phase_since is None:
        return None
    return status.phase_since + boundary_timeout(process)
