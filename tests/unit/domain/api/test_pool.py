"""Pool selector matching, specificity and state predicates.

— docs/behaviour.md#allocation-routing, docs/behaviour.md#member-states.
"""

from __future__ import annotations

import pytest

from shared.domain.api.allocation import AllocationPhase, Requestor
from shared.domain.api.pool import (
    MatchKey,
    MemberState,
    PoolPhase,
    PoolSelector,
    ReplacementPolicy,
    ReturnPolicy,
    glob_match,
)


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("", "anything", True),
        ("*", "", True),
        ("pleme-io/*", "pleme-io/demo", True),
        ("pleme-io/*", "other/demo", False),
        ("main", "main", True),
        ("main", "main2", False),
        ("a*b", "a*b", True),
        ("a*b", "axb", False),
        ("feat**", "feat*x", True),
        ("feat**", "featx", False),
    ],
    ids=[
        "an empty pattern matches anything",
        "a lone star matches the empty string",
        "a trailing star is a prefix match",
        "a prefix match refuses another prefix",
        "a plain pattern matches itself",
        "a plain pattern is not a prefix match",
        "an inner star is an ordinary character",
        "an inner star does not glob",
        "only one trailing star is removed",
        "the second star stays literal",
    ],
)
def test_glob_rules(pattern: str, value: str, matches: bool) -> None:
    assert glob_match(pattern, value) is matches


KEY = MatchKey.of(Requestor(kind="github-pr", repo="pleme-io/demo", branch="main", pr_labels=["preview", "ci"]))


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (PoolSelector(), True),
        (PoolSelector(repos=["pleme-io/*"], branches=["main"]), True),
        (PoolSelector(pr_labels=["preview", "ci"]), True),
        (PoolSelector(pr_labels=["preview", "Preview"]), False),
        (PoolSelector(kinds=["manual"]), False),
        (PoolSelector(repos=["other/*"]), False),
    ],
    ids=[
        "an empty selector matches every requestor",
        "repo and branch patterns match",
        "every required label is present",
        "labels are case-sensitive and all required",
        "a different kind does not match",
        "a different repo does not match",
    ],
)
def test_selector_matching(selector: PoolSelector, matches: bool) -> None:
    assert selector.matches(KEY) is matches


def test_absent_repo_and_branch_match_as_empty_strings() -> None:
    assert MatchKey.of(Requestor(kind="manual")) == MatchKey("", "", (), "manual")


def test_specificity_weights() -> None:
    assert PoolSelector().specificity == 0
    assert PoolSelector(repos=["a"], branches=["b"], pr_labels=["x", "y"], kinds=["k"]).specificity == 8 + 4 + 4 + 1


def test_member_state_predicates() -> None:
    assert [s.value for s in MemberState if s.counts_toward_supply] == ["Spawning", "Free"]
    assert [s.value for s in MemberState if s.is_failed] == ["Failed"]


def test_pool_and_policy_predicates() -> None:
    assert [p.value for p in PoolPhase if p.is_steady] == ["Steady"]
    assert [p.value for p in PoolPhase if p.is_terminal] == ["Draining"]
    assert [(r.keeps_process, r.runs_reset_job) for r in ReturnPolicy] == [(False, False), (True, True), (True, False)]
    assert [(r.replaces_failed, r.pauses_on_failure) for r in ReplacementPolicy] == [
        (True, False),
        (False, False),
        (False, True),
    ]


def test_allocation_phase_predicates_never_overlap() -> None:
    assert {p.value for p in AllocationPhase if p.is_terminal} == {"Released", "Failed"}
    assert {p.value for p in AllocationPhase if p.needs_pool_routing} == {"Pending", "Queued", "NoMatchingPool"}
