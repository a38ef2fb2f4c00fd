"""Routing upkeep and the StableName condition (docs/behaviour.md#ingress-and-dnsendpoint,
docs/behaviour.md#stable-name-claims): the pure plan, and the decisions that carry it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.children import ChildRef, ChildState, child_ref
from reconciler.claims import ClaimStanding, held_keys
from reconciler.decision import Observed
from reconciler.phases import Deps, decide
from reconciler.render import RoutingConfig, manifest_ref, render_children
from reconciler.routing import contains, drift, make_after_break, plan_routing, served_hosts, stable_name_condition
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process, ProcessCondition
from shared.domain.api.table import ClaimRecord
from shared.kube.events import Event
from shared.kube.meta import as_json

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
EARLIER = datetime(2025, 6, 1, 11, 0, tzinfo=UTC)
UID = "u-1"
KEY = "pleme-dev/api"
CFG = RoutingConfig(dns_lb_target="lb.example.test")


@pytest.mark.parametrize(
    ("have", "want", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": {"x": [1, {"y": "z", "extra": 0}]}}, {"a": {"x": [1, {"y": "z"}]}}, True),
        ({"a": [1, 2]}, {"a": [1]}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1.0}, {"a": 1}, True),
        ({"a": "1"}, {"a": 1}, False),
        ("x", {}, False),
    ],
    ids=[
        "extra keys in the stored object are allowed",
        "a rendered key missing from the stored object is not contained",
        "nested objects and lists compare element by element, extra keys allowed",
        "a list of another length is not contained",
        "true is not the number one",
        "numbers compare by value",
        "a string is not a number",
        "a scalar does not hold an object",
    ],
)
def test_contains(have: Any, want: Any, expected: bool) -> None:
    assert contains(have, want) is expected


def process(phase: str = "Attested", *, hostnames: list[dict[str, Any]] | None = None, claim: bool = True,
            conditions: list[dict[str, Any]] | None = None, name: str = "me") -> Process:
    return convert({
        "metadata": {"name": name, "namespace": "ns", "uid": UID, "generation": 2},
        "spec": {
            "classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "repo", "path": "./app"}},
            "routing": {"hostnames": hostnames or [{"app": "api", "instance": "x"}],
                        "backend": {"service": "s", "port": 80}, "stableNameClaim": claim},
        },
        "status": {"phase": phase, "phaseSince": "2025-06-01T11:59:00Z", "pid": "me.1", "observedGeneration": 2,
                   "conditions": conditions or []},
    }, Process)


def cached(docs: list[dict[str, Any]]) -> dict[ChildRef, ChildState]:
    return {child_ref(d): ChildState(ref=child_ref(d), ready=None, object=d) for d in docs}


def rendered(p: Process, held: frozenset[str] = frozenset()) -> list[Any]:
    return render_children(p, owner_uid=UID, routing=CFG, stable_keys=held)


def routing_docs(p: Process, held: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    return [as_json(m) for m in rendered(p, held) if m.kind in ("Ingress", "DNSEndpoint")]


def names(refs: Any) -> list[str]:
    return [r.name for r in refs]


def test_drift_is_missing_changed_or_none() -> None:
    (ingress, _dns) = rendered(process())[1:]
    doc = as_json(ingress)
    assert drift(ingress, None) == "missing"
    assert drift(ingress, ChildState(ref=child_ref(doc), ready=None, object=doc)) is None
    defaults = {**doc, "spec": {**doc["spec"], "defaultBackend": None}, "status": {"loadBalancer": {}}}
    assert drift(ingress, ChildState(ref=child_ref(doc), ready=None, object=defaults)) is None
    stamped = {**doc, "metadata": {**doc["metadata"], "annotations": {"tatara.pleme.io/generation": "7"}}}
    assert drift(ingress, ChildState(ref=child_ref(doc), ready=None, object=stamped)) is None
    relabelled = {**doc, "metadata": {**doc["metadata"], "labels": {"tatara.pleme.io/app": "other"}}}
    assert drift(ingress, ChildState(ref=child_ref(doc), ready=None, object=relabelled)) == "changed"
    edited = {**doc, "spec": {**doc["spec"], "ingressClassName": "traefik"}}
    assert drift(ingress, ChildState(ref=child_ref(doc), ready=None, object=edited)) == "changed"


HELD = frozenset({KEY})
STABLE_PAIR = ["me-api-stable", "me-api-stable-dns"]
INSTANCE_PAIR = ["me-api-x", "me-api-x-dns"]


@pytest.mark.parametrize(
    ("held", "cache_held", "repair", "applied", "deleted"),
    [
        (HELD, frozenset(), {"stable"}, STABLE_PAIR, []),
        (HELD, frozenset(), set(), [], []),
        (frozenset(), HELD, {"instance", "stable"}, [], STABLE_PAIR),
        (frozenset(), HELD, set(), [], STABLE_PAIR),
        (HELD, HELD, {"instance", "stable"}, [], []),
    ],
    ids=[
        "a name held but not yet applied: its stable pair is applied",
        "without repair nothing missing is applied",
        "a name lost: its stable pair is deleted",
        "a name lost is deleted even where nothing is repaired",
        "everything in place: nothing to do",
    ],
)
def test_plan_routing(held: frozenset[str], cache_held: frozenset[str], repair: set[str], applied: list[str],
                      deleted: list[str]) -> None:
    p = process()
    plan = plan_routing(rendered(p, held), cached(routing_docs(p, cache_held)), UID, repair=repair)
    assert [m.metadata.name for m in plan.apply] == applied
    assert sorted(names(plan.delete)) == deleted


def test_plan_routing_applies_missing_instance_children_only_when_asked() -> None:
    p = process()
    plan = plan_routing(rendered(p), {}, UID, repair={"instance", "stable"})
    assert [m.metadata.name for m in plan.apply] == INSTANCE_PAIR
    assert plan.drift == ("Ingress ns/me-api-x missing", "DNSEndpoint ns/me-api-x-dns missing")
    assert plan_routing(rendered(p), {}, UID, repair={"stable"}).apply == ()


def test_plan_routing_never_deletes_an_ingress_it_does_not_own() -> None:
    p = process()
    foreign = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "named-by-a-condition", "namespace": "ns",
                            "ownerReferences": [{"uid": "someone-else", "controller": True}]}}
    plan = plan_routing(rendered(p), cached([*routing_docs(p), foreign]), UID, repair={"instance"})
    assert plan.delete == ()


def cond(status: str, reason: str, message: str, since: datetime = EARLIER) -> ProcessCondition:
    return ProcessCondition(type_="StableName", status=status, last_transition_time=since, reason=reason,
                            message=message, observed_generation=2)


GRANTED = cond("True", "StableNameGranted", f"holds stable name {KEY}")
HELD_BY_B = cond("False", "StableNameHeld", f"stable name {KEY} is held by ns/b")


@pytest.mark.parametrize(
    ("standing", "phase", "previous", "expected"),
    [
        (ClaimStanding(held=(KEY,)), P.RUNNING, None, cond("True", "StableNameGranted", f"holds stable name {KEY}",
                                                           NOW)),
        (ClaimStanding(held=(KEY,)), P.ATTESTED, GRANTED, None),
        (ClaimStanding(lost=((KEY, "ns/b"),)), P.ATTESTED, None, cond("False", "StableNameHeld",
                                                                      f"stable name {KEY} is held by ns/b", NOW)),
        (ClaimStanding(lost=((KEY, "ns/b"),)), P.ATTESTED, HELD_BY_B, None),
        (ClaimStanding(lost=((KEY, "ns/c"),)), P.ATTESTED, HELD_BY_B,
         cond("False", "StableNameHeld", f"stable name {KEY} is held by ns/c", EARLIER)),
        (ClaimStanding(held=("c/web",), lost=((KEY, "ns/b"),)), P.RUNNING, None,
         cond("False", "StableNameHeld", f"stable name {KEY} is held by ns/b; holds c/web", NOW)),
        (ClaimStanding(unsettled=(KEY,)), P.RUNNING, None, None),
        (ClaimStanding(), P.EXITING, GRANTED,
         cond("False", "StableNameReleased", "stable name released: Exiting is not Running or Attested", NOW)),
        (ClaimStanding(held=(KEY,)), P.EXITING, GRANTED, None),
        (ClaimStanding(), P.EXECING, None, None),
    ],
    ids=[
        "a new holder is granted",
        "a holder already told is not told again",
        "a loser is told who holds the name",
        "a loser already told is not told again",
        "a new holder is named to the loser, its transition time kept",
        "a partial holder is a loser that names what it holds",
        "no record yet: nothing is said",
        "a holder that left Running/Attested and lost the record is released",
        "a holder leaving Running/Attested keeps its condition until the record moves",
        "a bidder that never held writes nothing outside Running/Attested",
    ],
)
def test_stable_name_condition(standing: ClaimStanding, phase: P, previous: ProcessCondition | None,
                               expected: ProcessCondition | None) -> None:
    assert stable_name_condition(standing, phase, previous, 2, NOW) == expected


# ── the decisions (phases.with_routing through decide) ────────────────────────


def record(holder: str) -> dict[str, ClaimRecord]:
    return {KEY: ClaimRecord(holder=holder, pid="x.1", granted_at=EARLIER, priority=0)}


def render_with_cfg(observed: Observed) -> list[Any]:
    p = observed.process
    return render_children(p, owner_uid=UID, routing=CFG, stable_keys=held_keys(observed.claims, p, CFG.cluster))


def deps() -> Deps:
    return Deps(render=render_with_cfg)


def conditions_sent(decision: Any) -> list[dict[str, Any]]:
    assert decision.status is not None
    sent: list[dict[str, Any]] = as_json(decision.status)["conditions"]
    return sent


def test_an_attested_holder_applies_its_stable_pair_and_is_told_once() -> None:
    p = process("Attested")
    children = cached(routing_docs(p))
    d = decide(Observed(process=p, now=NOW, children=children, claims=record("ns/me")), deps())
    assert [manifest_ref(m).name for m in d.apply] == STABLE_PAIR
    assert d.transition is None
    assert conditions_sent(d)[-1]["type"] == "StableName"
    assert conditions_sent(d)[-1]["status"] == "True"
    assert d.events == (Event.normal("StableNameGranted", f"holds stable name {KEY}"),)  # not called drift


def test_a_loser_is_told_the_holder_with_a_warning_and_renders_no_stable_pair() -> None:
    p = process("Running")
    d = decide(Observed(process=p, now=NOW, children=cached(routing_docs(p)), claims=record("ns/other")), deps())
    assert d.apply == ()
    (condition,) = [c for c in conditions_sent(d) if c["type"] == "StableName"]
    assert (condition["status"], condition["reason"]) == ("False", "StableNameHeld")
    assert condition["message"] == f"stable name {KEY} is held by ns/other"
    assert Event.warning("StableNameHeld", f"stable name {KEY} is held by ns/other") in d.events


def test_a_told_loser_writes_nothing() -> None:
    told = {"type": "StableName", "status": "False", "reason": "StableNameHeld",
            "message": f"stable name {KEY} is held by ns/other", "lastTransitionTime": "2025-06-01T11:00:00Z"}
    p = process("Attested", conditions=[told])
    d = decide(Observed(process=p, now=NOW, children=cached(routing_docs(p)), claims=record("ns/other"),
                        heartbeat_seconds=30.0), deps())
    assert d.status is None
    assert d.events == ()
    assert d.apply == ()


def test_an_exiting_process_that_lost_its_name_deletes_its_stable_pair() -> None:
    granted = {"type": "StableName", "status": "True", "reason": "StableNameGranted",
               "message": f"holds stable name {KEY}", "lastTransitionTime": "2025-06-01T11:00:00Z"}
    p = process("Exiting", conditions=[granted])
    children = cached(routing_docs(p, HELD))
    d = decide(Observed(process=p, now=NOW, children=children, claims=record("ns/next")), deps())
    assert sorted(names(d.delete)) == STABLE_PAIR
    (condition,) = [c for c in conditions_sent(d) if c["type"] == "StableName"]
    assert condition["reason"] == "StableNameReleased"


def test_a_phase_write_keeps_the_stable_name_condition() -> None:
    told = {"type": "StableName", "status": "False", "reason": "StableNameHeld",
            "message": f"stable name {KEY} is held by ns/other", "lastTransitionTime": "2025-06-01T11:00:00Z"}
    p = process("Reconverging", conditions=[told])
    d = decide(Observed(process=p, now=NOW, claims=record("ns/other")), deps())
    assert [c["type"] for c in conditions_sent(d)] == ["Ready", "Reconciling", "Stalled", "StableName"]


# ── a holder leaving Running/Attested gives its claims up in that step (docs/behaviour.md#handing-a-stable-name-over)

GRANTED = {"type": "StableName", "status": "True", "reason": "StableNameGranted",
           "message": f"holds stable name {KEY}", "lastTransitionTime": "2025-06-01T11:00:00Z"}
RELEASED = {"type": "StableName", "status": "False", "reason": "StableNameReleased",
            "message": "stable name released: Zombie is not Running or Attested",
            "lastTransitionTime": "2025-06-01T11:30:00Z"}


def holder(phase: str, *, annotations: dict[str, str] | None = None, deleting: bool = False,
           conditions: list[dict[str, Any]] | None = None, lifetime: dict[str, Any] | None = None) -> Process:
    doc = as_json(process(phase, conditions=[GRANTED] if conditions is None else conditions))
    doc["metadata"]["annotations"] = annotations or {}
    if deleting:
        doc["metadata"] |= {"deletionTimestamp": "2025-06-01T11:59:30Z", "finalizers": ["tatara.pleme.io/finalizer"]}
    if lifetime is not None:
        doc["spec"]["lifetime"] = lifetime
        doc["metadata"]["creationTimestamp"] = "2025-06-01T10:00:00Z"
    return convert(doc, Process)


def sig(value: str) -> dict[str, str]:
    return {"tatara.pleme.io/signal": value}


@pytest.mark.parametrize(
    ("p", "claims", "target", "released"),
    [
        (holder("Attested", annotations=sig("SIGTERM")), record("ns/me"), P.EXITING, P.EXITING),
        (holder("Running", deleting=True), record("ns/me"), P.EXITING, P.EXITING),
        (holder("Attested", annotations=sig("SIGKILL")), record("ns/me"), P.REAPED, P.REAPED),
        (holder("Attested", annotations=sig("SIGHUP")), record("ns/me"), P.RECONVERGING, P.RECONVERGING),
        (holder("Running", lifetime={"ephemeral": {"ttl": "1m"}}), record("ns/me"), P.EXITING, P.EXITING),
        (holder("Zombie"), record("ns/me"), P.REAPED, P.REAPED),
        (holder("Exiting"), record("ns/me"), P.ZOMBIE, P.ZOMBIE),
        (holder("Reaped"), record("ns/me"), None, P.REAPED),
        (holder("Attested", annotations=sig("SIGTERM")), record("ns/other"), P.EXITING, None),
        (holder("Reaped"), record("ns/other"), None, None),
    ],
    ids=[
        "SIGTERM on an Attested holder: the claim goes with the Exiting write",
        "a deleted Running holder: with the Exiting write",
        "SIGKILL: with the Reaped write",
        "SIGHUP: Reconverging is not eligible either",
        "the TTL of a Running holder: with the Exiting write",
        "a Zombie the table still names (the crash of issue 28): before its Reaped write",
        "an Exiting Process the table still names: before its Zombie write",
        "a Reaped Process the table still names: released, its finalizer goes after",
        "a Process the table does not name releases nothing, but its condition is released",
        "a Reaped Process left saying True by an older version is told released on its next pass",
    ],
)
def test_a_holder_leaving_gives_its_claim_up_in_the_same_step(p: Process, claims: dict[str, ClaimRecord],
                                                              target: P | None, released: P | None) -> None:
    children = cached(routing_docs(p, HELD))
    d = decide(Observed(process=p, now=NOW, children=children, claims=claims), deps())
    assert (d.transition.target if d.transition is not None else None) == target
    assert d.release_claims == released
    after = target or p.phase
    # the condition says what the table will say once the step is done, and is told once
    (condition,) = [c for c in conditions_sent(d) if c["type"] == "StableName"]
    message = f"stable name released: {after.value} is not Running or Attested"
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "StableNameReleased", message)
    assert Event.normal("StableNameReleased", message) in d.events
    # break before make: the stable pair is deleted in this step, never applied
    assert set(STABLE_PAIR) <= set(names(d.delete))
    assert not [m for m in d.apply if getattr(m, "kind", None) in ("Ingress", "DNSEndpoint")
                and m.metadata.labels.get("tatara.pleme.io/routing-form") == "stable"]


@pytest.mark.parametrize(
    ("p", "claims"),
    [
        (holder("Attested", annotations=sig("SIGUSR1")), record("ns/me")),
        (holder("Attested"), record("ns/me")),
        (holder("Reaped", conditions=[RELEASED]), record("ns/other")),
    ],
    ids=[
        "SIGUSR1 (Attested → Running) stays eligible: nothing released",
        "an Attested holder's heartbeat keeps its claim",
        "a Reaped Process already told, not named: nothing to do",
    ],
)
def test_no_release_where_nothing_leaves(p: Process, claims: dict[str, ClaimRecord]) -> None:
    d = decide(Observed(process=p, now=NOW, children=cached(routing_docs(p, HELD)), claims=claims), deps())
    assert d.release_claims is None
    assert not [e for e in d.events if e.reason == "StableNameReleased"]


# ── make after break: a new holder's pair waits for the old one's (docs/behaviour.md#handing-a-stable-name-over)

STABLE_FQDN = "api.pleme-dev.use1.quero.lol"


@pytest.mark.parametrize(
    ("spec", "hosts"),
    [
        ({"rules": [{"host": "a.example"}, {"host": "b.example"}]}, ["a.example", "b.example"]),
        ({"endpoints": [{"dnsName": "a.example", "recordType": "CNAME"}]}, ["a.example"]),
        ({"rules": [{"http": {}}], "endpoints": "x"}, []),
        (None, []),
    ],
    ids=["an Ingress serves its rules' hosts", "a DNSEndpoint its endpoints' names",
         "entries without a host serve none", "no spec serves none"],
)
def test_served_hosts(spec: Any, hosts: list[str]) -> None:
    assert served_hosts(spec) == hosts


@pytest.mark.parametrize(
    ("routes", "now", "wait"),
    [
        ({}, STABLE_PAIR + INSTANCE_PAIR, []),
        ({STABLE_FQDN: frozenset({UID})}, STABLE_PAIR + INSTANCE_PAIR, []),
        ({STABLE_FQDN: frozenset({"u-old"})}, INSTANCE_PAIR, STABLE_PAIR),
        ({STABLE_FQDN: frozenset({UID, "u-old"})}, INSTANCE_PAIR, STABLE_PAIR),
        ({"x.pleme-dev.use1.quero.lol": frozenset({"u-old"})}, STABLE_PAIR + INSTANCE_PAIR, []),
    ],
    ids=[
        "no stable child serves the host: everything now",
        "only our own: now (a repair)",
        "the old holder's pair still serves the host: the stable pair waits, the instance pair goes",
        "ours and another's: still waits",
        "another host taken changes nothing",
    ],
)
def test_make_after_break(routes: dict[str, frozenset[str]], now: list[str], wait: list[str]) -> None:
    docs = [m for m in rendered(process(), HELD) if m.kind in ("Ingress", "DNSEndpoint")]
    going, waiting = make_after_break(docs, routes, UID)
    assert sorted(m.metadata.name for m in going) == sorted(now)
    assert sorted(m.metadata.name for m in waiting) == sorted(wait)


def test_a_new_holder_waits_for_the_old_holders_pair_then_applies_its_own() -> None:
    p = process("Attested")
    children = cached(routing_docs(p))
    taken = {STABLE_FQDN: frozenset({"u-old"})}
    d = decide(Observed(process=p, now=NOW, children=children, claims=record("ns/me"), routes=taken), deps())
    assert d.apply == ()
    # the old pair gone (the routing watch wakes it): its own pair now
    d = decide(Observed(process=p, now=NOW, children=children, claims=record("ns/me")), deps())
    assert sorted(manifest_ref(m).name for m in d.apply) == STABLE_PAIR


def test_execing_holds_a_stable_pair_back_while_another_serves_its_host() -> None:
    p = process("Execing")
    taken = {STABLE_FQDN: frozenset({"u-old"})}
    d = decide(Observed(process=p, now=NOW, claims=record("ns/me"), routes=taken), deps())
    applied = [manifest_ref(m).name for m in d.apply if m.kind in ("Ingress", "DNSEndpoint")]
    assert applied == INSTANCE_PAIR
