"""Closed-set enums: spellings in ALL order, strict parsing and the error text.

— docs/wire-format.md#enums.
"""

from __future__ import annotations

import pytest

from shared.domain.api.allocation import AllocationPhase, Requestor, RequestorKind
from shared.domain.api.boundary import ConditionKind
from shared.domain.api.classification import (
    CalmClassification,
    ConvergencePointType,
    DataClassification,
    HorizonKind,
    OptimizationDirection,
    SubstrateType,
)
from shared.domain.api.closed_set import ClosedSet, UnknownValueError
from shared.domain.api.compliance import VerificationPhase
from shared.domain.api.encapsulates import EncapsulationMode, EncapsulationTarget
from shared.domain.api.export import ArtifactKind, ChannelKind, ExportTrigger, ReportFormat, ReportPayloadShape
from shared.domain.api.intent import IntentKind, WorkloadKind
from shared.domain.api.lifetime import LifetimeKind, TeardownPolicy
from shared.domain.api.phase import MustReachPhase, ProcessPhase
from shared.domain.api.pool import MemberState, PoolPhase, ReplacementPolicy, ReturnPolicy
from shared.domain.api.receipt import ReceiptKind
from shared.domain.api.signal import SighupStrategy

# (enum, spellings in ALL order, label in error texts)
CLOSED_SETS: list[tuple[type[ClosedSet], list[str], str]] = [
    (
        ConvergencePointType,
        ["Transform", "Fork", "Join", "Gate", "Select", "Broadcast", "Reduce", "Observe"],
        "convergence point type",
    ),
    (
        SubstrateType,
        ["Financial", "Compute", "Network", "Storage", "Security", "Identity", "Observability", "Regulatory"],
        "substrate type",
    ),
    (HorizonKind, ["Bounded", "Asymptotic"], "horizon kind"),
    (OptimizationDirection, ["Minimize", "Maximize"], "optimization direction"),
    (CalmClassification, ["Monotone", "NonMonotone"], "calm classification"),
    (DataClassification, ["Public", "Internal", "Confidential", "Pii", "Phi", "Pci"], "data classification"),
    (IntentKind, ["nix", "flux", "lisp", "container", "aplicacao", "guest"], "intent kind"),
    (WorkloadKind, ["Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"], "workload kind"),
    (
        ConditionKind,
        [
            "ProcessPhase",
            "KustomizationHealthy",
            "HelmReleaseReleased",
            "PromQL",
            "Cel",
            "NixEval",
            "JobAttested",
            "ClosedLoopAuth",
        ],
        "condition kind",
    ),
    (VerificationPhase, ["PlanTime", "AtBoundary", "PostConvergence"], "verification phase"),
    (MustReachPhase, ["Running", "Attested"], "must-reach phase"),
    (SighupStrategy, ["Reconverge", "Restart", "Noop"], "sighup strategy"),
    (LifetimeKind, ["permanent", "ephemeral"], "lifetime kind"),
    (TeardownPolicy, ["Always", "OnAttested", "OnFailed", "Never"], "teardown policy"),
    (ExportTrigger, ["OnAttested", "OnFailed", "Always"], "export trigger"),
    (ReportFormat, ["Junit", "TapV13", "NdJson", "Raw"], "report format"),
    (ReportPayloadShape, ["NdJsonLines", "OpaqueBytes"], "report payload shape"),
    (ArtifactKind, ["receipts", "testReport", "processSnapshot", "runMarker"], "artifact kind"),
    (ChannelKind, ["httpEvent", "natsSubject", "stdout"], "channel kind"),
    (EncapsulationTarget, ["existingHelmRelease", "existingKustomization", "bareWorkload"], "encapsulation target"),
    (EncapsulationMode, ["Manage", "Adopt", "Observe"], "encapsulation mode"),
    (
        ProcessPhase,
        [
            "Pending",
            "Forking",
            "Execing",
            "Running",
            "Attested",
            "Reconverging",
            "Releasing",
            "Exiting",
            "Failed",
            "Zombie",
            "Reaped",
        ],
        "process phase",
    ),
    (ReturnPolicy, ["Replace", "Reset", "Keep"], "return policy"),
    (ReplacementPolicy, ["ReplaceImmediate", "HoldFailed", "PausePool"], "replacement policy"),
    (MemberState, ["Spawning", "Free", "Allocated", "Returning", "Failed"], "member state"),
    (PoolPhase, ["Initializing", "Steady", "ScalingUp", "ScalingDown", "Degraded", "Draining"], "pool phase"),
    (
        AllocationPhase,
        ["Pending", "Queued", "Bound", "Releasing", "Released", "NoMatchingPool", "Failed"],
        "allocation phase",
    ),
    (RequestorKind, ["github-pr", "manual", "ci-run", "scheduled"], "requestor kind"),
    (ReceiptKind, ["closed-loop-auth", "db-migration", "test-suite", "nix-build"], "receipt kind"),
]

IDS = [f"{cls.__name__} is spelled as the reference spells it" for cls, _, _ in CLOSED_SETS]


@pytest.mark.parametrize(("cls", "spellings", "label"), CLOSED_SETS, ids=IDS)
def test_spellings_are_exact_and_in_all_order(cls: type[ClosedSet], spellings: list[str], label: str) -> None:
    assert [m.value for m in cls.all()] == spellings


@pytest.mark.parametrize(("cls", "spellings", "label"), CLOSED_SETS, ids=IDS)
def test_every_spelling_round_trips_through_parse(cls: type[ClosedSet], spellings: list[str], label: str) -> None:
    assert [cls.parse(s).value for s in spellings] == spellings


@pytest.mark.parametrize(("cls", "spellings", "label"), CLOSED_SETS, ids=IDS)
def test_case_variants_whitespace_and_empty_are_refused_with_the_label(
    cls: type[ClosedSet], spellings: list[str], label: str
) -> None:
    first = spellings[0]
    for bad in (first.lower() if first != first.lower() else first.upper(), f"{first} ", ""):
        with pytest.raises(UnknownValueError) as err:
            cls.parse(bad)
        assert str(err.value) == f"unknown {label}: {bad}"
        assert err.value.value == bad


@pytest.mark.parametrize(
    ("cls", "text", "message"),
    [
        (ProcessPhase, "running", "unknown process phase: running"),
        (ProcessPhase, "ATTESTED", "unknown process phase: ATTESTED"),
        (SighupStrategy, "noop ", "unknown sighup strategy: noop "),
        (MustReachPhase, "Pending", "unknown must-reach phase: Pending"),
        (MustReachPhase, "Failed", "unknown must-reach phase: Failed"),
        (ConvergencePointType, "Gates", "unknown convergence point type: Gates"),
        (ReplacementPolicy, "Reset", "unknown replacement policy: Reset"),
        (MemberState, "Attested", "unknown member state: Attested"),
        (ConditionKind, "Promql", "unknown condition kind: Promql"),
        (DataClassification, "PII", "unknown data classification: PII"),
    ],
    ids=[
        "a lower-case phase is refused",
        "an upper-case phase is refused",
        "a trailing space is not trimmed",
        "pending is not a must-reach phase",
        "failed is not a must-reach phase",
        "a misspelt point type is refused",
        "a sibling enum's value is refused",
        "a process phase is not a member state",
        "promql keeps both capitals",
        "pii is spelled Pii",
    ],
)
def test_parse_error_text_names_the_set_and_repeats_the_input(cls: type[ClosedSet], text: str, message: str) -> None:
    with pytest.raises(UnknownValueError, match=f"^{message}$"):
        cls.parse(text)


def test_data_classification_ranks_follow_declaration_order() -> None:
    assert [d.sensitivity_rank for d in DataClassification] == [0, 1, 2, 3, 4, 5]
    assert [d.is_regulated for d in DataClassification] == [False, False, False, True, True, True]
    assert [d.is_restricted for d in DataClassification] == [False, True, True, True, True, True]


def test_point_type_predicates_partition_the_variants() -> None:
    groups = [(p.is_endomorphic, p.is_diffusive, p.is_convergent) for p in ConvergencePointType]
    assert all(sum(g) == 1 for g in groups)
    assert {p.value for p in ConvergencePointType if p.is_convergent} == {"Join", "Gate", "Select", "Reduce"}
    assert not any(p.input_arity.value == p.output_arity.value == "Many" for p in ConvergencePointType)


def test_workload_kind_api_versions() -> None:
    assert [w.api_version for w in WorkloadKind] == ["apps/v1", "apps/v1", "apps/v1", "batch/v1", "batch/v1"]


def test_requestor_kind_is_an_open_string_with_a_known_view() -> None:
    assert Requestor(kind="github-pr").known_kind() is RequestorKind.GITHUB_PR
    assert Requestor(kind="cron-job").known_kind() is None


def test_stub_condition_kinds_carry_their_message() -> None:
    assert {k.value: k.stub_message for k in ConditionKind if k.is_stub} == {
        "PromQL": "PromQL evaluator not yet implemented",
        "Cel": "CEL evaluator not yet implemented",
        "NixEval": "NixEval evaluator not yet implemented",
    }
