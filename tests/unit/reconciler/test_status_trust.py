"""Status users can trust (issue 13): the kstatus conditions follow the phase whatever wrote it, every
condition write carries ``observedGeneration``, and a new generation on a converged Process reconverges
by itself (docs/behaviour.md#conditions, docs/behaviour.md#spec-changes)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.attestation import attest_process
from reconciler.conditions import conditions_agree, phase_truth
from reconciler.decision import Decision
from reconciler.phases import decide, with_fresh_status
from reconciler.refusals import KIND_NOT_SERVED, WRITE_REFUSED, WriteRefused, refusal_decision
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process
from shared.domain.kstatus import Truth
from shared.kube.events import Event
from shared.kube.meta import as_json
from tests.unit.reconciler.test_phases import KS, NOW, make, obs, ready, sent

REFS = [{"apiVersion": KS.api_version, "kind": KS.kind, "name": KS.name, "namespace": KS.namespace, "ready": True}]


def conds(ready_: str, reconciling: str, stalled: str, reason: str = "Attested") -> list[dict[str, Any]]:
    return [{"type": t, "status": v, "reason": reason, "message": "attested generation 0",
             "lastTransitionTime": "2025-06-01T11:00:00Z", "observedGeneration": 3}
            for t, v in (("Ready", ready_), ("Reconciling", reconciling), ("Stalled", stalled))]


# the kstatus table of docs/behaviour.md#conditions, written out by hand
@pytest.mark.parametrize(("phase", "truth"), [
    (P.ATTESTED, Truth(ready=True)),
    (P.FAILED, Truth(stalled=True)),
    (P.REAPED, Truth()),
    (P.PENDING, Truth(reconciling=True)),
    (P.EXECING, Truth(reconciling=True)),
    (P.RELEASING, Truth(reconciling=True)),
], ids=lambda v: str(v))
def test_each_phase_has_its_kstatus_truth(phase: P, truth: Truth) -> None:
    assert phase_truth(phase) == truth


@pytest.mark.parametrize(("phase", "stored", "agree"), [
    (P.ATTESTED, ("True", "False", "False"), True),
    (P.REAPED, ("True", "False", "False"), False),
    (P.FAILED, ("True", "False", "False"), False),
    (P.FORKING, ("False", "False", "True"), True),
    (P.ATTESTED, ("False", "False", "True"), False),
    (P.RUNNING, ("False", "True", "False"), True),
], ids=["attested-ready", "reaped-left-ready", "failed-left-ready", "forking-stall", "attested-stall",
        "running-reconciling"])
def test_stored_conditions_agree_with_the_phase_only_when_they_are_its_own(
        phase: P, stored: tuple[str, str, str], agree: bool) -> None:
    process = make(phase.value, conditions=conds(*stored))
    assert process.status is not None
    assert conditions_agree(phase, process.status.conditions) is agree


@pytest.mark.parametrize("phase", ["Reaped", "Failed"])
def test_a_phase_edited_by_hand_does_not_keep_ready_true(phase: str) -> None:
    process = make(phase, conditions=conds("True", "False", "False"), observedGeneration=3,
                   meta={"finalizers": ["tatara.pleme.io/process-finalizer"]})
    d = decide(obs(process))
    wrote = {c["type"]: c["status"] for c in sent(d)["conditions"]}
    assert wrote["Ready"] == "False"
    assert wrote["Stalled"] == ("True" if phase == "Failed" else "False")
    assert {c["reason"] for c in sent(d)["conditions"]} == {phase}
    assert sent(d)["observedGeneration"] == 3


def test_a_spec_change_on_a_failed_process_is_acknowledged_without_leaving_failed() -> None:
    process = make("Failed", conditions=conds("False", "False", "True", reason="InvalidSpec"), observedGeneration=2)
    d = decide(obs(process))
    assert d.transition is None
    assert sent(d)["observedGeneration"] == 3
    assert [c["observedGeneration"] for c in sent(d)["conditions"]] == [3, 3, 3]
    assert [c["reason"] for c in sent(d)["conditions"]] == ["InvalidSpec"] * 3  # Ready stayed False


def test_a_consistent_status_writes_nothing() -> None:
    process = make("Failed", conditions=conds("False", "False", "True", reason="InvalidSpec"), observedGeneration=3)
    assert decide(obs(process)).status is None


@pytest.mark.parametrize("phase", ["Attested", "Running"])
def test_a_new_generation_reconverges_by_itself(phase: str) -> None:
    process = make(phase, conditions=conds("True" if phase == "Attested" else "False",
                                           "False" if phase == "Attested" else "True", "False"),
                   observedGeneration=2, fluxResources=REFS)
    d = decide(obs(process, children=ready(True)))
    assert d.transition is not None
    assert (d.transition.source.value, d.transition.target) == (phase, P.RECONVERGING)
    assert sent(d)["message"] == "spec changed: generation 2 → 3"
    assert {c["reason"] for c in sent(d)["conditions"]} == {"SpecChanged"}
    assert sent(d)["observedGeneration"] == 3
    assert {c["type"]: c["status"] for c in sent(d)["conditions"]}["Reconciling"] == "True"


def test_the_same_generation_stays_attested() -> None:
    process = make("Attested", conditions=conds("True", "False", "False"), observedGeneration=3,
                   fluxResources=REFS)
    d = decide(obs(process, children=ready(True)))
    assert (d.transition, d.status) == (None, None)


def test_a_status_from_before_observed_generation_does_not_reconverge() -> None:
    process = make("Attested", conditions=conds("True", "False", "False"),
                   fluxResources=REFS)
    assert decide(obs(process, children=ready(True))).transition is None


def test_every_phase_write_carries_observed_generation() -> None:
    d = decide(obs(make("Pending")))
    assert d.transition is not None
    assert d.transition.target is P.FORKING
    assert sent(d)["observedGeneration"] == 3
    assert [c["observedGeneration"] for c in sent(d)["conditions"]] == [3, 3, 3]


# ── refused child writes (docs/behaviour.md#write-failures) ────────────────────


@pytest.mark.parametrize(("why", "status", "detail"), [
    (WRITE_REFUSED, 403, 'kustomizations "app" is forbidden'),
    (WRITE_REFUSED, 422, "spec.path: Invalid value"),
    (KIND_NOT_SERVED, 404, "the API server serves no kind Kustomization in kustomize.toolkit.fluxcd.io/v1"),
], ids=["forbidden", "invalid", "crd-missing"])
def test_a_refused_write_is_a_stall_naming_the_object_and_the_answer(why: str, status: int, detail: str) -> None:
    refused = WriteRefused("apply", KS, detail, status=status, why=why)
    d = refusal_decision(obs(make("Execing", conditions=conds("False", "True", "False", reason="Rendered"))), refused)
    message = f"apply Kustomization ns/app refused: {detail}"
    assert d.transition is None
    assert sent(d)["message"] == message
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in sent(d)["conditions"]] == [
        ("Ready", "False", why, message), ("Reconciling", "False", why, message), ("Stalled", "True", why, message)]
    assert sent(d)["observedGeneration"] == 3
    assert d.events == (Event.warning(why, message),)
    assert d.requeue_after is None


def test_the_retry_that_repairs_an_attested_routing_child_takes_the_stall_off() -> None:
    stall = conds("False", "False", "True", reason=WRITE_REFUSED)
    process = make("Attested", conditions=stall, observedGeneration=3, fluxResources=REFS)
    d = decide(obs(process, children=ready(True)))
    assert d.transition is None
    assert [(c["type"], c["status"]) for c in sent(d)["conditions"]] == [
        ("Ready", "True"), ("Reconciling", "False"), ("Stalled", "False")]


def test_a_stall_that_is_not_a_refusal_is_kept() -> None:
    process = make("Forking", conditions=conds("False", "False", "True", reason="DependencyCycle"),
                   observedGeneration=3)
    assert with_fresh_status(obs(process), Decision()).status is None


def attested_with(intent: dict[str, Any]) -> Process:
    """An Attested Process at generation 3 whose status was written at generation 2, attested over ``intent``."""
    base = make("Attested", spec={"intent": intent})
    record = as_json(attest_process(base, now=NOW))
    return make("Attested", conditions=conds("True", "False", "False"), observedGeneration=2, fluxResources=REFS,
                attestation=record)


def test_a_new_generation_with_the_attested_intent_is_only_acknowledged() -> None:
    same = make("Running").spec.intent
    d = decide(obs(attested_with(as_json(same)), children=ready(True)))
    assert d.transition is None  # a pool's bind patched only the lifetime: nothing to render again
    assert sent(d)["observedGeneration"] == 3
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in sent(d)["conditions"]] == [
        ("Ready", "True", 3), ("Reconciling", "False", 3), ("Stalled", "False", 3)]


def test_a_new_generation_with_another_intent_reconverges() -> None:
    d = decide(obs(attested_with({"flux": {"gitRepository": "repo", "path": "./old"}}), children=ready(True)))
    assert d.transition is not None
    assert d.transition.target is P.RECONVERGING
    assert sent(d)["message"] == "spec changed: generation 2 → 3"
