"""reconciler.boundary: one row per case of docs/behaviour.md#condition-kinds and the receipt checks of
docs/wire-format.md#receipts (the documented messages)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.boundary import (
    Outcome,
    boundary_timeout,
    check,
    evaluate,
    promql_queries,
    referenced_refs,
    timeout_exceeded,
)
from reconciler.children import ChildRef, ChildState
from reconciler.decision import Observed
from shared.domain.api.boundary import Condition
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.domain.duration import DurationError
from shared.domain.identity import compose_root

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def make(phase: str = "Running", name: str = "me", **status: Any) -> Process:
    return convert(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"}, "intent": {}},
            "status": {"phase": phase, **status},
        },
        Process,
    )


def child(
    api_version: str,
    kind: str,
    name: str,
    obj: dict[str, Any],
    *,
    ns: str = "ns",
    ready: bool | None = None,
    message: str = "",
) -> ChildState:
    return ChildState(ref=ChildRef(api_version, kind, ns, name), ready=ready, message=message, object=obj)


def receipt(root: str = "r", **over: Any) -> str:
    body = {
        "version": "tatara-receipt/v1",
        "kind": "closed-loop-auth",
        "composed_root": root,
        "intent_hash": "i",
        "artifact_hash": "a",
        "control_hash": "",
        "generated_at": "2025-01-01T00:00:00Z",
        **over,
    }
    return json.dumps(body)


def job(name: str, **status: int) -> ChildState:
    return child("batch/v1", "Job", name, {"status": status})


def cm(name: str, data: dict[str, Any]) -> ChildState:
    return child("v1", "ConfigMap", name, {"data": data})


def observed(
    *children: ChildState,
    processes: dict[str, Process] | None = None,
    prometheus: dict[str, float | None] | None = None,
) -> Observed:
    return Observed(
        process=make(),
        now=NOW,
        children={c.ref: c for c in children},
        processes_by_ref=processes or {},
        prometheus=prometheus or {},
    )


HR = "helm.toolkit.fluxcd.io/v2"
KS = "kustomize.toolkit.fluxcd.io/v1"

CASES: list[tuple[str, str, Any, Observed, Outcome, str]] = [
    # ProcessPhase
    (
        "ProcessPhase",
        "target at a higher rank",
        {"processRef": "dep", "phase": "Running"},
        observed(processes={"ns/dep": make("Attested", "dep")}),
        Outcome.SATISFIED,
        "",
    ),
    (
        "ProcessPhase",
        "target below the required rank",
        {"processRef": "dep", "phase": "Attested"},
        observed(processes={"ns/dep": make("Execing", "dep")}),
        Outcome.UNSATISFIED,
        "ns/dep is Execing; need at least Attested",
    ),
    (
        "ProcessPhase",
        "target in another namespace missing",
        {"processRef": "dep", "namespace": "o", "phase": "Running"},
        observed(),
        Outcome.UNSATISFIED,
        "process o/dep not found",
    ),
    (
        "ProcessPhase",
        "params without phase",
        {"processRef": "dep"},
        observed(),
        Outcome.UNKNOWN,
        "ProcessPhase params invalid: Object missing required field `phase`",
    ),
    # KustomizationHealthy / HelmReleaseReleased
    (
        "KustomizationHealthy",
        "Ready kustomization",
        {"name": "k"},
        observed(child(KS, "Kustomization", "k", {}, ready=True)),
        Outcome.SATISFIED,
        "",
    ),
    (
        "KustomizationHealthy",
        "missing kustomization",
        {"name": "k", "namespace": "flux-system"},
        observed(),
        Outcome.UNSATISFIED,
        "Kustomization flux-system/k not found",
    ),
    (
        "KustomizationHealthy",
        "not ready without message",
        {"name": "k"},
        observed(child(KS, "Kustomization", "k", {}, ready=False)),
        Outcome.UNSATISFIED,
        "Kustomization not ready",
    ),
    (
        "KustomizationHealthy",
        "unknown readiness",
        {"name": "k"},
        observed(child(KS, "Kustomization", "k", {})),
        Outcome.UNKNOWN,
        "Kustomization condition unknown",
    ),
    (
        "KustomizationHealthy",
        "params not an object",
        None,
        observed(),
        Outcome.UNKNOWN,
        "Kustomization params invalid: Object missing required field `name`",
    ),
    (
        "HelmReleaseReleased",
        "not ready carries the Flux message",
        {"name": "h"},
        observed(child(HR, "HelmRelease", "h", {}, ready=False, message="install failed")),
        Outcome.UNSATISFIED,
        "install failed",
    ),
    (
        "HelmReleaseReleased",
        "missing release",
        {"name": "h"},
        observed(),
        Outcome.UNSATISFIED,
        "HelmRelease ns/h not found",
    ),
    # JobAttested
    ("JobAttested", "missing job", {"name": "j"}, observed(), Outcome.UNSATISFIED, "Job ns/j not found"),
    (
        "JobAttested",
        "failed job",
        {"name": "j"},
        observed(job("j", failed=2)),
        Outcome.UNSATISFIED,
        "Job ns/j failed (status.failed=2)",
    ),
    (
        "JobAttested",
        "running job",
        {"name": "j"},
        observed(job("j", active=1)),
        Outcome.UNSATISFIED,
        "Job ns/j still running (succeeded=0, active=1)",
    ),
    ("JobAttested", "succeeded without receipt", {"name": "j"}, observed(job("j", succeeded=1)), Outcome.SATISFIED, ""),
    (
        "JobAttested",
        "receipt ConfigMap missing",
        {"name": "j", "expectReceipt": True},
        observed(job("j", succeeded=1)),
        Outcome.UNSATISFIED,
        "Job ns/j succeeded but receipt ConfigMap ns/j-receipt missing",
    ),
    (
        "JobAttested",
        "receipt without a payload key",
        {"name": "j", "expectReceipt": True, "receiptConfigMap": "c"},
        observed(job("j", succeeded=1), cm("c", {"other": "x"})),
        Outcome.UNSATISFIED,
        "Job ns/j receipt malformed: ConfigMap missing data['receipt.json' | 'receipt.yaml'] string key",
    ),
    (
        "JobAttested",
        "valid JSON receipt",
        {"name": "j", "expectReceipt": True},
        observed(job("j", succeeded=1), cm("j-receipt", {"receipt.json": receipt()})),
        Outcome.SATISFIED,
        "",
    ),
    (
        "JobAttested",
        "wrong receipt version",
        {"name": "j", "expectReceipt": True},
        observed(job("j", succeeded=1), cm("j-receipt", {"receipt.json": receipt(version="v0")})),
        Outcome.UNSATISFIED,
        'Job ns/j receipt malformed: version != tatara-receipt/v1 (got "v0")',
    ),
    (
        "JobAttested",
        "unknown receipt key is rejected",
        {"name": "j", "expectReceipt": True},
        observed(job("j", succeeded=1), cm("j-receipt", {"receipt.json": receipt(extra=1)})),
        Outcome.UNSATISFIED,
        "Job ns/j receipt malformed: invalid YAML",
    ),
    (
        "JobAttested",
        "YAML receipt accepted",
        {"name": "j", "expectReceipt": True},
        observed(
            job("j", succeeded=1),
            cm(
                "j-receipt",
                {
                    "receipt.yaml": "version: tatara-receipt/v1\nkind: k\n"
                    "composed_root: r\nintent_hash: i\nartifact_hash: a\n"
                    "control_hash: ''\ngenerated_at: 2025-01-01T00:00:00Z\n"
                },
            ),
        ),
        Outcome.SATISFIED,
        "",
    ),
    # ClosedLoopAuth
    (
        "ClosedLoopAuth",
        "probe job missing (default name)",
        {"issuer": {"service": "x"}},
        observed(),
        Outcome.UNSATISFIED,
        "closed-loop probe Job ns/me-closed-loop-probe not found",
    ),
    (
        "ClosedLoopAuth",
        "probe job still running",
        {"jobName": "p"},
        observed(job("p")),
        Outcome.UNSATISFIED,
        "closed-loop probe Job ns/p still running",
    ),
    (
        "ClosedLoopAuth",
        "probe job failed",
        {"jobName": "p"},
        observed(job("p", failed=1)),
        Outcome.UNSATISFIED,
        "closed-loop probe Job ns/p failed (status.failed=1)",
    ),
    (
        "ClosedLoopAuth",
        "receipt missing",
        {"jobName": "p"},
        observed(job("p", succeeded=1)),
        Outcome.UNSATISFIED,
        "closed-loop receipt ConfigMap ns/p-receipt missing",
    ),
    (
        "ClosedLoopAuth",
        "root mismatch",
        {"jobName": "p", "expectedRoot": "want"},
        observed(job("p", succeeded=1), cm("p-receipt", {"receipt.json": receipt("got")})),
        Outcome.UNSATISFIED,
        "closed-loop receipt malformed: composed_root mismatch (got got, want want)",
    ),
    (
        "ClosedLoopAuth",
        "root matches",
        {"jobName": "p", "expectedRoot": "want"},
        observed(job("p", succeeded=1), cm("p-receipt", {"receipt.json": receipt("want")})),
        Outcome.SATISFIED,
        "",
    ),
    (
        "ClosedLoopAuth",
        "bad params",
        {"jobName": 3},
        observed(),
        Outcome.UNKNOWN,
        "ClosedLoopAuth params invalid: Expected `str | null`, got `int` - at `$.jobName`",
    ),
    # PromQL
    (
        "PromQL",
        "no Prometheus configured",
        {"query": "up"},
        observed(),
        Outcome.UNKNOWN,
        "no Prometheus URL configured",
    ),
    (
        "PromQL",
        "fetch failed",
        {"query": "up"},
        observed(prometheus={"up": None}),
        Outcome.UNKNOWN,
        "PromQL query 'up' failed or returned no sample",
    ),
    ("PromQL", "truthy scalar", {"query": "up"}, observed(prometheus={"up": 1.0}), Outcome.SATISFIED, ""),
    (
        "PromQL",
        "zero scalar",
        {"query": "up"},
        observed(prometheus={"up": 0.0}),
        Outcome.UNSATISFIED,
        "PromQL query 'up' returned 0",
    ),
    # Cel (docs/behaviour.md#cel-conditions)
    ("Cel", "a true expression is satisfied", {"expression": "true"}, observed(), Outcome.SATISFIED, ""),
    (
        "Cel",
        "a false expression is unsatisfied and quoted",
        {"expression": "1 > 2"},
        observed(),
        Outcome.UNSATISFIED,
        "CEL expression '1 > 2' is false",
    ),
    (
        "Cel",
        "the Process is visible as its wire JSON",
        {"expression": 'process.metadata.name == "me" && process.status.phase == "Running"'},
        observed(),
        Outcome.SATISFIED,
        "",
    ),
    (
        "Cel",
        "the spec is visible with its defaults written",
        {"expression": "process.spec.signals.sigtermGraceSeconds == 480"},
        observed(),
        Outcome.SATISFIED,
        "",
    ),
    (
        "Cel",
        "children statuses are visible",
        {"expression": 'children.exists(c, c.kind == "Job" && c.name == "j" && c.status.succeeded >= 1)'},
        observed(job("j", succeeded=1)),
        Outcome.SATISFIED,
        "",
    ),
    (
        "Cel",
        "child readiness is visible",
        {"expression": "children.all(c, c.ready == true)"},
        observed(child(HR, "HelmRelease", "hr", {}, ready=None)),
        Outcome.UNSATISFIED,
        "CEL expression 'children.all(c, c.ready == true)' is false",
    ),
    (
        "Cel",
        "now is a timestamp after an earlier instant",
        {"expression": 'now > timestamp("2025-05-31T12:00:00Z")'},
        observed(),
        Outcome.SATISFIED,
        "",
    ),
    (
        "Cel",
        "now is not after a later instant",
        {"expression": 'now > timestamp("2025-06-01T12:00:01Z")'},
        observed(),
        Outcome.UNSATISFIED,
        "CEL expression",
    ),
    (
        "Cel",
        "a non-bool result is unknown",
        {"expression": "process.status.phase"},
        observed(),
        Outcome.UNKNOWN,
        "CEL expression returned string, not a bool",
    ),
    (
        "Cel",
        "a syntax error is unknown and says it does not compile",
        {"expression": "1 +"},
        observed(),
        Outcome.UNKNOWN,
        "CEL expression does not compile: Failed to parse expression",
    ),
    (
        "Cel",
        "a missing key is an evaluation error naming the key",
        {"expression": "process.status.nothere == 1"},
        observed(),
        Outcome.UNKNOWN,
        "CEL evaluation error: no such key: nothere",
    ),
    (
        "Cel",
        "a division by zero is an evaluation error",
        {"expression": "1 / 0 == 1"},
        observed(),
        Outcome.UNKNOWN,
        "CEL evaluation error: division by zero",
    ),
    (
        "Cel",
        "three nested comprehensions exceed the cost bound",
        {"expression": "[1].all(a, [1].all(b, [1].all(c, true)))"},
        observed(),
        Outcome.UNKNOWN,
        "CEL expression does not compile: comprehensions nested 3 deep; at most 2 are allowed",
    ),
    (
        "Cel",
        "an over-long expression exceeds the cost bound",
        {"expression": "true" + " && true" * 200},
        observed(),
        Outcome.UNKNOWN,
        "CEL expression does not compile: expression is 1604 characters long; at most 1024 are allowed",
    ),
    ("Cel", "no expression is bad params", {}, observed(), Outcome.UNKNOWN, "Cel params invalid: Object missing"),
    (
        "Cel",
        "a non-string expression is bad params",
        {"expression": True},
        observed(),
        Outcome.UNKNOWN,
        "Cel params invalid: Expected `str`, got `bool`",
    ),
    # NixEval
    ("NixEval", "NixEval has no evaluator", None, observed(), Outcome.UNKNOWN, "no Nix evaluator is configured"),
]


@pytest.mark.parametrize(
    ("kind", "params", "snapshot", "outcome", "message"),
    [(k, p, s, o, m) for k, _, p, s, o, m in CASES],
    ids=[f"{k}: {desc}" for k, desc, *_ in CASES],
)
def test_condition(kind: str, params: Any, snapshot: Observed, outcome: Outcome, message: str) -> None:
    verdict = check(convert({"kind": kind, "params": params}, Condition), snapshot.process, snapshot)
    assert verdict.outcome is outcome
    assert verdict.message.startswith(message)
    if outcome is Outcome.SATISFIED:
        assert verdict.message == ""


def test_evaluate_writes_rows_in_order_and_ands_them() -> None:
    conditions = [
        convert({"kind": "PromQL", "params": {"query": "up"}}, Condition),
        convert({"kind": "JobAttested", "params": {"name": "j"}}, Condition),
    ]
    result = evaluate(conditions, observed(job("j", succeeded=1), prometheus={"up": 1.0}))
    assert result.satisfied
    assert [(r.kind.value, r.satisfied, r.message, r.last_check) for r in result.rows] == [
        ("PromQL", True, None, NOW),
        ("JobAttested", True, None, NOW),
    ]
    unknown = evaluate(conditions, observed(job("j", succeeded=1)))
    assert not unknown.satisfied
    assert unknown.rows[0].message == "no Prometheus URL configured"
    assert evaluate([], observed()).satisfied


def test_referenced_refs_and_queries_tell_the_executor_what_to_fetch() -> None:
    conditions = [
        convert({"kind": "HelmReleaseReleased", "params": {"name": "h", "namespace": "o"}}, Condition),
        convert({"kind": "ClosedLoopAuth", "params": {}}, Condition),
        convert({"kind": "JobAttested", "params": {"name": "j", "expectReceipt": True}}, Condition),
        convert({"kind": "PromQL", "params": {"query": "up"}}, Condition),
        convert({"kind": "PromQL", "params": {"query": "up"}}, Condition),
        convert({"kind": "KustomizationHealthy", "params": {"bad": 1}}, Condition),
    ]
    assert referenced_refs(conditions, make()) == [
        ChildRef(HR, "HelmRelease", "o", "h"),
        ChildRef("batch/v1", "Job", "ns", "me-closed-loop-probe"),
        ChildRef("v1", "ConfigMap", "ns", "me-closed-loop-probe-receipt"),
        ChildRef("batch/v1", "Job", "ns", "j"),
        ChildRef("v1", "ConfigMap", "ns", "j-receipt"),
    ]
    assert promql_queries(conditions) == ["up"]


def test_receipt_root_is_not_recomputed() -> None:
    # The receipt's composed_root is compared, not recomputed: one that does not match its pillars still verifies.
    assert compose_root("a", "", "i", None) != "r"
    snapshot = observed(job("j", succeeded=1), cm("j-receipt", {"receipt.json": receipt("r")}))
    verdict = check(
        convert({"kind": "JobAttested", "params": {"name": "j", "expectReceipt": True}}, Condition),
        snapshot.process,
        snapshot,
    )
    assert verdict.outcome is Outcome.SATISFIED


# ── timeout ─────────────────────────────────────────────────────────────────


def with_timeout(timeout: str | None, phase: str = "Running", **status: Any) -> Process:
    process = make(phase, **status)
    boundary = {"timeout": timeout} if timeout is not None else {}
    return convert(
        {
            "metadata": {"name": "me", "namespace": "ns"},
            "spec": {
                "classification": {"pointType": "Gate", "substrate": "Compute"},
                "intent": {},
                "boundary": boundary,
            },
            "status": {"phase": process.phase.value, **status},
        },
        Process,
    )


SINCE = (NOW - timedelta(minutes=20)).isoformat()


@pytest.mark.parametrize(
    ("timeout", "phase", "status", "exceeded"),
    [
        (None, "Running", {"phaseSince": SINCE}, True),
        ("30m", "Running", {"phaseSince": SINCE}, False),
        ("1h 30m", "Execing", {"phaseSince": (NOW - timedelta(hours=2)).isoformat()}, True),
        (
            "1h",
            "Running",
            {"phaseSince": SINCE, "boundary": {"deadline": (NOW - timedelta(seconds=1)).isoformat()}},
            True,
        ),
        (
            "1m",
            "Running",
            {"phaseSince": SINCE, "boundary": {"deadline": (NOW + timedelta(seconds=1)).isoformat()}},
            False,
        ),
        ("1m", "Attested", {"phaseSince": SINCE}, False),
        ("1m", "Running", {}, False),
    ],
    ids=[
        "default 15m passed after 20 minutes",
        "30m not yet passed",
        "humantime with a space, Execing",
        "a written deadline in the past wins",
        "a written deadline in the future wins",
        "Attested is not converging",
        "no anchor is never exceeded",
    ],
)
def test_timeout_exceeded(timeout: str | None, phase: str, status: dict[str, Any], exceeded: bool) -> None:
    assert timeout_exceeded(with_timeout(timeout, phase, **status), NOW) is exceeded


def test_invalid_timeout_raises_duration_error() -> None:
    process = with_timeout("5", "Running", phaseSince=SINCE)
    with pytest.raises(DurationError, match="time unit needed"):
        boundary_timeout(process)
    assert boundary_timeout(with_timeout(None)) == timedelta(minutes=15)
