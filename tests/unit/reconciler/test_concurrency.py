"""reconciler.concurrency and the Pending gate: which Processes share a ``maxConcurrent`` budget, which
phases hold a slot, who runs first (docs/behaviour.md#maxconcurrent; the CRD field's description:
"across ephemeral Processes that share the same nameOverride / chartRef, 0 = no cap")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.concurrency import Admission, Sibling, admission, concurrency_key, holds_slot
from reconciler.controller import leaves_slot
from reconciler.phases import decide
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process
from shared.kube.events import Event
from shared.kube.informer import WatchEventType
from tests.unit.reconciler.test_phases import goes_to, make, obs, sent

APP = {"aplicacao": {"chartRef": "oci://charts/demo", "version": "1.0.0"}}
T0 = datetime(2025, 6, 1, 11, 0, tzinfo=UTC)
T1 = datetime(2025, 6, 1, 11, 1, tzinfo=UTC)


def capped(cap: int | None = 1, *, created: str = "2025-06-01T11:00:30Z", name: str = "me",
           lifetime: dict[str, Any] | None = None, identity: dict[str, Any] | None = None,
           intent: dict[str, Any] | None = None, phase_: str = "Pending", deleting: bool = False,
           **status: Any) -> Process:
    eph: dict[str, Any] = {} if cap is None else {"maxConcurrent": cap}
    spec: dict[str, Any] = {"intent": intent or APP, "lifetime": lifetime or {"ephemeral": eph}}
    if identity is not None:
        spec["identity"] = identity
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created,
                            **({"deletionTimestamp": "2025-06-01T12:00:00Z"} if deleting else {})}
    return make(phase_, spec=spec, meta=meta, **status)


@pytest.mark.parametrize(("process", "key"), [
    (capped(), "chart:oci://charts/demo"),
    (capped(identity={"nameOverride": "  preview  "}), "name:preview"),
    (capped(identity={"nameOverride": "   "}), "chart:oci://charts/demo"),
    (capped(intent={"flux": {"gitRepository": "r", "path": "."}}), None),
    (capped(lifetime={"permanent": {}}), None),
    (capped(lifetime={"permanent": {}, "ephemeral": {}}), None),
], ids=[
    "an ephemeral aplicacao Process is grouped by its chartRef",
    "a nameOverride (trimmed) takes precedence over the chart",
    "a blank nameOverride counts as absent",
    "a flux intent without nameOverride is in no group",
    "a permanent Process is in no group",
    "an ambiguous lifetime is not ephemeral, so in no group",
])
def test_the_concurrency_group(process: Process, key: str | None) -> None:
    assert concurrency_key(process) == key


@pytest.mark.parametrize(("phase", "holds"), [
    (P.PENDING, False), (P.FORKING, True), (P.RUNNING, True), (P.ATTESTED, True), (P.RELEASING, True),
    (P.EXITING, True), (P.FAILED, True), (P.ZOMBIE, True), (P.REAPED, False),
])
def test_which_phases_hold_a_slot(phase: P, holds: bool) -> None:
    assert holds_slot(phase) is holds


def sib(name: str, phase: P, created: datetime = T0, deleting: bool = False) -> Sibling:
    return Sibling(ref=f"ns/{name}", phase=phase, created=created, deleting=deleting)


@pytest.mark.parametrize(("cap", "siblings", "admitted", "message"), [
    (1, [], True, ""),
    (1, [sib("a", P.RUNNING)], False, "waiting: 1 of maxConcurrent=1 running: ns/a"),
    (1, [sib("a", P.REAPED)], True, ""),
    (2, [sib("a", P.ATTESTED)], True, ""),
    (2, [sib("b", P.FAILED), sib("a", P.FORKING)], False, "waiting: 2 of maxConcurrent=2 running: ns/a, ns/b"),
    (0, [sib("a", P.RUNNING), sib("b", P.RUNNING)], True, ""),
    (1, [sib("a", P.PENDING, T0)], False, "waiting: 0 of maxConcurrent=1 running; ahead in line: ns/a"),
    (1, [sib("z", P.PENDING, T1)], True, ""),
    (1, [sib("a", P.PENDING, T0, deleting=True)], True, ""),
    (2, [sib("a", P.PENDING, T0)], True, ""),
], ids=[
    "alone in its group: admitted",
    "the one slot is held: wait, naming the holder",
    "a Reaped sibling holds nothing",
    "a free slot is left: admitted",
    "every slot held: wait, holders sorted",
    "maxConcurrent 0 is no cap",
    "an older Pending sibling goes first",
    "a younger Pending sibling waits behind this one",
    "a Pending sibling being deleted is not in line",
    "two free slots take the older Pending sibling and this one",
])
def test_admission(cap: int, siblings: list[Sibling], admitted: bool, message: str) -> None:
    assert admission(capped(cap), siblings) == Admission(admitted, message)


def test_same_creation_second_is_broken_by_name() -> None:
    same = "2025-06-01T11:00:00Z"
    assert admission(capped(1, name="b", created=same), [sib("a", P.PENDING, T0)]).admitted is False
    assert admission(capped(1, name="a", created=same), [sib("b", P.PENDING, T0)]).admitted is True


def test_a_waiting_process_says_why_once_and_is_not_polled() -> None:
    d = decide(obs(capped(1), siblings=(sib("a", P.RUNNING),)))
    assert d.transition is None
    assert sent(d)["message"] == "waiting: 1 of maxConcurrent=1 running: ns/a"
    assert sent(d)["conditions"][0]["reason"] == "MaxConcurrent"
    assert d.events == (Event.normal("MaxConcurrent", "waiting: 1 of maxConcurrent=1 running: ns/a"),)
    assert d.requeue_after is None  # woken by the sibling leaving, not by a timer
    assert "phase" not in sent(d)  # it has a status already: the phase stays as it is
    fresh = decide(obs(make(None, spec={"intent": APP, "lifetime": {"ephemeral": {}}}),
                       siblings=(sib("a", P.RUNNING),)))
    assert (sent(fresh)["phase"], sent(fresh)["phaseSince"]) == ("Pending", "2025-06-01T12:00:00Z")
    again = decide(obs(capped(1, message="waiting: 1 of maxConcurrent=1 running: ns/a"),
                       siblings=(sib("a", P.RUNNING),)))
    assert (again.status, again.events, again.requeue_after) == (None, (), None)


def test_an_admitted_process_forks() -> None:
    d = decide(obs(capped(1), siblings=(sib("a", P.REAPED),)))
    goes_to(d, P.PENDING, P.FORKING)


@pytest.mark.parametrize(("event", "old", "new", "wakes"), [
    (WatchEventType.DELETED, None, capped(phase_="Attested"), True),
    (WatchEventType.MODIFIED, capped(phase_="Zombie"), capped(phase_="Reaped"), True),
    (WatchEventType.MODIFIED, capped(), capped(phase_="Forking"), True),
    (WatchEventType.MODIFIED, capped(phase_="Attested"), capped(phase_="Attested", deleting=True), True),
    (WatchEventType.MODIFIED, capped(phase_="Attested"), capped(phase_="Attested", identity={"nameOverride": "x"}),
     True),
    (WatchEventType.MODIFIED, capped(phase_="Running"), capped(phase_="Attested"), False),
    (WatchEventType.ADDED, None, capped(), False),
], ids=[
    "a sibling deleted frees its slot",
    "a sibling reaching Reaped frees its slot",
    "a sibling leaving Pending takes a slot (the waiting messages change)",
    "a sibling starting to be deleted leaves the line",
    "a sibling moving to another group frees its slot",
    "a holder moving between slot-holding phases changes nothing",
    "a new Process frees nothing",
])
def test_which_sibling_changes_wake_the_waiting(event: WatchEventType, old: Process | None, new: Process,
                                                wakes: bool) -> None:
    assert leaves_slot(event, old, new) is wakes
