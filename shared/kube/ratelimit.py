"""The runtime's two timing policies: exponential :class:`Backoff` and a :class:`TokenBucket`.

Every retry loop of the project uses :class:`Backoff` (client-go's ``wait.Backoff``: the informer's
watch-error backoff, the 409 retry of guarded writes, the work queue's per-key requeue delay, the
ProcessTable sequence bump), and every rate limit uses :class:`TokenBucket` (the work queue's
overall limit, the Event recorder's per-object spam filter). Both are pure: time and randomness are
arguments, so they are table-tested without sleeping (docs/runtime.md, "Backoff and rate limits").
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Backoff", "TokenBucket"]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: wait n (from 0) is ``min(cap, initial·factor^n) · (1 + jitter·U[0,1))``.

    Seconds throughout. ``steps`` bounds the attempts of a retry loop (None: unbounded); ``cap`` is
    applied before the jitter, as client-go's ``wait.Backoff.Step`` does.

    Raises:
        ValueError: ``initial`` < 0, ``factor`` < 1, ``cap`` < 0, ``jitter`` < 0 or ``steps`` < 1.
    """

    initial: float
    factor: float = 2.0
    cap: float = math.inf
    jitter: float = 0.0
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.initial < 0 or self.factor < 1 or self.cap < 0 or self.jitter < 0:
            raise ValueError(f"need initial >= 0, factor >= 1, cap >= 0, jitter >= 0: {self}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"need steps >= 1, got {self.steps}")

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        # past 1024 attempts factor**attempt would overflow, long after any sane cap
        base = self.cap if attempt >= 1024 else min(self.cap, self.initial * self.factor**attempt)
        return base * (1 + self.jitter * rng()) if self.jitter else base

    def delays(self, rng: Callable[[], float] = random.random) -> Iterator[float]:
        """The waits between the attempts of a ``steps``-bounded loop: ``steps − 1`` waits (endless if unbounded)."""
        attempt = 0
        while self.steps is None or attempt < self.steps - 1:
            yield self.delay(attempt, rng)
            attempt += 1


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` tokens per second, on an explicit clock (seconds, any origin).

    Starts full at ``now``. :meth:`take` spends a token only if one is there (a filter that drops);
    :meth:`reserve` always spends one and says how long until it is really available (a limiter that
    delays, golang.org/x/time/rate's ``Reserve``).

    Raises:
        ValueError: ``rate`` <= 0 or ``burst`` < 1.
    """

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"need rate > 0 and burst >= 1, got rate={rate} burst={burst}")
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def take(self, now: float) -> bool:
        """Spend one token if one is available at ``now``; True when spent."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def reserve(self, now: float) -> float:
        """Spend one token (going into debt if need be); seconds from ``now`` until it is covered (0 if at once)."""
        self._refill(now)
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate
