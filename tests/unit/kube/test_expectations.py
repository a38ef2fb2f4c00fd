"""shared.kube.expectations: a write is waited for until the cache shows its resourceVersion, at most
EXPECTATION_SECONDS; non-integer versions never hold a reconcile back."""

from __future__ import annotations

import pytest

from shared.kube.expectations import EXPECTATION_SECONDS, ChildWriteExpectations, WriteExpectations


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


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
    own = WriteExpectations(Clock())
    own.wrote("ns/p", written)
    assert own.lagging("ns/p", cached) is lagging


def test_an_expectation_ends_once_met_or_after_the_window() -> None:
    clock = Clock()
    own = WriteExpectations(clock)
    own.wrote("ns/a", "10")
    own.wrote("ns/b", "10")
    assert own.lagging("ns/a", "10") is False
    assert len(own) == 1  # a's met expectation is dropped, b's stays
    clock.now += EXPECTATION_SECONDS - 0.1
    assert own.lagging("ns/b", "9") is True
    clock.now += 0.2
    assert own.lagging("ns/b", "9") is False  # waited long enough: a lost event must not stall it
    assert len(own) == 0
    own.wrote("ns/c", "5")
    own.forget("ns/c")
    assert own.lagging("ns/c", "4") is False


# ── ChildWriteExpectations: how far each child informer has come, not the cached child ───────────────


def test_a_child_write_holds_its_owner_back_until_that_resources_cache_has_come_as_far() -> None:
    seen = {"ingresses": "9", "dnsendpoints": "50"}
    own: ChildWriteExpectations[str] = ChildWriteExpectations(Clock())
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
    own: ChildWriteExpectations[str] = ChildWriteExpectations(Clock())
    own.wrote("ns/p", "ingresses", written)
    assert own.lagging("ns/p", lambda _: seen) is lagging


def test_a_child_expectation_keeps_the_newest_write_and_ends_after_the_window() -> None:
    clock = Clock()
    own: ChildWriteExpectations[str] = ChildWriteExpectations(clock)
    own.wrote("ns/p", "ingresses", "20")
    own.wrote("ns/p", "ingresses", "15")  # an unchanged apply answers with an older version
    assert own.lagging("ns/p", lambda _: "19") is True
    clock.now += EXPECTATION_SECONDS + 0.1
    assert own.lagging("ns/p", lambda _: "19") is False  # a lost event must not stall the owner
    own.wrote("ns/gone", "ingresses", "30")
    clock.now += EXPECTATION_SECONDS + 0.1
    own.wrote("ns/other", "ingresses", "31")  # an owner never looked at again is swept by the next write
    assert len(own) == 1
    own.forget("ns/other")
    assert len(own) == 0
