"""Stable-name claims arbiter (docs/behaviour.md#stable-name-claims, docs/wire-format.md#claims)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.claims import (
    Candidate,
    ClaimAction,
    ClaimStanding,
    arbitrate,
    bid_keys,
    candidates_by_key,
    claims_after,
    claims_changed,
    decide_claim,
    foreign_holders,
    held_keys,
    holder_keys,
    holds_any_claim,
    in_phase,
    standing,
)
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process
from shared.domain.api.table import ClaimRecord

NOW = datetime(2025, 6, 1, tzinfo=UTC)
T1 = datetime(2025, 1, 1, tzinfo=UTC)
T2 = datetime(2025, 2, 1, tzinfo=UTC)


def cand(ref: str, *, priority: int = 0, phase: P = P.RUNNING, created: datetime = T1, pid: str = "") -> Candidate:
    return Candidate(ref=ref, pid=pid or f"{ref.split('/')[1]}.1", priority=priority, phase=phase, created_at=created)


def record(ref: str, pid: str = "", priority: int = 0, granted: datetime = T1) -> ClaimRecord:
    return ClaimRecord(holder=ref, pid=pid or f"{ref.split('/')[1]}.1", granted_at=granted, priority=priority)


@pytest.mark.parametrize(
    ("current", "candidates", "action", "holder"),
    [
        (None, [], ClaimAction.VACATE, None),
        (record("ns/a"), [cand("ns/a", phase=P.EXITING)], ClaimAction.VACATE, None),
        (None, [cand("ns/a", phase=P.PENDING), cand("ns/b", phase=P.ATTESTED)], ClaimAction.TRANSFER, "ns/b"),
        (None, [cand("ns/a", priority=-1), cand("ns/b")], ClaimAction.TRANSFER, "ns/b"),
        (None, [cand("ns/a", priority=1, created=T2), cand("ns/b", created=T1)], ClaimAction.TRANSFER, "ns/a"),
        (None, [cand("ns/a", created=T2), cand("ns/b", created=T1)], ClaimAction.TRANSFER, "ns/b"),
        (None, [cand("ns/b"), cand("ns/a")], ClaimAction.TRANSFER, "ns/a"),
        (record("ns/a"), [cand("ns/a"), cand("ns/b", created=T2)], ClaimAction.HOLD, "ns/a"),
        (record("ns/a", pid="old.1"), [cand("ns/a")], ClaimAction.TRANSFER, "ns/a"),
        (record("ns/a", priority=5), [cand("ns/a", priority=5, phase=P.FAILED), cand("ns/b", priority=-3)],
         ClaimAction.TRANSFER, "ns/b"),
    ],
    ids=[
        "no candidates vacate",
        "a holder that left Running/Attested with no rival vacates",
        "only Running or Attested candidates are eligible",
        "a negative priority loses to zero",
        "higher priority beats an earlier creation",
        "on equal priority the earlier creation wins",
        "on equal priority and time the smaller ref wins",
        "the current holder still winning holds",
        "the same holder with another pid is a transfer",
        "a holder dropping out loses even to a lower priority",
    ],
)
def test_decision_per_key(current: ClaimRecord | None, candidates: list[Candidate], action: ClaimAction,
                          holder: str | None) -> None:
    decision = decide_claim(current, candidates, NOW)
    assert decision.action is action
    assert (decision.record.holder if decision.record else None) == holder
    if action is ClaimAction.TRANSFER:
        assert decision.record is not None
        assert decision.record.granted_at == NOW
    if action is ClaimAction.HOLD:
        assert decision.record == current


def routed(name: str, hostnames: list[dict[str, Any]], *, claim: bool = True, priority: int = 0,
           status: dict[str, Any] | None = None) -> Process:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Observability"},
                 "intent": {"nix": {"flakeRef": "f", "attribute": "a"}},
                 "routing": {"hostnames": hostnames, "backend": {"service": "s", "port": 80},
                             "stableNameClaim": claim, "priority": priority}},
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, Process)


def test_candidates_are_keyed_by_cluster_and_app_with_fallback_cluster() -> None:
    procs = [
        routed("a", [{"app": "api"}, {"app": "api", "cluster": "prod"}, {"app": "api"}],
               status={"pid": "a.1", "phase": "Running"}),
        routed("b", [{"app": "api"}], claim=False),
        routed("c", [{"app": "web"}], priority=3),
    ]
    keys = candidates_by_key(procs, "pleme-dev", NOW)
    assert sorted(keys) == ["pleme-dev/api", "pleme-dev/web", "prod/api"]
    assert [c.ref for c in keys["pleme-dev/api"]] == ["ns/a", "ns/a"]  # duplicates kept
    web = keys["pleme-dev/web"][0]
    assert (web.pid, web.phase, web.priority, web.created_at) == ("", P.PENDING, 3, T1)


def test_arbitrate_visits_current_and_candidate_keys() -> None:
    current = {"pleme-dev/old": record("ns/gone"), "pleme-dev/api": record("ns/a")}
    candidates = {"pleme-dev/api": [cand("ns/a")], "pleme-dev/new": [cand("ns/n")]}
    claims, decisions = arbitrate(current, candidates, NOW)
    assert list(decisions) == ["pleme-dev/api", "pleme-dev/new", "pleme-dev/old"]
    assert [d.action for d in decisions.values()] == [ClaimAction.HOLD, ClaimAction.TRANSFER, ClaimAction.VACATE]
    assert sorted(claims) == ["pleme-dev/api", "pleme-dev/new"]
    assert claims_changed(current, claims)
    assert not claims_changed(claims, arbitrate(claims, candidates, NOW)[0])


def test_holds_any_claim_compares_the_holder_only() -> None:
    claims = {"c/api": record("ns/a", pid="whatever.9")}
    assert holds_any_claim(claims, "ns", "a")
    assert not holds_any_claim(claims, "ns", "b")


# ── the Process side: keys, holders, standing ────────────────────────────────


def bidder(name: str = "me", *, claim: bool = True, hostnames: list[dict[str, Any]] | None = None) -> Process:
    return convert({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"flux": {"gitRepository": "r", "path": "./a"}},
                 "routing": {"hostnames": hostnames or [{"app": "web"}, {"app": "api", "cluster": "c2"},
                                                         {"app": "web"}],
                             "backend": {"service": "s", "port": 80}, "stableNameClaim": claim}},
    }, Process)


def test_bid_keys_are_sorted_unique_and_need_stable_name_claim() -> None:
    assert bid_keys(bidder(), "pleme-dev") == ["c2/api", "pleme-dev/web"]
    assert bid_keys(bidder(claim=False), "pleme-dev") == []


@pytest.mark.parametrize(
    ("claims", "held", "lost", "unsettled"),
    [
        ({}, (), (), ("c2/api", "pleme-dev/web")),
        ({"pleme-dev/web": record("ns/me")}, ("pleme-dev/web",), (), ("c2/api",)),
        ({"pleme-dev/web": record("ns/me", pid="other.9"), "c2/api": record("ns/b")},
         ("pleme-dev/web",), (("c2/api", "ns/b"),), ()),
        ({"elsewhere/web": record("ns/me")}, (), (), ("c2/api", "pleme-dev/web")),
    ],
    ids=[
        "no records: every key unsettled",
        "one key held, one not arbitrated yet",
        "the pid is not compared; a key held by another is lost to it",
        "a record under a key it does not bid for is not its own",
    ],
)
def test_standing(claims: dict[str, ClaimRecord], held: tuple[str, ...], lost: tuple[tuple[str, str], ...],
                  unsettled: tuple[str, ...]) -> None:
    assert standing(claims, bidder(), "pleme-dev") == ClaimStanding(held, lost, unsettled)
    assert held_keys(claims, bidder(), "pleme-dev") == frozenset(held)


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [(None, []), ("ns", ["other/b"]), ("other", ["ns/a"])],
    ids=["a cluster-wide reconciler has no foreign holder", "holders outside the watched namespace are foreign",
         "each holder once, sorted"],
)
def test_foreign_holders(namespace: str | None, expected: list[str]) -> None:
    claims = {"k1": record("ns/a"), "k2": record("other/b"), "k3": record("ns/a")}
    assert foreign_holders(claims, namespace) == expected


# ── a holder leaving gives its records up (docs/behaviour.md#handing-a-stable-name-over) ──

MAP = {"c/x": record("ns/a"), "c/y": record("ns/b"), "c/z": record("ns/a", pid="a.9")}


@pytest.mark.parametrize(
    ("ref", "phase", "kept"),
    [
        ("ns/a", P.RUNNING, ["c/x", "c/y", "c/z"]),
        ("ns/a", P.ATTESTED, ["c/x", "c/y", "c/z"]),
        ("ns/a", P.EXITING, ["c/y"]),
        ("ns/a", P.RECONVERGING, ["c/y"]),
        ("ns/a", P.REAPED, ["c/y"]),
        ("ns/c", P.ZOMBIE, ["c/x", "c/y", "c/z"]),
    ],
    ids=[
        "Running keeps every record",
        "Attested keeps every record",
        "Exiting gives up every record naming it, whatever the pid",
        "Reconverging is not eligible either",
        "Reaped gives them up",
        "a Process no record names changes nothing",
    ],
)
def test_claims_after(ref: str, phase: P, kept: list[str]) -> None:
    assert sorted(claims_after(MAP, ref, phase)) == kept


def test_holder_keys_name_every_record_of_the_ref_sorted() -> None:
    assert holder_keys(MAP, "ns/a") == ("c/x", "c/z")
    assert holder_keys(MAP, "ns/none") == ()


def test_in_phase_changes_only_the_phase() -> None:
    p = routed("a", [{"app": "x"}], status={"phase": "Running", "pid": "a.1"})
    leaving = in_phase(p, P.EXITING)
    assert leaving.phase is P.EXITING
    assert p.phase is P.RUNNING
    assert leaving.spec == p.spec
    assert leaving.metadata == p.metadata
