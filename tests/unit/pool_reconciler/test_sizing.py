"""pool_reconciler.sizing: the legacy and desired-count sizing tables. Rows marked CORRECTED differ
from the reference on purpose (docs/divergences.md)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from pool_reconciler.sizing import (
    ConvergenceAction,
    LedgerEntry,
    LegacyDecision,
    MemberSnapshot,
    desired_count_sizing,
    legacy_sizing,
)
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import MemberState, ReplacementPolicy
from tests.unit.pool_reconciler.builders import NOW, A, F, R, S, X, ago

RI, HF, PP = ReplacementPolicy.REPLACE_IMMEDIATE, ReplacementPolicy.HOLD_FAILED, ReplacementPolicy.PAUSE_POOL


# ── legacy sizing ────────────────────────────────────────────────────────────


def legacy(
    w: int,
    mn: int,
    mx: int,
    members: list[tuple[str, MemberState, float]],
    *,
    deleting: bool = False,
    free_ttl: str = "24h",
) -> LegacyDecision:
    ledger = [LedgerEntry(n, s, ago(age)) for n, s, age in members]
    return legacy_sizing(
        deleting=deleting, desired_size=w, min_size=mn, max_size=mx, free_ttl=free_ttl, ledger=ledger, now=NOW
    )


LEGACY_ROWS = [
    ("an empty pool below desired spawns up to desired", 3, 0, 0, [], {}, LegacyDecision("Spawn", 3)),
    (
        "a pool at desired with free members does nothing",
        2,
        0,
        0,
        [("a", F, 60), ("b", F, 60)],
        {},
        LegacyDecision("NoOp"),
    ),
    (
        "excess free members are reaped back to desired",
        1,
        0,
        0,
        [("a", F, 60), ("b", F, 60), ("c", F, 60)],
        {},
        LegacyDecision("ReapExcess", 2),
    ),
    ("allocated members do not count as supply", 1, 0, 0, [("a", A, 60)], {}, LegacyDecision("Spawn", 1)),
    ("spawning members count as supply", 2, 0, 0, [("a", S, 10), ("b", F, 60)], {}, LegacyDecision("NoOp")),
    (
        "failed members are replaced before any other action",
        3,
        0,
        0,
        [("a", F, 60), ("bad", X, 60), ("c", S, 10)],
        {},
        LegacyDecision("ReplaceMembers", names=("bad",)),
    ),
    (
        "a free member older than freeTtl is replaced",
        1,
        0,
        0,
        [("old", F, 60)],
        {"free_ttl": "10s"},
        LegacyDecision("ReplaceMembers", names=("old",)),
    ),
    ("minSize is enforced even when desired is smaller", 0, 2, 0, [("a", A, 60)], {}, LegacyDecision("Spawn", 1)),
    (
        "maxSize reaps above the ceiling",
        5,
        0,
        2,
        [("a", A, 60), ("b", F, 60), ("c", F, 60)],
        {},
        LegacyDecision("ReapExcess", 1),
    ),
    ("a deletion stamp drains the pool", 1, 0, 0, [("a", F, 60)], {"deleting": True}, LegacyDecision("Drain")),
    ("a returning member is not supply", 2, 0, 0, [("a", R, 60)], {}, LegacyDecision("Spawn", 2)),
    ("minSize counts active members", 3, 5, 0, [("a", F, 60), ("b", F, 60)], {}, LegacyDecision("Spawn", 3)),
    (
        "spawning beyond desired clamps the free budget to zero",
        2,
        0,
        0,
        [("a", F, 60), ("b", S, 1), ("c", S, 1), ("d", S, 1)],
        {},
        LegacyDecision("ReapExcess", 1),
    ),
    ("a zero freeTtl turns staleness off", 1, 0, 0, [("a", F, 864000)], {"free_ttl": "0s"}, LegacyDecision("NoOp")),
    (
        "an unparsable freeTtl turns staleness off",
        1,
        0,
        0,
        [("a", F, 864000)],
        {"free_ttl": "bogus"},
        LegacyDecision("NoOp"),
    ),
    (
        "CORRECTED spawning toward desiredSize stops at maxSize",
        5,
        0,
        2,
        [("a", F, 60), ("b", F, 60)],
        {},
        LegacyDecision("NoOp"),
    ),
    # issue 13: desiredSize 3, maxSize 3, its 3 members bound to 3 allocations: nothing to create
    ("CORRECTED a pool at its cap with every member bound spawns nothing", 3, 0, 3,
     [("a", A, 60), ("b", A, 60), ("c", A, 60)], {}, LegacyDecision("NoOp")),
    # issue 13: desiredSize 1, maxSize 2, 3 allocations: two bound members fill the cap
    ("CORRECTED two bound members fill a cap of 2", 1, 0, 2, [("a", A, 60), ("b", A, 60)], {},
     LegacyDecision("NoOp")),
    ("one bound member under a cap of 2 leaves room for one", 1, 0, 2, [("a", A, 60)], {},
     LegacyDecision("Spawn", 1)),
    ("spawns are capped by maxSize - active", 5, 0, 4, [("a", A, 60), ("b", S, 1)], {}, LegacyDecision("Spawn", 2)),
    ("CORRECTED minSize above maxSize spawns only up to maxSize", 0, 5, 2, [("a", A, 60)], {},
     LegacyDecision("Spawn", 1)),
    ("CORRECTED minSize above maxSize at the cap spawns nothing", 0, 5, 2, [("a", A, 60), ("b", A, 60)], {},
     LegacyDecision("NoOp")),
    (
        "a deleting pool drains even with failed members",
        1,
        0,
        0,
        [("a", X, 60)],
        {"deleting": True},
        LegacyDecision("Drain"),
    ),
]


@pytest.mark.parametrize(
    ("w", "mn", "mx", "members", "kw", "expected"), [r[1:] for r in LEGACY_ROWS], ids=[r[0] for r in LEGACY_ROWS]
)
def test_legacy_decision_table(
    w: int,
    mn: int,
    mx: int,
    members: list[tuple[str, MemberState, float]],
    kw: dict[str, Any],
    expected: LegacyDecision,
) -> None:
    assert legacy(w, mn, mx, members, **kw) == expected



# ── desired-count sizing ─────────────────────────────────────────────────────

P = ProcessPhase


def snaps(*rows: tuple[str, ProcessPhase, float]) -> list[MemberSnapshot]:
    return [MemberSnapshot(n, ph, ago(age)) for n, ph, age in rows]


CREATE = ConvergenceAction("CreateMember")


def sig(name: str) -> ConvergenceAction:
    return ConvergenceAction("SignalSigterm", name)


def reap(name: str) -> ConvergenceAction:
    return ConvergenceAction("ReapFailed", name)


PAUSE_1 = ConvergenceAction("Pause", reason="1 member(s) reached Failed/Zombie/Reaped; policy=PausePool")

DESIRED_ROWS = [
    ("an empty pool below desired creates up to desired", 3, RI, snaps(), [CREATE] * 3),
    ("a pool at desired does nothing", 2, RI, snaps(("a", P.RUNNING, 60), ("b", P.ATTESTED, 60)), []),
    (
        "excess healthy members are terminated oldest first",
        1,
        RI,
        snaps(("old", P.RUNNING, 1000), ("mid", P.RUNNING, 500), ("new", P.RUNNING, 60)),
        [sig("old"), sig("mid")],
    ),
    (
        "a failed member is reaped under ReplaceImmediate",
        2,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.RUNNING, 60), ("c", P.FAILED, 60)),
        [reap("c")],
    ),
    (
        "a failed member is held under HoldFailed",
        2,
        HF,
        snaps(("a", P.RUNNING, 60), ("b", P.RUNNING, 60), ("c", P.FAILED, 60)),
        [],
    ),
    (
        "a failed member pauses the pool under PausePool",
        5,
        PP,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [PAUSE_1],
    ),
    (
        "a failed member below desired is reaped and replaced",
        3,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [reap("b"), CREATE, CREATE],
    ),
    (
        "desired zero terminates every member",
        0,
        RI,
        snaps(("a", P.RUNNING, 60), ("b", P.ATTESTED, 30)),
        [sig("a"), sig("b")],
    ),
    (
        "CORRECTED: members still starting count toward desired, so nothing is created",
        3,
        RI,
        snaps(("a", P.PENDING, 5), ("b", P.FORKING, 5), ("c", P.EXECING, 5)),
        [],
    ),
    ("a releasing member is leaving, so one is created", 1, RI, snaps(("a", P.RELEASING, 60)), [CREATE]),
    ("one running member below desired three creates two", 3, RI, snaps(("a", P.RUNNING, 60)), [CREATE, CREATE]),
    (
        "HoldFailed creates a replacement alongside the failed member",
        2,
        HF,
        snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60)),
        [CREATE],
    ),
    ("a zombie is reaped then replaced under ReplaceImmediate", 1, RI, snaps(("z", P.ZOMBIE, 60)), [reap("z"), CREATE]),
    ("PausePool with no members creates normally", 2, PP, snaps(), [CREATE, CREATE]),
    (
        "CORRECTED: scale-down skips bound members and takes free ones first",
        1,
        RI,
        [
            MemberSnapshot("a", P.ATTESTED, ago(900), bound=True),
            MemberSnapshot("b", P.ATTESTED, ago(500)),
            MemberSnapshot("c", P.FORKING, ago(10)),
        ],
        [sig("b"), sig("c")],
    ),
    (
        "CORRECTED: a member being deleted is not counted",
        1,
        RI,
        [MemberSnapshot("a", P.ATTESTED, ago(900), leaving=True)],
        [CREATE],
    ),
]


@pytest.mark.parametrize(
    ("desired", "policy", "members", "expected"), [r[1:] for r in DESIRED_ROWS], ids=[r[0] for r in DESIRED_ROWS]
)
def test_desired_count_decision_table(
    desired: int, policy: ReplacementPolicy, members: list[MemberSnapshot], expected: list[ConvergenceAction]
) -> None:
    assert desired_count_sizing(desired, policy, members) == expected


CLASSIFY = [
    # phase, healthy, failed, starting
    (P.PENDING, False, False, True),
    (P.FORKING, False, False, True),
    (P.EXECING, False, False, True),
    (P.RUNNING, True, False, False),
    (P.ATTESTED, True, False, False),
    (P.RECONVERGING, False, False, True),
    (P.RELEASING, False, False, False),
    (P.EXITING, False, False, False),
    (P.FAILED, False, True, False),
    (P.ZOMBIE, False, True, False),
    (P.REAPED, False, True, False),
]


def test_the_classification_covers_every_phase() -> None:
    assert {row[0] for row in CLASSIFY} == set(ProcessPhase.all())


@pytest.mark.parametrize(
    ("phase", "healthy", "failed", "starting"), CLASSIFY, ids=[f"{c[0].value} is classified" for c in CLASSIFY]
)
def test_snapshot_predicates_align_with_live_phases(
    phase: ProcessPhase, healthy: bool, failed: bool, starting: bool
) -> None:
    s = MemberSnapshot("m", phase, NOW)
    assert (s.healthy, s.failed, s.starting) == (healthy, failed, starting)


def test_the_desired_decision_is_deterministic() -> None:
    members = snaps(("a", P.RUNNING, 60), ("b", P.FAILED, 60))
    expected = [reap("b"), CREATE]
    assert desired_count_sizing(2, RI, members) == expected
    assert desired_count_sizing(2, RI, members) == expected  # a second evaluation, same answer


def test_convergence_actions_round_trip_through_json() -> None:
    actions = [CREATE, sig("a"), PAUSE_1]
    assert msgspec.json.decode(msgspec.json.encode(actions), type=list[ConvergenceAction]) == actions


