"""shared.kube.expectations: a write is waited for until the cache shows its resourceVersion, at most
EXPECTATION_SECONDS; non-integer versions never hold a reconcile back."""

from __future__ import annotations

import pytest

from shared.kube.expectations import EXPECTATION_SECONDS, WriteExpectations


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
