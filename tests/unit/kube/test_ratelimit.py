"""shared.kube.ratelimit: the one Backoff and the one TokenBucket, table-tested on explicit time."""

from __future__ import annotations

import math

import pytest

from shared.kube.ratelimit import Backoff, TokenBucket

# delay(n) = min(cap, initial·factor^n) · (1 + jitter·U): client-go wait.Backoff.Step, values computed by hand.
DELAY_ROWS = [
    pytest.param(Backoff(initial=0.8, factor=2.0, cap=30.0), 0, 0.0, 0.8, id="the first wait is the initial delay"),
    pytest.param(Backoff(initial=0.8, factor=2.0, cap=30.0), 3, 0.0, 6.4, id="each failure doubles the wait"),
    pytest.param(Backoff(initial=0.8, factor=2.0, cap=30.0), 6, 0.0, 30.0, id="the wait stops at the cap"),
    pytest.param(Backoff(initial=0.8, factor=2.0, cap=30.0, jitter=1.0), 6, 0.5, 45.0,
                 id="jitter stretches the capped wait, it is not capped again"),
    pytest.param(Backoff(initial=0.010, factor=1.0, jitter=0.1), 4, 1.0, 0.011,
                 id="a factor of one keeps the wait constant (client-go DefaultRetry)"),
    pytest.param(Backoff(initial=0.005, factor=2.0, cap=1000.0), 5000, 0.0, 1000.0,
                 id="an absurd attempt count does not overflow"),
]


@pytest.mark.parametrize(("backoff", "attempt", "rng", "expected"), DELAY_ROWS)
def test_backoff_delay(backoff: Backoff, attempt: int, rng: float, expected: float) -> None:
    assert backoff.delay(attempt, lambda: rng) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        pytest.param(Backoff(initial=0.010, factor=1.0, steps=5), [0.010] * 4, id="five steps wait four times"),
        pytest.param(Backoff(initial=0.010, factor=5.0, steps=4), [0.010, 0.050, 0.250], id="waits grow by the factor"),
        pytest.param(Backoff(initial=0.010, steps=1), [], id="one step never waits"),
    ],
)
def test_bounded_backoff_yields_one_wait_fewer_than_steps(backoff: Backoff, expected: list[float]) -> None:
    assert list(backoff.delays(lambda: 0.0)) == pytest.approx(expected)


def test_unbounded_backoff_keeps_yielding() -> None:
    waits = Backoff(initial=1.0, cap=4.0).delays(lambda: 0.0)
    assert [next(waits) for _ in range(5)] == [1.0, 2.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Backoff(initial=-1.0), id="a negative initial delay is rejected"),
        pytest.param(lambda: Backoff(initial=1.0, factor=0.5), id="a shrinking factor is rejected"),
        pytest.param(lambda: Backoff(initial=1.0, steps=0), id="zero steps are rejected"),
        pytest.param(lambda: TokenBucket(0.0, 1, 0.0), id="a bucket that never refills is rejected"),
        pytest.param(lambda: TokenBucket(1.0, 0, 0.0), id="a bucket without room is rejected"),
    ],
)
def test_invalid_settings_raise(build: object) -> None:
    with pytest.raises(ValueError, match="need"):
        build()  # type: ignore[operator]


def test_reserve_goes_into_debt_and_says_how_long_to_wait() -> None:
    bucket = TokenBucket(10.0, 2, now=0.0)
    assert [bucket.reserve(0.0) for _ in range(4)] == pytest.approx([0.0, 0.0, 0.1, 0.2])
    assert bucket.reserve(0.3) == pytest.approx(0.0), "0.3 s pays back the two borrowed tokens and one more"
    assert math.isclose(bucket.tokens, 0.0, abs_tol=1e-9)


def test_take_never_goes_into_debt() -> None:
    bucket = TokenBucket(1.0, 1, now=0.0)
    assert [bucket.take(0.0), bucket.take(0.5), bucket.take(1.0)] == [True, False, True]
