"""reconciler.fold: which decisions go on within the pass, the Process a status write leaves, and one
decision out of two (docs/behaviour.md#folded-phases)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.children import ChildRef
from reconciler.decision import ChildSignal, Decision, SignalCount, Transition
from reconciler.fold import chained, chained_status, continues, passed
from reconciler.status_patch import BoundaryPatch, StatusPatch
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal
from shared.kube.events import Event
from shared.kube.meta import as_json

P = ProcessPhase
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 1, 12, 15, tzinfo=UTC)


def to(source: ProcessPhase, target: ProcessPhase, **fields: object) -> Decision:
    return Decision(status=StatusPatch(phase=target), transition=Transition(source, target), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("decision", "goes_on"),
    [
        (to(P.PENDING, P.FORKING), True),
        (to(P.FORKING, P.EXECING), True),
        (to(P.RECONVERGING, P.EXECING), True),
        (to(P.EXECING, P.RUNNING), False),
        (to(P.EXECING, P.FAILED), False),
        (Decision(status=StatusPatch(message="waiting on preconditions")), False),
        (Decision(), False),
        (to(P.PENDING, P.FORKING, suspended=True), False),
        (to(P.PENDING, P.FORKING, annotations={"a": None}), False),
        (to(P.FORKING, P.EXECING, allocate_pid=True), False),
        (to(P.FORKING, P.EXECING, delete=(ChildRef("v1", "ConfigMap", "ns", "c"),)), False),
        (to(P.FORKING, P.EXECING, signal_children=(ChildSignal("ns", "c", ProcessSignal.SIGTERM),)), False),
        (to(P.FORKING, P.EXECING, signal=SignalCount("SIGCONT", "applied")), False),
        (to(P.FORKING, P.EXECING, released=True), False),
        (to(P.FORKING, P.EXECING, delete_self=True), False),
    ],
    ids=[
        "Pending → Forking goes on", "Forking → Execing goes on", "Reconverging → Execing goes on",
        "Running waits for children", "Failed is not passed through", "a wait without a phase change",
        "nothing", "startSuspended stops in Forking", "an annotation write", "a PID still to allocate",
        "a delete", "a signal to a child", "a signal taken", "a release", "a self-delete",
    ],
)
def test_continues(decision: Decision, goes_on: bool) -> None:
    assert continues(decision) is goes_on


def process(status: dict[str, object] | None) -> Process:
    doc: dict[str, object] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"flux": {"gitRepository": "repo", "path": "./app"}}},
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, Process)


# A status with nothing set, as the reference writes one: the always-written fields at their defaults
# (docs/wire-format.md, ProcessStatus).
UNSET_STATUS: dict[str, object] = {
    "phase": "Pending", "children": [], "fluxResources": [],
    "boundary": {"preconditions": [], "postconditions": []},
    "compliance": {"satisfied": 0, "violated": 0, "total": 0, "violations": []},
    "signalQueue": [], "conditions": [],
}


@pytest.mark.parametrize(
    ("status", "patch", "expected"),
    [
        (None, StatusPatch(phase=P.FORKING, message="declared"), {"phase": "Forking", "message": "declared"}),
        ({"phase": "Forking", "message": "declared"}, StatusPatch(phase=P.EXECING, pid="seph.3"),
         {"phase": "Execing", "message": "declared", "pid": "seph.3"}),
        ({"phase": "Execing", "parent": "seph.1"}, StatusPatch(parent=None), {"phase": "Execing"}),
        ({"phase": "Execing", "boundary": {"deadline": "2026-12-01T12:15:00Z"}},
         StatusPatch(boundary=BoundaryPatch(preconditions=[])),
         {"phase": "Execing", "boundary": {"deadline": "2026-12-01T12:15:00Z", "preconditions": [],
                                           "postconditions": []}}),
    ],
    ids=["a new Process gets a status", "fields not named stay", "None deletes", "boundary merges"],
)
def test_passed_is_the_process_the_status_write_leaves(status: dict[str, object] | None, patch: StatusPatch,
                                                       expected: dict[str, object]) -> None:
    before = process(status)
    after = passed(before, patch)
    assert as_json(after.status) == {**UNSET_STATUS, **expected}, "the whole status, nothing filtered out"
    assert after.metadata == before.metadata  # no write happened: same resourceVersion
    assert before == process(status)  # the input is not modified


def test_chained_status_merges_boundary_and_lets_the_later_fields_win() -> None:
    first = StatusPatch(phase=P.EXECING, message="dependencies satisfied", pid="seph.3",
                        boundary=BoundaryPatch(deadline=LATER))
    then = StatusPatch(phase=P.RUNNING, message="rendered 1 resource(s)", boundary=BoundaryPatch(preconditions=[]))
    assert as_json(chained_status(first, then)) == {
        "phase": "Running", "message": "rendered 1 resource(s)", "pid": "seph.3",
        "boundary": {"deadline": "2026-12-01T12:15:00Z", "preconditions": []},
    }
    assert chained_status(None, then) is then
    assert chained_status(first, None) is first


def test_chained_keeps_every_transition_and_event_in_order_and_the_last_requeue() -> None:
    forking = Decision(status=StatusPatch(phase=P.FORKING), transition=Transition(P.PENDING, P.FORKING),
                       events=(Event.normal("PhaseForking", "declared"),), requeue_after=1.0)
    execing = Decision(status=StatusPatch(phase=P.EXECING, pid="seph.1"),
                       transition=Transition(P.FORKING, P.EXECING, 0.0),
                       events=(Event.normal("PhaseExecing", "dependencies satisfied"),), requeue_after=1.0)
    running = Decision(status=StatusPatch(phase=P.RUNNING), transition=Transition(P.EXECING, P.RUNNING, 0.0),
                       events=(Event.normal("PhaseRunning", "rendered"),), requeue_after=5.0)
    folded = chained(chained(forking, execing), running)
    assert [(t.source, t.target) for t in folded.transitions] == [(P.PENDING, P.FORKING), (P.FORKING, P.EXECING),
                                                                  (P.EXECING, P.RUNNING)]
    assert folded.transition == Transition(P.EXECING, P.RUNNING, 0.0)
    assert [e.reason for e in folded.events] == ["PhaseForking", "PhaseExecing", "PhaseRunning"]
    assert as_json(folded.status) == {"phase": "Running", "pid": "seph.1"}
    assert folded.requeue_after == 5.0


def test_a_step_that_waits_keeps_the_last_phase_change_as_the_transition() -> None:
    forking = Decision(status=StatusPatch(phase=P.FORKING), transition=Transition(P.PENDING, P.FORKING),
                       events=(Event.normal("PhaseForking", "declared"),), requeue_after=1.0)
    waiting = Decision(status=StatusPatch(message="waiting on 1 dependency/dependencies: ns/a not found"),
                       requeue_after=30.0)
    folded = chained(forking, waiting)
    assert folded.transition == Transition(P.PENDING, P.FORKING)
    assert folded.passed == ()
    assert as_json(folded.status) == {"phase": "Forking",
                                      "message": "waiting on 1 dependency/dependencies: ns/a not found"}
    assert folded.requeue_after == 30.0
