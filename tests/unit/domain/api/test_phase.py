"""Process phases: the 18 legal edges, predicates and rank.

— docs/behaviour.md#phases, docs/behaviour.md#transition-table.
"""

from __future__ import annotations

import itertools

import pytest

from shared.domain.api.phase import MustReachPhase, ProcessPhase, phase_reached

P = ProcessPhase

ALLOWED_EDGES = {
    ("Pending", "Forking"),
    ("Forking", "Execing"),
    ("Execing", "Running"),
    ("Execing", "Failed"),
    ("Running", "Attested"),
    ("Running", "Exiting"),
    ("Running", "Failed"),
    ("Running", "Reconverging"),
    ("Attested", "Reconverging"),
    ("Attested", "Releasing"),
    ("Attested", "Exiting"),
    ("Reconverging", "Execing"),
    ("Releasing", "Exiting"),
    ("Releasing", "Zombie"),
    ("Exiting", "Zombie"),
    ("Failed", "Releasing"),
    ("Failed", "Zombie"),
    ("Zombie", "Reaped"),
}

ALL_SPELLINGS = [
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
]


def test_the_table_has_exactly_eighteen_edges() -> None:
    assert len(ALLOWED_EDGES) == 18
    assert sum(len(p.next_phases()) for p in P) == 18


def test_phases_are_listed_in_the_spec_all_order() -> None:
    assert [p.value for p in P.all()] == ALL_SPELLINGS


@pytest.mark.parametrize(
    ("source", "target"),
    sorted(itertools.product(ALL_SPELLINGS, repeat=2)),
    ids=lambda v: v,
)
def test_a_transition_is_legal_exactly_when_the_spec_lists_it(source: str, target: str) -> None:
    assert P(source).can_transition_to(P(target)) is ((source, target) in ALLOWED_EDGES)


def test_only_attested_and_failed_lead_into_releasing() -> None:
    assert {p for p in P if p.can_transition_to(P.RELEASING)} == {P.ATTESTED, P.FAILED}


def test_reaped_leads_nowhere() -> None:
    assert P.REAPED.next_phases() == frozenset()


PREDICATES = [
    ("is_terminal", {"Reaped"}),
    ("is_running", {"Running", "Attested"}),
    ("is_alive", set(ALL_SPELLINGS) - {"Zombie", "Reaped", "Failed"}),
    ("is_releasing", {"Releasing"}),
    ("is_terminal_reached", {"Attested", "Failed"}),
]


@pytest.mark.parametrize(
    ("predicate", "true_for"),
    PREDICATES,
    ids=[f"{name} holds for exactly {sorted(true_for)}" for name, true_for in PREDICATES],
)
def test_predicate_holds_for_exactly_the_listed_phases(predicate: str, true_for: set[str]) -> None:
    assert {p.value for p in P if getattr(p, predicate)} == true_for


RANKS = {
    "Pending": 0,
    "Forking": 1,
    "Execing": 2,
    "Running": 3,
    "Reconverging": 3,
    "Attested": 4,
    "Releasing": 0,
    "Exiting": 0,
    "Failed": 0,
    "Zombie": 0,
    "Reaped": 0,
}


@pytest.mark.parametrize(("phase", "rank"), RANKS.items(), ids=[f"{p} ranks {r}" for p, r in RANKS.items()])
def test_rank_follows_the_spec(phase: str, rank: int) -> None:
    assert P(phase).rank == rank


@pytest.mark.parametrize(
    ("actual", "required", "reached"),
    [
        (P.ATTESTED, MustReachPhase.ATTESTED, True),
        (P.RUNNING, MustReachPhase.ATTESTED, False),
        (P.RECONVERGING, MustReachPhase.RUNNING, True),
        (P.EXITING, MustReachPhase.RUNNING, False),
        (None, MustReachPhase.RUNNING, False),
    ],
    ids=[
        "attested satisfies must-reach attested",
        "running does not satisfy must-reach attested",
        "reconverging satisfies must-reach running",
        "exiting ranks zero and satisfies nothing",
        "a missing status counts as pending",
    ],
)
def test_dependency_is_met_by_rank(actual: P | None, required: MustReachPhase, reached: bool) -> None:
    assert phase_reached(actual, required) is reached


def test_must_reach_phase_maps_to_the_phase_of_the_same_spelling() -> None:
    assert [m.phase for m in MustReachPhase] == [P.RUNNING, P.ATTESTED]
