"""The decisions a takeover of the Rust reference's state needs (docs/migration.md#what-the-takeover-does):
a status it wrote adopted once (reconciler/adoption.py), its v1beta2 refs read as the v1 objects they are,
its duplicate sequence numbers reported on the later Process (reconciler/duplicates.py).

The Processes are the reference's own, read from tests/fixtures/rust-state; expected values come from the
fixtures and the documented texts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import blake3

from reconciler.children import ChildRef, ChildState, served_api_version
from reconciler.decision import Decision, Observed
from reconciler.phases import decide
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.kube.meta import as_json
from tests.support.rust_state import scenarios
from tests.unit.reconciler.test_phases import fake_render

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def reference(prefix: str, name: str | None = None) -> dict[str, Any]:
    scenario = next(s for s in scenarios() if s.name.startswith(prefix))
    found: dict[str, Any] = next(p for p in scenario.processes if name is None or p["metadata"]["name"] == name)
    return found


def as_process(doc: dict[str, Any], **meta: Any) -> Process:
    body = {**doc, "metadata": {k: v for k, v in doc["metadata"].items() if k != "managedFields"} | meta}
    return convert(body, Process)


def ready_children(doc: dict[str, Any], *, served: bool = True) -> dict[ChildRef, ChildState]:
    out = {}
    for ref in doc["status"]["fluxResources"]:
        version = served_api_version(ref["apiVersion"], ref["kind"]) if served else ref["apiVersion"]
        key = ChildRef(version, ref["kind"], ref["namespace"], ref["name"])
        out[key] = ChildState(ref=key, ready=True)
    return out


def status_sent(decision: Decision) -> dict[str, Any]:
    assert decision.status is not None
    sent: dict[str, Any] = as_json(decision.status)
    return sent


def test_a_quiet_attested_process_of_the_reference_is_adopted_once() -> None:
    doc = reference("s1-")
    decision = decide(Observed(process=as_process(doc), now=NOW, children=ready_children(doc)))
    assert decision.transition is None
    assert not decision.apply
    sent = status_sent(decision)
    assert sent["observedGeneration"] == doc["metadata"]["generation"]
    assert [(c["type"], c["status"]) for c in sent["conditions"]] == [("Ready", "True"), ("Reconciling", "False"),
                                                                      ("Stalled", "False")]
    assert set(sent) == {"observedGeneration", "conditions"}, "nothing else of the reference's status changes"
    (event,) = decision.events
    assert (event.type.value, event.reason) == ("Normal", "Adopted")
    assert "observedGeneration 1" in event.message


def test_once_adopted_a_quiet_attested_process_writes_nothing() -> None:
    doc = reference("s1-")
    first = decide(Observed(process=as_process(doc), now=NOW, children=ready_children(doc)))
    after = {**doc, "status": {**doc["status"], **status_sent(first)}}
    again = decide(Observed(process=as_process(after), now=NOW + timedelta(seconds=30),
                            children=ready_children(doc)))
    assert again.status is None
    assert again.events == ()


def test_a_v1beta2_ocirepository_ref_is_the_v1_child_and_stays_as_the_attestation_hashed_it() -> None:
    """The ref names the OCIRepository we cache at v1: Ready, no drift. It is not rewritten: the reference's
    ``artifactHash`` is BLAKE3 over the refs' ``apiVersion/kind/namespace/name`` lines (docs/wire-format.md
    #attestation-root), computed here from the fixture alone, and must stay true of ``fluxResources``."""
    doc = reference("s2b-")
    refs = doc["status"]["fluxResources"]
    assert "source.toolkit.fluxcd.io/v1beta2" in {r["apiVersion"] for r in refs}
    lines = "".join(f"{r['apiVersion']}/{r['kind']}/{r['namespace']}/{r['name']}\n" for r in refs)
    assert blake3.blake3(lines.encode()).hexdigest() == doc["status"]["attestation"]["artifactHash"]
    decision = decide(Observed(process=as_process(doc), now=NOW, children=ready_children(doc)))
    assert decision.transition is None, "read as missing, the child would look like drift"
    assert "fluxResources" not in status_sent(decision)
    missing = decide(Observed(process=as_process(doc), now=NOW, children=ready_children(doc, served=False)))
    assert missing.transition is not None, "a child the cache does not hold is drift (the lookup is what matters)"


def test_a_process_the_reference_stopped_is_not_written() -> None:
    doc = reference("s5-")
    assert doc["spec"]["suspended"] is True
    decision = decide(Observed(process=as_process(doc), now=NOW, children=ready_children(doc)))
    assert decision.status is None
    assert decision.events == ()


def test_the_later_of_two_holders_of_one_sequence_number_is_told_and_keeps_its_pid() -> None:
    first, second = reference("s1-"), reference("s2b-")
    assert first["status"]["pid"].rpartition(".")[2] == second["status"]["pid"].rpartition(".")[2]
    early = as_process(first, creationTimestamp="2026-12-01T20:08:55Z")
    late = as_process(second, creationTimestamp="2026-12-01T20:15:25Z")
    told = decide(Observed(process=late, now=NOW, children=ready_children(second), sequence_holders=(early,)))
    sent = status_sent(told)
    assert "pid" not in sent, "never renumbered"
    assert told.transition is None
    conflict = {c["type"]: c for c in sent["conditions"]}["PidConflict"]
    assert (conflict["status"], conflict["reason"]) == ("True", "DuplicatePid")
    assert "s1-flux-attested/flux-app" in conflict["message"]
    assert [e.reason for e in told.events if e.type.value == "Warning"] == ["DuplicatePid"]
    quiet = decide(Observed(process=early, now=NOW, children=ready_children(first), sequence_holders=(late,)))
    assert "PidConflict" not in {c["type"] for c in status_sent(quiet)["conditions"]}
    assert [e.reason for e in quiet.events] == ["Adopted"]


def test_a_process_left_in_execing_hours_ago_goes_on_with_a_deadline_from_the_takeover() -> None:
    """The reference enforces no ``boundary.timeout`` and writes no deadline: counted from its ``phaseSince``
    (hours before NOW), the default 15m would fail the Process on our first pass. It renders instead, and
    the deadline written is NOW + 15m."""
    doc = reference("d3-")
    assert doc["status"]["phase"] == "Execing"
    assert "deadline" not in doc["status"]["boundary"]
    decision = decide(Observed(process=as_process(doc), now=NOW), fake_render())
    sent = status_sent(decision)
    assert sent["phase"] != "Failed", sent
    assert sent["boundary"]["deadline"] == "2026-12-02T06:15:00Z"
    assert "boundary.deadline" in decision.events[-1].message
