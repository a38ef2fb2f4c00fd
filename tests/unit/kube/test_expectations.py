"""shared.kube.expectations: an expectation stands until met or until its window passes on the injected
clock; a write is waited for until the cache shows its resourceVersion, at most EXPECTATION_SECONDS;
non-integer versions never hold a reconcile back (docs/runtime.md#own-writes)."""

from __future__ import annotations

import pytest

from shared.kube.expectations import EXPECTATION_SECONDS, ChildWriteExpectations, Expectations, WriteExpectations
from tests.support.clock import FakeClock


@pytest.mark.parametrize(
    ("written", "cached", "lagging"),
    [
        ("10", "9", True),      # the cache is one version behind our write
        ("10", "10", False),    # it shows our write
        ("10", "11", False),    # it shows a later one
        ("10", None, False),    # nothing cached to compare
        ("10", "x", False),     # an opaque cached version: trust the cache
        ("abc", "9", False),    # an opaque written version is not remembered
        (None, "9", False),     # no write
        ("100", "99", True),    # compared as numbers, not text ("100" < "99" as text)
    ],
)
def test_lagging(written: str | None, cached: str | None, lagging: bool) -> None:
    own = WriteExpectations(FakeClock())
    own.wrote("ns/p", written)
    assert own.lagging("ns/p", cached) is lagging


def test_an_expectation_ends_once_met_or_after_the_window() -> None:
    clock = FakeClock()
    own = WriteExpectations(clock)
    own.wrote("ns/a", "10")
    own.wrote("ns/b", "10")
    assert own.lagging("ns/a", "10") is False
    assert len(own) == 1  # a's met expectation is dropped, b's stays
    clock.advance(EXPECTATION_SECONDS - 0.1)
    assert own.lagging("ns/b", "9") is True
    clock.advance(0.2)
    assert own.lagging("ns/b", "9") is False  # waited long enough: a lost event must not stall it
    assert len(own) == 0
    own.wrote("ns/c", "5")
    own.forget("ns/c")
    assert own.lagging("ns/c", "4") is False


def test_an_expectation_stands_for_its_window_on_the_injected_clock_and_no_longer() -> None:
    clock = FakeClock()
    jobs: Expectations[tuple[str, str], tuple[str, int]] = Expectations(30.0, clock)
    jobs.expect(("ns", "a-export-0"), ("u-a", 0))
    clock.advance(10.0)
    jobs.expect(("ns", "b-export-0"), ("u-b", 0))
    clock.advance(20.0)  # a's is exactly 30 s old: it still stands
    assert jobs.pending() == [(("ns", "a-export-0"), ("u-a", 0)), (("ns", "b-export-0"), ("u-b", 0))]
    clock.advance(0.1)  # a's window has passed, b's has 9.9 s left
    assert jobs.pending() == [(("ns", "b-export-0"), ("u-b", 0))]
    assert ("ns", "a-export-0") not in jobs
    assert jobs.get(("ns", "b-export-0")) == ("u-b", 0)
    clock.advance(9.9)
    assert ("ns", "b-export-0") in jobs
    clock.advance(0.1)
    assert jobs.get(("ns", "b-export-0")) is None
    assert len(jobs) == 0


def test_a_met_expectation_is_dropped_and_a_new_one_restarts_the_window() -> None:
    clock = FakeClock()
    admitted: Expectations[str, None] = Expectations(30.0, clock)
    admitted.expect("ns/a", None)
    admitted.met("ns/a")
    assert "ns/a" not in admitted
    admitted.met("ns/never")  # nothing expected: nothing to drop
    admitted.expect("ns/b", None)
    clock.advance(25.0)
    admitted.expect("ns/b", None)  # expected again: its window starts over
    clock.advance(25.0)
    assert "ns/b" in admitted


# ── ChildWriteExpectations: how far each child informer has come, not the cached child ───────────────


def test_a_child_write_holds_its_owner_back_until_that_resources_cache_has_come_as_far() -> None:
    seen = {"ingresses": "9", "dnsendpoints": "50"}
    own: ChildWriteExpectations[str] = ChildWriteExpectations(FakeClock())
    own.wrote("ns/p", "ingresses", "10")
    assert own.lagging("ns/p", seen.get) is True    # the Ingress cache is at 9: our apply (10) not shown yet
    assert own.lagging("ns/q", seen.get) is False   # another owner wrote nothing
    seen["ingresses"] = "12"                        # it has come past our write (a later delete included)
    assert own.lagging("ns/p", seen.get) is False
    assert len(own) == 0


@pytest.mark.parametrize(
    ("written", "seen", "lagging"),
    [
        ("100", "99", True),    # compared as numbers, not text
        ("10", "10", False),
        ("10", None, False),    # nothing caches that resource
        ("10", "", False),      # an informer relisting (no version): trust the cache
        ("abc", "9", False),    # an opaque written version is not remembered
    ],
)
def test_child_lagging(written: str, seen: str | None, lagging: bool) -> None:
    own: ChildWriteExpectations[str] = ChildWriteExpectations(FakeClock())
    own.wrote("ns/p", "ingresses", written)
    assert own.lagging("ns/p", lambda _: seen) is lagging


def test_a_child_expectation_keeps_the_newest_write_and_ends_after_the_window() -> None:
    clock = FakeClock()
    own: ChildWriteExpectations[str] = ChildWriteExpectations(clock)
    own.wrote("ns/p", "ingresses", "20")
    own.wrote("ns/p", "ingresses", "15")  # an unchanged apply answers with an older version
    assert own.lagging("ns/p", lambda _: "19") is True
    clock.advance(EXPECTATION_SECONDS + 0.1)
    assert own.lagging("ns/p", lambda _: "19") is False  # a lost event must not stall the owner
    own.wrote("ns/gone", "ingresses", "30")
    clock.advance(EXPECTATION_SECONDS + 0.1)
    own.wrote("ns/other", "ingresses", "31")  # an owner never looked at again is swept by the next write
    assert len(own) == 1
    own.forget("ns/other")
    assert len(own) == 0
