"""reconciler.phases / transitions / conditions: table tests from docs/behaviour.md (#phases,
#transition-table, #signals, #dependencies, #lifetime, #conditions).

Expected messages are the documented strings; ``now`` is fixed. Status patches are checked as the
JSON they send (``sent``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from reconciler.children import ChildRef, ChildState
from reconciler.conditions import conditions_for
from reconciler.decision import ChildSignal, Decision, Observed, SignalCount, Transition
from reconciler.phases import Deps, decide, holds_finalizer, pid_granted, pid_refused
from reconciler.pid import PidRefused
from reconciler.render import IntentNotSupported, Manifest, manifest_ref
from reconciler.transitions import IllegalTransition, is_legal, phase_write
from shared.domain.api.codec import convert, format_timestamp
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process, ProcessCondition
from shared.domain.api.signal import ProcessSignal as S
from shared.domain.manifests.flux import CrossNamespaceSourceReference, Kustomization, KustomizationSpec
from shared.kube.events import Event
from shared.kube.meta import ObjectMeta, as_json

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
FIN = "tatara.pleme.io/process-finalizer"
SIG = "tatara.pleme.io/signal"
KS = ChildRef("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "ns", "app")
KS_REF = {
    "apiVersion": KS.api_version,
    "kind": KS.kind,
    "name": KS.name,
    "namespace": KS.namespace,
    "ready": False,
    "message": "applied; awaiting reconciliation",
}
KS_DOC = Kustomization(
    metadata=ObjectMeta(name="app", namespace="ns"),
    spec=KustomizationSpec(interval="1m", path="./app", prune=True,
                           source_ref=CrossNamespaceSourceReference(kind="GitRepository", name="repo")),
)


def make(
    phase: str | None = "Running",
    *,
    spec: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    **status: Any,
) -> Process:
    body: dict[str, Any] = {
        "metadata": {"name": "me", "namespace": "ns", "uid": "u-1", "generation": 3, **(meta or {})},
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "repo", "path": "./app"}},
            **(spec or {}),
        },
    }
    if phase is not None:
        # as our own writes leave it (observedGeneration with every phase write); a status another controller
        # wrote (the reference's, docs/migration.md) passes ``observedGeneration=None``
        body["status"] = {"phase": phase, "phaseSince": "2025-06-01T11:59:00Z",
                          "observedGeneration": body["metadata"]["generation"], **status}
        if body["status"]["observedGeneration"] is None:
            del body["status"]["observedGeneration"]
    return convert(body, Process)


def obs(process: Process, **kw: Any) -> Observed:
    return Observed(process=process, now=NOW, **kw)


def fake_render(docs: list[Manifest] | None = None, error: Exception | None = None) -> Deps:
    def render(_: Observed) -> list[Manifest]:
        if error is not None:
            raise error
        return list(docs or [])

    return Deps(render=render)


def ready(ok: bool | None, *, stalled: bool = False, message: str = "") -> dict[ChildRef, ChildState]:
    return {KS: ChildState(ref=KS, ready=ok, stalled=stalled, message=message)}


def sent(decision: Decision) -> dict[str, Any]:
    """The decision's status patch as the JSON merge patch it sends."""
    assert decision.status is not None
    wire: dict[str, Any] = as_json(decision.status)
    return wire


def goes_to(decision: Decision, source: P, target: P, message: str | None = None) -> None:
    assert decision.transition is not None
    assert (decision.transition.source, decision.transition.target) == (source, target)
    assert sent(decision)["phase"] == target.value
    assert sent(decision)["phaseSince"] == "2025-06-01T12:00:00Z"
    types = [c["type"] for c in sent(decision)["conditions"]]
    assert types == ["Ready", "Reconciling", "Stalled"]
    # the transition's Event comes first: Phase<Target> with the status message
    assert decision.events[0] == Event.normal(f"Phase{target.value}", sent(decision)["message"])
    if message is not None:
        assert sent(decision)["message"] == message


# ── the legal-transition table (docs/behaviour.md#transition-table) ──────────

SPEC_EDGES = [
    (P.PENDING, P.FORKING),
    (P.FORKING, P.EXECING),
    (P.EXECING, P.RUNNING),
    (P.EXECING, P.FAILED),
    (P.RUNNING, P.ATTESTED),
    (P.RUNNING, P.EXITING),
    (P.RUNNING, P.FAILED),
    (P.RUNNING, P.RECONVERGING),
    (P.ATTESTED, P.RECONVERGING),
    (P.ATTESTED, P.RELEASING),
    (P.ATTESTED, P.EXITING),
    (P.RECONVERGING, P.EXECING),
    (P.RELEASING, P.EXITING),
    (P.RELEASING, P.ZOMBIE),
    (P.EXITING, P.ZOMBIE),
    (P.FAILED, P.RELEASING),
    (P.FAILED, P.ZOMBIE),
    (P.ZOMBIE, P.REAPED),
]
SIGNAL_EDGES = [
    *[(p, P.EXITING) for p in (P.PENDING, P.FORKING, P.EXECING, P.RECONVERGING, P.RELEASING)],
    *[(p, P.REAPED) for p in P if p is not P.REAPED],
    (P.ATTESTED, P.RUNNING),
]
ILLEGAL = [
    (P.PENDING, P.EXECING),
    (P.PENDING, P.RUNNING),
    (P.PENDING, P.FAILED),
    (P.FORKING, P.FAILED),
    (P.RECONVERGING, P.ATTESTED),
    (P.ATTESTED, P.FAILED),
    (P.FAILED, P.EXITING),
    (P.ZOMBIE, P.EXITING),
    *[(P.REAPED, p) for p in P if p is not P.REAPED],
]


@pytest.mark.parametrize(("a", "b"), SPEC_EDGES, ids=[f"{a.value} may go to {b.value}" for a, b in SPEC_EDGES])
def test_every_edge_of_the_types_table_is_legal(a: P, b: P) -> None:
    assert is_legal(a, b)


@pytest.mark.parametrize(
    ("a", "b"), SIGNAL_EDGES, ids=[f"{a.value} may go to {b.value} by signal or deletion" for a, b in SIGNAL_EDGES]
)
def test_documented_signal_and_deletion_edges_are_legal(a: P, b: P) -> None:
    assert is_legal(a, b)


@pytest.mark.parametrize(("a", "b"), ILLEGAL, ids=[f"{a.value} may not go to {b.value}" for a, b in ILLEGAL])
def test_illegal_transitions_are_refused(a: P, b: P) -> None:
    assert not is_legal(a, b)
    with pytest.raises(IllegalTransition):
        phase_write(obs(make(a.value)), b, "x", reason="X", requeue_after=None)


def test_the_dispatcher_refuses_an_illegal_transition_with_a_warning_and_writes_nothing() -> None:
    def bad(_: Observed) -> list[Manifest]:
        raise IllegalTransition(P.EXECING, P.ATTESTED)

    d = decide(obs(make("Execing")), Deps(render=bad))
    assert d.status is None
    assert [e.reason for e in d.events] == ["IllegalTransition"]
    assert d.transition is None


def test_a_transition_records_the_seconds_spent_in_the_phase_left() -> None:
    d = decide(obs(make("Zombie")))  # phaseSince 11:59, now 12:00
    assert d.transition == Transition(P.ZOMBIE, P.REAPED, 60.0)
    assert decide(obs(make(None))).transition == Transition(P.PENDING, P.FORKING, None)


def test_a_phase_event_without_a_message_names_the_edge() -> None:
    d = phase_write(obs(make("Zombie")), P.REAPED, "", reason="R", requeue_after=None)
    assert d.events == (Event.normal("PhaseReaped", "Zombie → Reaped"),)


# ── kstatus conditions ───────────────────────────────────────────────────────

COND_ROWS = [
    (P.PENDING, "False", "True", "False"),
    (P.FORKING, "False", "True", "False"),
    (P.EXECING, "False", "True", "False"),
    (P.RUNNING, "False", "True", "False"),
    (P.ATTESTED, "True", "False", "False"),
    (P.RECONVERGING, "False", "True", "False"),
    (P.RELEASING, "False", "True", "False"),
    (P.EXITING, "False", "True", "False"),
    (P.FAILED, "False", "False", "True"),
    (P.ZOMBIE, "False", "True", "False"),
    (P.REAPED, "False", "False", "False"),
]


@pytest.mark.parametrize(
    ("phase", "ready_", "reconciling", "stalled"),
    COND_ROWS,
    ids=[f"{r[0].value} is Ready={r[1]} Reconciling={r[2]} Stalled={r[3]}" for r in COND_ROWS],
)
def test_conditions_per_phase(phase: P, ready_: str, reconciling: str, stalled: str) -> None:
    conds = conditions_for(phase, 7, NOW, "R", "m")
    assert [(c.type_, c.status) for c in conds] == [
        ("Ready", ready_),
        ("Reconciling", reconciling),
        ("Stalled", stalled),
    ]
    assert all(c.observed_generation == 7 and c.reason == "R" and c.message == "m" for c in conds)
    assert as_json(conds[0]) == {"type": "Ready", "status": ready_, "lastTransitionTime": "2025-06-01T12:00:00Z",
                                 "reason": "R", "message": "m", "observedGeneration": 7}


def test_a_condition_keeps_its_transition_time_while_its_status_is_unchanged() -> None:
    earlier = NOW - timedelta(hours=1)
    prev = [ProcessCondition(type_="Reconciling", status="True", last_transition_time=earlier)]
    conds = {c.type_: c for c in conditions_for(P.RUNNING, 1, NOW, "R", "m", previous=prev)}
    assert conds["Reconciling"].last_transition_time == earlier
    assert conds["Ready"].last_transition_time == NOW


# ── Pending, Forking ─────────────────────────────────────────────────────────


def test_pending_adds_the_finalizer_stamps_identity_and_goes_to_forking() -> None:
    p = make(None)
    d = decide(obs(p))
    goes_to(d, P.PENDING, P.FORKING)
    assert holds_finalizer(p)  # so the controller's finalize() adds it before this decision's writes
    assert d.status is not None
    assert set(sent(d)["identity"]) == {"name", "content_hash", "name_override"}
    assert d.requeue_after == 1.0
    assert d.suspended is None


def test_pending_with_start_suspended_suspends_the_process_in_the_same_step() -> None:
    p = make("Pending", spec={"signals": {"startSuspended": True}}, meta={"finalizers": [FIN]})
    d = decide(obs(p))
    goes_to(d, P.PENDING, P.FORKING)
    assert holds_finalizer(p)  # already held: finalize() leaves it
    assert d.suspended is True


DEPS = [{"name": "db"}, {"name": "cache", "namespace": "other", "mustReach": "Running"}]
FORKING_ROWS = [
    ({}, "waiting on 2 dependency/dependencies: ns/db not found; other/cache not found"),
    (
        {"ns/db": make("Running"), "other/cache": make("Execing")},
        "waiting on 2 dependency/dependencies: ns/db is Running; need Attested; other/cache is Execing; need Running",
    ),
    (
        {"ns/db": make("Attested"), "other/cache": make("Releasing")},
        "waiting on 1 dependency/dependencies: other/cache is Releasing; need Running",
    ),
]


@pytest.mark.parametrize(
    ("found", "message"),
    FORKING_ROWS,
    ids=[
        "forking waits naming each missing dependency",
        "forking waits while a dependency has not reached the required phase",
        "a dependency that moved on to Releasing ranks 0 and blocks again",
    ],
)
def test_forking_waits_on_unmet_dependencies(found: dict[str, Process], message: str) -> None:
    d = decide(obs(make("Forking", spec={"dependsOn": DEPS}), dependencies=found))
    assert d.transition is None
    assert d.status is not None
    assert sent(d)["message"] == message
    assert d.requeue_after == 30.0


def test_forking_writes_nothing_while_the_same_dependencies_stay_unmet() -> None:
    p = make(
        "Forking", spec={"dependsOn": [{"name": "db"}]}, message="waiting on 1 dependency/dependencies: ns/db not found"
    )
    d = decide(obs(p))
    assert d.status is None
    assert d.requeue_after == 30.0


def test_forking_with_dependencies_met_allocates_a_pid_and_goes_to_execing_with_a_deadline() -> None:
    p = make("Forking", spec={"dependsOn": [{"name": "db"}], "boundary": {"timeout": "10m"}})
    d = decide(obs(p, dependencies={"ns/db": make("Attested")}))
    goes_to(d, P.FORKING, P.EXECING, "dependencies satisfied")
    assert d.allocate_pid
    assert d.status is not None
    assert sent(d)["boundary"] == {"deadline": "2025-06-01T12:10:00Z"}


def test_forking_does_not_allocate_a_second_pid() -> None:
    assert not decide(obs(make("Forking", pid="me.1"))).allocate_pid


def test_a_granted_pid_is_written_with_its_parent_in_the_execing_write() -> None:
    p = make("Forking", spec={"identity": {"parent": "root.1"}})
    granted = pid_granted(decide(obs(p, processes_by_pid={"root.1": make("Attested", pid="root.1")})), p, "root.1.4")
    goes_to(granted, P.FORKING, P.EXECING, "dependencies satisfied")
    assert (sent(granted)["pid"], sent(granted)["parent"]) == ("root.1.4", "root.1")
    assert not granted.allocate_pid


def test_a_root_pid_is_written_with_a_null_parent() -> None:
    p = make("Forking")
    granted = pid_granted(decide(obs(p)), p, "me.1")
    assert sent(granted)["pid"] == "me.1"
    assert "parent" in sent(granted)
    assert sent(granted)["parent"] is None


def test_a_refused_pid_keeps_the_process_in_forking_with_the_reason_and_a_warning() -> None:
    p = make("Forking", spec={"identity": {"parent": "seph.1"}})
    reason = "PID depth 2 exceeds ProcessTable maxDepth 1 (parent seph.1)"
    seen = obs(p, processes_by_pid={"seph.1": make("Attested", pid="seph.1")})
    refused = pid_refused(seen, decide(seen), PidRefused(reason))
    assert refused.transition is None
    assert sent(refused)["message"] == reason
    assert {c["type"]: (c["status"], c["reason"]) for c in sent(refused)["conditions"]} == {
        "Ready": ("False", "PidRefused"), "Reconciling": ("True", "PidRefused"), "Stalled": ("False", "PidRefused")}
    assert refused.events == (Event.warning("PidRefused", reason),)
    assert refused.requeue_after == 1.0  # the Forking step's TICK: tried again on the next pass
    assert not refused.allocate_pid


def stalled_as(decision: Decision) -> tuple[str, str, str]:
    """``(Stalled status, reason, message)`` of the decision's status write."""
    (stalled,) = (c for c in sent(decision)["conditions"] if c["type"] == "Stalled")
    return stalled["status"], stalled["reason"], stalled["message"]


def named(name: str, phase: str | None = "Forking", *, deps: tuple[str, ...] = (), **status: Any) -> Process:
    """A Process ``ns/<name>`` in ``phase`` whose ``dependsOn`` names ``deps`` (same namespace)."""
    p = make(phase, spec={"dependsOn": [{"name": d} for d in deps]}, **status)
    return msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, name=name))


STALL_ROWS = [
    (named("me", deps=("me",)), {}, ("SelfDependency", "spec.dependsOn[0] names the Process itself: ns/me → ns/me")),
    (named("me", deps=("b",)), {"ns/b": named("b", deps=("me",))},
     ("DependencyCycle", "dependency cycle: ns/me → ns/b → ns/me")),
    (named("me", deps=("x", "b")),
     {"ns/x": named("x", "Attested"), "ns/b": named("b", None, deps=("c",)), "ns/c": named("c", deps=("me", "b"))},
     ("DependencyCycle", "dependency cycle: ns/me → ns/b → ns/c → ns/me")),
]


@pytest.mark.parametrize(
    ("process", "cached", "stall"),
    STALL_ROWS,
    ids=[
        "a process that depends on itself is stalled as a self-dependency",
        "two processes depending on each other are stalled as a cycle naming the path",
        "a longer cycle through a pending process is reported from this process round to itself",
    ],
)
def test_forking_stalls_on_a_dependency_that_can_never_be_met(
    process: Process, cached: dict[str, Process], stall: tuple[str, str]
) -> None:
    found = {ref: cached.get(ref) for ref in (f"ns/{d.name}" for d in process.spec.depends_on)}
    d = decide(obs(process, dependencies=found, processes_by_ref=cached))
    reason, message = stall
    assert d.transition is None
    assert stalled_as(d) == ("True", reason, message)
    assert sent(d)["message"] == message
    assert d.events == (Event.warning(reason, message),)
    assert d.requeue_after == 30.0
    assert not d.allocate_pid


def test_a_stalled_cycle_is_written_once() -> None:
    b = named("b", deps=("me",))
    first = decide(obs(named("me", deps=("b",)), dependencies={"ns/b": b}, processes_by_ref={"ns/b": b}))
    again = named("me", deps=("b",), message=sent(first)["message"], conditions=sent(first)["conditions"])
    d = decide(obs(again, dependencies={"ns/b": b}, processes_by_ref={"ns/b": b}))
    assert (d.status, d.events, d.requeue_after) == (None, (), 30.0)


def test_a_stall_is_left_when_the_cycle_is_broken() -> None:
    b = named("b", deps=("me",))
    first = decide(obs(named("me", deps=("b",)), dependencies={"ns/b": b}, processes_by_ref={"ns/b": b}))
    stalled = named("me", deps=("b",), message=sent(first)["message"], conditions=sent(first)["conditions"])
    fixed = named("b")  # b no longer depends on me: me waits on b like any dependency
    d = decide(obs(stalled, dependencies={"ns/b": fixed}, processes_by_ref={"ns/b": fixed}))
    waiting = "waiting on 1 dependency/dependencies: ns/b is Forking; need Attested"
    assert stalled_as(d) == ("False", "DependenciesUnmet", waiting)
    assert d.events == ()


def test_a_parent_pid_no_process_holds_stalls_the_process_before_its_pid_is_allocated() -> None:
    p = make("Forking", spec={"identity": {"parent": "seph.9"}})
    d = decide(obs(p, processes_by_pid={"seph.1": make("Attested", pid="seph.1")}))
    message = "spec.identity.parent seph.9: no Process holds this PID"
    assert stalled_as(d) == ("True", "ParentNotFound", message)
    assert d.events == (Event.warning("ParentNotFound", message),)
    assert not d.allocate_pid
    assert d.requeue_after == 30.0


def test_a_parent_is_looked_for_only_once_the_dependencies_are_met() -> None:
    p = make("Forking", spec={"identity": {"parent": "seph.9"}, "dependsOn": [{"name": "db"}]})
    d = decide(obs(p))
    assert stalled_as(d)[:2] == ("False", "DependenciesUnmet")


def test_a_process_that_already_holds_its_pid_is_not_stalled_by_a_parent_gone_since() -> None:
    p = make("Forking", spec={"identity": {"parent": "seph.9"}}, pid="seph.9.3")
    goes_to(decide(obs(p)), P.FORKING, P.EXECING, "dependencies satisfied")


# ── Execing ──────────────────────────────────────────────────────────────────


def test_execing_renders_applies_and_goes_to_running_with_refs_awaiting_reconciliation() -> None:
    d = decide(obs(make("Execing")), fake_render([KS_DOC]))
    goes_to(d, P.EXECING, P.RUNNING)
    assert d.apply == (KS_DOC,)
    assert d.status is not None
    assert [{k: v for k, v in r.items() if k != "lastCheck"} for r in sent(d)["fluxResources"]] == [KS_REF]
    assert d.requeue_after == 5.0


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"intent": {}}, "intent has no variant set"),
        ({"boundary": {"timeout": "5"}}, "spec.boundary.timeout"),
    ],
    ids=["an intent with no variant fails the Process", "an unparsable boundary timeout fails the Process"],
)
def test_execing_with_an_invalid_spec_goes_to_failed_with_exit_code_2(spec: dict[str, Any], fragment: str) -> None:
    d = decide(obs(make("Execing", spec=spec)), fake_render([KS_DOC]))
    goes_to(d, P.EXECING, P.FAILED)
    assert d.status is not None
    assert sent(d)["exitCode"] == 2
    assert fragment in sent(d)["message"]
    assert {c["type"]: c["status"] for c in sent(d)["conditions"]}["Stalled"] == "True"
    assert [(e.type, e.reason) for e in d.events] == [("Normal", "PhaseFailed"), ("Warning", "InvalidSpec")]


def test_an_intent_we_do_not_render_stalls_with_intent_not_supported_and_a_warning() -> None:
    d = decide(obs(make("Execing")), fake_render(error=IntentNotSupported("nix")))
    assert d.transition is None
    assert d.status is not None
    conds = {c["type"]: c for c in sent(d)["conditions"]}
    assert conds["Stalled"]["status"] == "True"
    assert conds["Stalled"]["reason"] == "IntentNotSupported"
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "IntentNotSupported")]
    assert d.requeue_after is None


def test_a_cel_condition_that_does_not_compile_stalls_execing_with_a_warning_naming_it() -> None:
    cond = {"kind": "Cel", "params": {"expression": "phase =="}}
    d = decide(obs(make("Execing", spec={"boundary": {"postconditions": [cond]}})), fake_render([KS_DOC]))
    assert d.transition is None
    assert d.apply == ()
    conds = {c["type"]: c for c in sent(d)["conditions"]}
    assert conds["Stalled"]["status"] == "True"
    assert conds["Stalled"]["reason"] == "InvalidCelExpression"
    assert sent(d)["message"].startswith("spec.boundary.postconditions[0]: CEL expression does not compile: ")
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "InvalidCelExpression")]


def test_a_cel_postcondition_gates_attestation_in_running() -> None:
    cond = {"kind": "Cel", "params": {"expression": 'process.metadata.namespace == "elsewhere"'}}
    d = decide(obs(make("Running", spec={"boundary": {"postconditions": [cond]}})), fake_render([KS_DOC]))
    assert d.transition is None
    assert d.status is not None
    assert sent(d)["message"] == "waiting on postconditions"


@pytest.mark.parametrize(
    ("expression", "old_message", "events"),
    [
        pytest.param(
            "process.status.nothere",
            None,
            [("Warning", "CelEvaluationFailed",
              "spec.boundary.postconditions[0]: CEL evaluation error: no such key: nothere")],
            id="a runtime error gives one warning",
        ),
        pytest.param(
            "process.status.nothere",
            "CEL evaluation error: no such key: nothere",
            [],
            id="the same error again gives no second warning",
        ),
        pytest.param(
            "process.spec.boundary.postconditions.exists(c, c.kind == 'Cel') ? null : true",
            None,
            [("Warning", "CelEvaluationFailed",
              "spec.boundary.postconditions[0]: CEL expression returned null, not a bool")],
            id="a null result is no type error (an unknown value may become a bool)",
        ),
        pytest.param("1 > 2", None, [], id="a false result is no warning"),
    ],
)
def test_a_cel_postcondition_without_a_bool_warns_once(
    expression: str, old_message: str | None, events: list[tuple[str, str, str]]
) -> None:
    cond = {"kind": "Cel", "params": {"expression": expression}}
    status: dict[str, Any] = {}
    if old_message is not None:
        row = {**cond, "satisfied": False, "lastCheck": "2025-06-01T11:59:00Z", "message": old_message}
        status = {"boundary": {"postconditions": [row]}, "message": "waiting on postconditions"}
    ready = ChildState(ref=KS, ready=True)
    p = make("Running", spec={"boundary": {"postconditions": [cond]}}, fluxResources=[{**KS_REF, "ready": True}],
             **status)
    d = decide(obs(p, children={KS: ready}), fake_render([KS_DOC]))
    assert d.transition is None
    assert [(e.type, e.reason, e.message) for e in d.events] == events


@pytest.mark.parametrize(("expression", "kind"), [
    ("'ready'", "string"),
    ("process.status.phase", "string"),
    ("size(children)", "int"),
    ("1.5", "double"),
    ("children.map(c, c.name)", "list"),
    ("{'ok': true}", "map"),
    ("duration('1s')", "duration"),
], ids=["a string literal", "a string read from the Process", "an int", "a double", "a list", "a map",
        "a duration"])
def test_a_cel_postcondition_of_a_kind_that_is_never_a_bool_stalls_running(expression: str, kind: str) -> None:
    cond = {"kind": "Cel", "params": {"expression": expression}}
    p = make("Running", spec={"boundary": {"postconditions": [cond]}}, fluxResources=[{**KS_REF, "ready": True}])
    d = decide(obs(p, children={KS: ChildState(ref=KS, ready=True)}), fake_render([KS_DOC]))
    message = f"spec.boundary.postconditions[0]: CEL expression {expression!r} returned {kind}, not a bool"
    assert d.transition is None
    assert sent(d)["message"] == message
    conds = {c["type"]: (c["status"], c["reason"], c["message"]) for c in sent(d)["conditions"]}
    assert conds == {"Ready": ("False", "CelTypeError", message), "Reconciling": ("False", "CelTypeError", message),
                     "Stalled": ("True", "CelTypeError", message)}
    (row,) = sent(d)["boundary"]["postconditions"]
    assert (row["satisfied"], row["message"]) == (False, f"CEL expression returned {kind}, not a bool")
    assert [(e.type, e.reason, e.message) for e in d.events] == [("Warning", "CelTypeError", message)]


def test_a_process_stalled_on_a_cel_type_error_writes_nothing_again() -> None:
    cond = {"kind": "Cel", "params": {"expression": "'ready'"}}
    p = make("Running", spec={"boundary": {"postconditions": [cond]}}, fluxResources=[{**KS_REF, "ready": True}])
    children = {KS: ChildState(ref=KS, ready=True)}
    first = decide(obs(p, children=children), fake_render([KS_DOC]))
    stalled = make("Running", spec={"boundary": {"postconditions": [cond]}},
                   **{k: v for k, v in sent(first).items()
                      if k in ("message", "conditions", "boundary", "fluxResources")})
    again = decide(obs(stalled, children=children), fake_render([KS_DOC]))
    assert (again.status, again.events, again.transition) == (None, (), None)


@pytest.mark.parametrize("expression", [
    "process.status.nothere",
    "process.spec.boundary.postconditions.exists(c, c.kind == 'Cel') ? null : true",
    "1 / 0 == 1",
], ids=["a missing key (an object not there yet)", "a null result (an unknown value)", "a runtime error"])
def test_a_cel_postcondition_that_may_still_give_a_bool_keeps_reconciling(expression: str) -> None:
    cond = {"kind": "Cel", "params": {"expression": expression}}
    p = make("Running", spec={"boundary": {"postconditions": [cond]}}, fluxResources=[{**KS_REF, "ready": True}])
    d = decide(obs(p, children={KS: ChildState(ref=KS, ready=True)}), fake_render([KS_DOC]))
    assert sent(d)["message"] == "waiting on postconditions"
    conds = {c["type"]: (c["status"], c["reason"]) for c in sent(d)["conditions"]}
    assert conds["Reconciling"] == ("True", "PostconditionsUnmet")
    assert conds["Stalled"][0] == "False"


def test_a_cel_precondition_of_a_kind_that_is_never_a_bool_stalls_execing() -> None:
    cond = {"kind": "Cel", "params": {"expression": "'ready'"}}
    d = decide(obs(make("Execing", spec={"boundary": {"preconditions": [cond]}})), fake_render([KS_DOC]))
    message = "spec.boundary.preconditions[0]: CEL expression \"'ready'\" returned string, not a bool"
    assert d.transition is None
    assert d.apply == ()
    assert sent(d)["message"] == message
    assert {c["type"]: c["status"] for c in sent(d)["conditions"]}["Stalled"] == "True"
    assert len(sent(d)["boundary"]["preconditions"]) == 1
    assert [(e.reason, e.message) for e in d.events] == [("CelTypeError", message)]


def test_execing_past_its_boundary_deadline_fails_with_exit_code_124() -> None:
    p = make("Execing", boundary={"deadline": format_timestamp(NOW - timedelta(seconds=1))})
    d = decide(obs(p), fake_render([KS_DOC]))
    goes_to(d, P.EXECING, P.FAILED)
    assert d.status is not None
    assert sent(d)["exitCode"] == 124


def test_execing_waits_on_unmet_preconditions() -> None:
    cond = {"kind": "ProcessPhase", "params": {"processRef": "db", "phase": "Attested"}}
    d = decide(obs(make("Execing", spec={"boundary": {"preconditions": [cond]}})), fake_render([KS_DOC]))
    assert d.transition is None
    assert d.status is not None
    assert sent(d)["message"] == "waiting on preconditions"
    assert d.apply == ()


# ── Running ──────────────────────────────────────────────────────────────────


def running(**status: Any) -> Process:
    return make("Running", fluxResources=[KS_REF], **status)


def test_running_waits_on_a_child_that_is_not_ready_without_rewriting_unchanged_refs() -> None:
    d = decide(obs(running(), children=ready(None, message="applied; awaiting reconciliation")))
    assert d.status is None
    assert d.requeue_after == 30.0


def test_running_waiting_on_a_child_is_requeued_at_its_boundary_deadline() -> None:
    """Regression: the wait used HEARTBEAT (30 s) only, so a 7 s boundary.timeout fired at ~35 s."""
    deadline = format_timestamp(NOW + timedelta(seconds=4))
    waiting = ready(None, message="applied; awaiting reconciliation")
    d = decide(obs(running(boundary={"deadline": deadline}), children=waiting))
    assert d.status is None
    assert d.requeue_after == 4.0


def test_execing_waiting_on_preconditions_is_requeued_at_its_boundary_deadline() -> None:
    cond = {"kind": "ProcessPhase", "params": {"processRef": "db", "phase": "Attested"}}
    p = make("Execing", spec={"boundary": {"preconditions": [cond]}},
             boundary={"deadline": format_timestamp(NOW + timedelta(seconds=6))})
    d = decide(obs(p), fake_render([KS_DOC]))
    assert d.transition is None
    assert d.requeue_after == 6.0


def test_running_records_a_changed_child_message_once() -> None:
    d = decide(obs(running(), children=ready(False, message="building")))
    assert d.status is not None
    assert sent(d)["fluxResources"][0]["message"] == "building"
    assert d.transition is None


def test_running_with_a_failing_child_says_why_in_its_message_and_ready_condition_once() -> None:
    failing = {KS: ChildState(ref=KS, ready=False, reason="BuildFailed", message='secrets "sops-age" not found')}
    d = decide(obs(running(), children=failing))
    expected = f'Kustomization {KS.namespace}/{KS.name} not ready: BuildFailed: secrets "sops-age" not found'
    assert d.transition is None
    assert sent(d)["message"] == expected
    ready_cond = next(c for c in sent(d)["conditions"] if c["type"] == "Ready")
    assert (ready_cond["status"], ready_cond["reason"], ready_cond["message"]) == ("False", "ChildNotReady", expected)
    assert [(e.type.value, e.reason) for e in d.events] == [("Warning", "ChildNotReady")]
    # the same failure on the next pass: nothing new to say
    again = decide(obs(make("Running", message=expected, fluxResources=sent(d)["fluxResources"]), children=failing))
    assert again.status is None
    assert not again.events


def test_running_with_every_child_ready_attests_generation_0() -> None:
    d = decide(obs(running(), children=ready(True)))
    goes_to(d, P.RUNNING, P.ATTESTED)
    assert d.status is not None
    assert sent(d)["attestation"]["generation"] == 0
    assert "previousRoot" not in sent(d)["attestation"]
    assert {c["type"]: c["status"] for c in sent(d)["conditions"]}["Ready"] == "True"


def test_attesting_with_teardown_on_attested_requeues_at_tick_not_heartbeat() -> None:
    """Regression: the teardown waited a whole HEARTBEAT (30 s) after the Attested write."""
    p = make("Running", spec={"lifetime": {"ephemeral": {"ttl": "1h", "teardownPolicy": "OnAttested"}}},
             fluxResources=[KS_REF])
    d = decide(obs(p, children=ready(True)))
    goes_to(d, P.RUNNING, P.ATTESTED)
    assert d.requeue_after == 1.0


def test_a_stalled_child_fails_the_process_with_exit_code_1() -> None:
    d = decide(obs(running(), children=ready(False, stalled=True, message="install retries exhausted")))
    goes_to(d, P.RUNNING, P.FAILED)
    assert d.status is not None
    assert sent(d)["exitCode"] == 1
    assert "install retries exhausted" in sent(d)["message"]


EPHEMERAL_30S = {"lifetime": {"ephemeral": {"ttl": "30s", "teardownPolicy": "Never"}}}


def test_running_past_its_ttl_goes_to_exiting_with_the_clock_reason() -> None:
    p = make("Running", spec=EPHEMERAL_30S, meta={"creationTimestamp": "2025-06-01T11:59:00Z"}, fluxResources=[KS_REF])
    d = decide(obs(p, children=ready(False)))
    goes_to(d, P.RUNNING, P.EXITING, "ephemeral lifetime: ttl=30s expired (elapsed=60s)")


# ── Attested, Reconverging, Releasing ───────────────────────────────────────


def test_attested_heartbeat_with_no_drift_writes_nothing() -> None:
    d = decide(obs(make("Attested", fluxResources=[{**KS_REF, "ready": True}]), children=ready(True)))
    assert d == Decision(requeue_after=30.0)


@pytest.mark.parametrize(
    "children",
    [ready(False), {}],
    ids=["a child no longer Ready is drift", "a missing child is drift"],
)
def test_attested_drift_goes_to_reconverging(children: dict[ChildRef, ChildState]) -> None:
    d = decide(obs(make("Attested", fluxResources=[{**KS_REF, "ready": True}]), children=children))
    goes_to(d, P.ATTESTED, P.RECONVERGING, "flux resource drift detected")
    assert d.requeue_after == 5.0


def test_attested_rechecks_postconditions_and_treats_a_failing_one_as_drift() -> None:
    cond = {"kind": "ProcessPhase", "params": {"processRef": "db", "phase": "Attested"}}
    p = make("Attested", spec={"boundary": {"postconditions": [cond]}})
    d = decide(obs(p))
    goes_to(d, P.ATTESTED, P.RECONVERGING)


def test_attested_with_teardown_on_attested_and_no_exports_goes_to_exiting() -> None:
    p = make("Attested", spec={"lifetime": {"ephemeral": {"teardownPolicy": "OnAttested"}}})
    d = decide(obs(p))
    goes_to(d, P.ATTESTED, P.EXITING, "ephemeral lifetime: teardown_policy=OnAttested fired on Attested")


def test_attested_with_an_export_on_attested_goes_to_releasing_and_stamps_released_from() -> None:
    export: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}}
    p = make("Attested", spec={"lifetime": {"ephemeral": {"teardownPolicy": "Always", "exports": [export]}}})
    d = decide(obs(p))
    goes_to(
        d, P.ATTESTED, P.RELEASING, "releasing exports — ephemeral lifetime: teardown_policy=Always fired on Attested"
    )
    assert d.annotations == {"tatara.pleme.io/released-from": "Attested"}


ROUTED = {"routing": {"hostnames": [{"app": "api", "instance": "x"}], "backend": {"service": "s", "port": 80}}}
INGRESS = ChildRef("networking.k8s.io/v1", "Ingress", "ns", "me-api-x")


HOST = "api.x.pleme-dev.use1.quero.lol"
"""``<app>.<instance>.<cluster>.<location>.<domain>`` with the fleet defaults (docs/wire-format.md#hostnames)."""

STORED_INGRESS: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {
        "name": "me-api-x", "namespace": "ns", "uid": "i-1", "resourceVersion": "41",
        "creationTimestamp": "2025-06-01T11:58:00Z",
        "labels": {"tatara.pleme.io/app": "api", "tatara.pleme.io/managed-by": "tatara-reconciler",
                   "tatara.pleme.io/process": "ns.me", "tatara.pleme.io/routing-form": "instance"},
        "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt-prod",
                        "tatara.pleme.io/managed-by": "tatara-reconciler", "tatara.pleme.io/process": "ns/me",
                        "tatara.pleme.io/routing-form": "instance"},
        "ownerReferences": [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "name": "me",
                             "uid": "u-1", "controller": True, "blockOwnerDeletion": True}],
    },
    "spec": {
        "ingressClassName": "nginx",
        "tls": [{"hosts": [HOST], "secretName": "me-api-x-tls"}],
        "rules": [{"host": HOST, "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}},
        ]}}],
    },
    "status": {"loadBalancer": {}},
}
"""The instance Ingress of a Process ``me`` routed as :data:`ROUTED`, written out from
docs/behaviour.md#ingress-and-dnsendpoint (not rendered by the code under test) as the API server stores
it: with its server-set metadata and ``status``."""


def routing_cache() -> dict[ChildRef, ChildState]:
    """The routing children of a Process routed as :data:`ROUTED`, cached as the API server stores them."""
    return {INGRESS: ChildState(ref=INGRESS, ready=None, object=STORED_INGRESS)}


def test_attested_with_a_routing_child_gone_applies_it_again_in_place() -> None:
    p = make("Attested", spec=ROUTED, fluxResources=[{**KS_REF, "ready": True}])
    d = decide(obs(p, children=ready(True)))
    assert d.transition is None
    assert d.status is None
    assert [manifest_ref(m) for m in d.apply] == [INGRESS]
    assert d.events == (Event.normal("RoutingDrift", "routing drift corrected: Ingress ns/me-api-x missing"),)
    assert d.requeue_after == 30.0


def test_attested_with_a_routing_child_edited_by_hand_applies_it_again() -> None:
    p = make("Attested", spec=ROUTED, fluxResources=[{**KS_REF, "ready": True}])
    edited = {**STORED_INGRESS, "spec": {**STORED_INGRESS["spec"], "ingressClassName": "traefik"}}
    children = {**ready(True), INGRESS: ChildState(ref=INGRESS, ready=None, object=edited)}
    d = decide(obs(p, children=children))
    assert [manifest_ref(m) for m in d.apply] == [INGRESS]
    assert d.events == (Event.normal("RoutingDrift", "routing drift corrected: Ingress ns/me-api-x changed"),)


def test_attested_with_its_routing_children_cached_writes_nothing() -> None:
    p = make("Attested", spec=ROUTED, fluxResources=[{**KS_REF, "ready": True}])
    assert decide(obs(p, children={**ready(True), **routing_cache()})) == Decision(requeue_after=30.0)


def test_reconverging_goes_back_to_execing() -> None:
    goes_to(decide(obs(make("Reconverging"))), P.RECONVERGING, P.EXECING)


@pytest.mark.parametrize(
    ("released_from", "target"),
    [(None, P.EXITING), ("Attested", P.EXITING), ("Failed", P.ZOMBIE)],
    ids=[
        "releasing without the annotation counts as from Attested and goes to Exiting",
        "releasing from Attested goes to Exiting",
        "releasing from Failed goes to Zombie",
    ],
)
def test_releasing_without_an_applicable_export_goes_on_at_once(released_from: str | None, target: P) -> None:
    meta = {"annotations": {"tatara.pleme.io/released-from": released_from}} if released_from else {}
    d = decide(obs(make("Releasing", meta=meta)))
    goes_to(d, P.RELEASING, target, f"releasing → {target.value} — no applicable exports")


# ── Exiting: the SIGTERM cascade ────────────────────────────────────────────


def child_proc(name: str, phase: str, signal: str | None = None) -> Process:
    meta: dict[str, Any] = {"name": name}
    if signal:
        meta["annotations"] = {SIG: signal}
    return make(phase, meta=meta, spec={"identity": {"parent": "me.1"}})


def exiting(since: datetime, **spec: Any) -> Process:
    return make("Exiting", pid="me.1", phaseSince=format_timestamp(since), spec=spec or None)


def test_exiting_without_children_goes_to_zombie() -> None:
    goes_to(decide(obs(exiting(NOW))), P.EXITING, P.ZOMBIE)


def test_exiting_sends_sigterm_to_each_live_child_not_already_exiting_or_signalled() -> None:
    kids = (
        child_proc("a", "Running"),
        child_proc("b", "Exiting"),
        child_proc("c", "Attested", signal="SIGTERM"),
        child_proc("d", "Reaped"),
    )
    d = decide(obs(exiting(NOW - timedelta(seconds=10)), child_processes=kids))
    assert d.transition is None
    assert d.signal_children == (ChildSignal("ns", "a", S.SIGTERM),)
    assert d.status is not None
    assert sent(d)["message"] == "waiting for 3 child Process(es) to exit (SIGTERM)"
    assert d.requeue_after == 5.0


def test_exiting_forces_children_with_sigkill_after_the_grace_period() -> None:
    kids = (child_proc("a", "Exiting"), child_proc("b", "Zombie", signal="SIGKILL"))
    p = exiting(NOW - timedelta(seconds=61), signals={"sigtermGraceSeconds": 60})
    d = decide(obs(p, child_processes=kids))
    assert d.signal_children == (ChildSignal("ns", "a", S.SIGKILL),)


def test_exiting_never_forces_when_sigkill_force_is_false() -> None:
    p = exiting(NOW - timedelta(seconds=61), signals={"sigtermGraceSeconds": 60, "sigkillForce": False})
    d = decide(obs(p, child_processes=(child_proc("a", "Exiting"),)))
    assert d.signal_children == ()
    assert d.transition is None


def test_exiting_treats_reaped_children_as_gone() -> None:
    d = decide(obs(exiting(NOW), child_processes=(child_proc("a", "Reaped"),)))
    goes_to(d, P.EXITING, P.ZOMBIE)


# ── Failed, Zombie, Reaped ──────────────────────────────────────────────────


def test_a_permanent_failed_process_stays_failed_for_inspection() -> None:
    assert decide(obs(make("Failed", exitCode=1))) == Decision()


def test_failed_with_teardown_always_goes_to_zombie_with_the_clock_reason() -> None:
    p = make("Failed", spec={"lifetime": {"ephemeral": {}}})
    goes_to(decide(obs(p)), P.FAILED, P.ZOMBIE, "ephemeral lifetime: teardown_policy=Always fired on Failed")


def test_a_deleted_failed_process_goes_to_zombie() -> None:
    p = make("Failed", meta={"deletionTimestamp": "2025-06-01T11:00:00Z", "finalizers": [FIN]})
    goes_to(decide(obs(p)), P.FAILED, P.ZOMBIE)


def test_zombie_is_reaped() -> None:
    goes_to(decide(obs(make("Zombie"))), P.ZOMBIE, P.REAPED)


def test_reaped_deletes_owned_children_and_releases_the_finalizer() -> None:
    p = make("Reaped", meta={"finalizers": ["other", FIN]})
    d = decide(obs(p, children=ready(True)))
    assert d.delete == (KS,)
    assert d.released
    assert not holds_finalizer(p)  # so finalize() does not add it back to the Reaped record
    assert not d.delete_self
    assert d.requeue_after is None


def test_reaped_deletes_routing_children_too() -> None:
    ingress = ChildRef("networking.k8s.io/v1", "Ingress", "ns", "me-api-x")
    dns = ChildRef("externaldns.k8s.io/v1alpha1", "DNSEndpoint", "ns", "me-api-x-dns")
    children = {**ready(True), ingress: ChildState(ref=ingress, ready=None), dns: ChildState(ref=dns, ready=None)}
    d = decide(obs(make("Reaped", meta={"finalizers": [FIN]}), children=children))
    assert d.delete == (KS, ingress, dns)


def test_an_ephemeral_process_is_deleted_after_reaped() -> None:
    d = decide(obs(make("Reaped", spec={"lifetime": {"ephemeral": {}}})))
    assert d.delete_self
    assert d.released  # finalize() removes the finalizer only where it is held


# ── dispatcher: deletion, signals, suspension ───────────────────────────────

DELETED = {"deletionTimestamp": "2025-06-01T11:00:00Z", "finalizers": [FIN]}


@pytest.mark.parametrize(
    "phase",
    [P.PENDING, P.FORKING, P.EXECING, P.RUNNING, P.ATTESTED, P.RECONVERGING, P.RELEASING],
    ids=lambda p: f"deleting a {p.value} Process goes to Exiting",
)
def test_deletion_goes_to_exiting(phase: P) -> None:
    d = decide(obs(make(phase.value, meta=DELETED)))
    goes_to(d, phase, P.EXITING, "deletion requested")


def test_deletion_goes_to_exiting_only_once_then_the_exiting_handler_runs() -> None:
    d = decide(obs(make("Exiting", meta=DELETED, spec={"suspended": True})))
    goes_to(d, P.EXITING, P.ZOMBIE)


def test_the_deletion_path_walks_exiting_zombie_reaped_and_releases_the_finalizer() -> None:
    p = make("Running", meta=DELETED)
    seen = [p.phase]
    for _ in range(4):
        d = decide(obs(p))
        if d.transition is None:
            break
        p = make(sent(d)["phase"], meta=DELETED)
        seen.append(p.phase)
    assert seen == [P.RUNNING, P.EXITING, P.ZOMBIE, P.REAPED]
    final = decide(obs(p))
    assert final.released
    assert not final.delete_self


def test_an_invalid_signal_is_cleared_with_a_warning_and_changes_nothing_else() -> None:
    d = decide(obs(make("Running", meta={"annotations": {SIG: "SIGFOO"}})))
    assert d.annotations == {SIG: None}
    assert d.status is None
    assert d.suspended is None
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "InvalidSignal")]
    assert d.signal == SignalCount("SIGFOO", "invalid")


@pytest.mark.parametrize(
    ("phase", "raw", "target", "message"),
    [
        (P.RUNNING, "SIGTERM", P.EXITING, None),
        (P.PENDING, "term", P.EXITING, None),
        (P.ATTESTED, "HUP", P.RECONVERGING, None),
        (P.ATTESTED, "SIGUSR1", P.RUNNING, "forced re-attestation (SIGUSR1)"),
        (P.RUNNING, "usr2", P.RECONVERGING, "remediate requested (SIGUSR2)"),
        (P.EXECING, "KILL", P.REAPED, None),
        (P.ZOMBIE, "SIGKILL", P.REAPED, None),
    ],
    ids=[
        "SIGTERM on Running goes to Exiting and clears the annotation in the same decision",
        "a short lower-case TERM on Pending goes to Exiting",
        "HUP on Attested reconverges",
        "SIGUSR1 on Attested forces re-attestation through Running",
        "usr2 on Running remediates through Reconverging",
        "KILL on Execing reaps at once",
        "SIGKILL on Zombie reaps",
    ],
)
def test_a_signal_applies_its_effect_and_is_cleared_at_once(phase: P, raw: str, target: P, message: str | None) -> None:
    d = decide(obs(make(phase.value, meta={"annotations": {SIG: raw}})))
    goes_to(d, phase, target, message)
    assert d.annotations == {SIG: None}
    assert d.requeue_after == 1.0
    assert d.signal is not None
    assert d.signal.outcome == "applied"


def test_sigkill_records_exit_code_137() -> None:
    d = decide(obs(make("Running", meta={"annotations": {SIG: "SIGKILL"}})))
    assert d.status is not None
    assert sent(d)["exitCode"] == 137


def test_sigusr1_on_running_rewrites_running_without_a_transition() -> None:
    d = decide(obs(make("Running", meta={"annotations": {SIG: "SIGUSR1"}})))
    assert d.transition is None
    assert d.status is not None
    assert sent(d)["message"] == "forced re-attestation (SIGUSR1)"


@pytest.mark.parametrize(
    ("raw", "suspended"),
    [("SIGSTOP", True), ("SIGCONT", False)],
    ids=["SIGSTOP suspends through spec.suspended", "SIGCONT resumes through spec.suspended"],
)
def test_stop_and_cont_patch_spec_suspended_with_the_annotation(raw: str, suspended: bool) -> None:
    d = decide(obs(make("Attested", meta={"annotations": {SIG: raw}}, spec={"suspended": not suspended})))
    assert d.suspended is suspended
    assert d.annotations == {SIG: None}
    assert d.status is None


def test_a_signal_that_does_nothing_is_still_cleared() -> None:
    d = decide(obs(make("Forking", meta={"annotations": {SIG: "SIGHUP"}})))
    assert d.annotations == {SIG: None}
    assert d.status is None
    assert d.signal == SignalCount("SIGHUP", "ignored")


def test_a_suspended_process_waits_without_writes() -> None:
    d = decide(obs(make("Running", spec={"suspended": True}, fluxResources=[KS_REF]), children=ready(True)))
    assert d == Decision(requeue_after=30.0)


def test_sigcont_reaches_a_suspended_process() -> None:
    d = decide(obs(make("Forking", spec={"suspended": True}, meta={"annotations": {SIG: "CONT"}})))
    assert d.suspended is False
