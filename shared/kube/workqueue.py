"""A per-key work queue for reconcilers: dedup, dirty-while-processing, rate-limited requeues, graceful drain.

Semantics follow client-go's ``util/workqueue`` (docs/runtime.md#work-queue):

- a key is queued at most once; adding a queued key again is a no-op (dedup);
- a key handed out by :meth:`WorkQueue.get` is *processing* until :meth:`WorkQueue.done`; adding it meanwhile
  marks it *dirty* and it is handed out again only after ``done`` — two workers never hold one key;
- :meth:`WorkQueue.add_after` parks a key until a deadline (the earliest deadline wins);
- :meth:`WorkQueue.add_rate_limited` parks it for the rate limiter's delay: max(per-key 5 ms·2^n capped at
  1000 s, a 10 QPS / burst 100 token bucket), reset per key by :meth:`WorkQueue.forget`;
- :meth:`WorkQueue.shutdown` stops hand-outs at once and (with ``drain=True``) waits for in-flight keys;
- ``add(key, urgent=True)`` queues ``key`` ahead of every key added without it (FIFO among the urgent
  ones), and moves it there when it is queued already; a key added urgent while processing is queued
  urgent by ``done``. A two-level form of controller-runtime's priority queue: a controller uses it for
  the events that let a waiting object finish, so they do not queue behind a burst of new objects
  (docs/runtime.md#work-queue).

The queue belongs to one event loop (anyio, asyncio backend) and is not thread-safe. It needs no background
task: parked keys move to the ready queue when a waiting ``get`` reaches their deadline, or whenever the
queue is touched after it. Time comes from an injected :class:`Clock` so delays are testable without sleeping.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from typing import Final, Generic, Protocol, TypeVar

import anyio

from shared.kube.ratelimit import Backoff, TokenBucket

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "ItemExponentialBackoff",
    "MaxOfRateLimiter",
    "MonotonicClock",
    "QueueMetrics",
    "RateLimiter",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
]

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

#: Per-key backoff base and cap, seconds: client-go ``DefaultTypedControllerRateLimiter``.
DEFAULT_BACKOFF_BASE: Final = 0.005
DEFAULT_BACKOFF_CAP: Final = 1000.0
#: Overall token bucket: 10 QPS, burst 100 — same source.
DEFAULT_BUCKET_QPS: Final = 10.0
DEFAULT_BUCKET_BURST: Final = 100


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


# --- clock ------------------------------------------------------------------------------------------------


class Clock(Protocol):
    """Monotonic time for the queue and its rate limiters."""

    def now(self) -> float:
        """Current monotonic time, seconds."""
        ...

    async def wait(self, event: anyio.Event, deadline: float) -> None:
        """Return once ``event`` is set or ``now() >= deadline``, whichever comes first (may return early)."""
        ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` (the asyncio loop's own time base)."""

    def now(self) -> float:
        return time.monotonic()

    async def wait(self, event: anyio.Event, deadline: float) -> None:
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            await event.wait()


# --- rate limiters ----------------------------------------------------------------------------------------


class RateLimiter(Protocol[K_contra]):
    """Decides how long a failing key waits before it is retried."""

    def when(self, key: K_contra) -> float:
        """Delay in seconds for the next retry of ``key``; records one more requeue."""
        ...

    def forget(self, key: K_contra) -> None:
        """Stop tracking ``key`` (call after it succeeded)."""
        ...

    def num_requeues(self, key: K_contra) -> int:
        """Requeues recorded for ``key`` since it was last forgotten."""
        ...


class ItemExponentialBackoff(Generic[K]):
    """Per-key exponential backoff: ``base · 2^n`` seconds for the n-th requeue (n from 0), capped at ``cap``.

    Defaults 5 ms → 1000 s: client-go ``DefaultTypedControllerRateLimiter`` (docs/runtime.md, "Work queue").
    Raises ValueError for a negative base or a cap below the base.
    """

    def __init__(self, base: float = DEFAULT_BACKOFF_BASE, cap: float = DEFAULT_BACKOFF_CAP) -> None:
        if base < 0 or cap < base:
            raise ValueError(f"need 0 <= base <= cap, got base={base} cap={cap}")
        self._backoff = Backoff(initial=base, factor=2.0, cap=cap)
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        return self._backoff.delay(n)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter(Generic[K]):
    """Overall rate limit shared by all keys: a :class:`~shared.kube.ratelimit.TokenBucket` of ``qps`` tokens
    per second, at most ``burst`` saved up (client-go ``BucketRateLimiter``).

    Each :meth:`when` reserves one token and returns how long to wait until it is available (0 while the
    bucket holds tokens). Starts full. Defaults 10 QPS / burst 100: client-go
    ``DefaultTypedControllerRateLimiter``. Raises ValueError for qps <= 0 or burst < 1.
    """

    def __init__(
        self, qps: float = DEFAULT_BUCKET_QPS, burst: int = DEFAULT_BUCKET_BURST, *, clock: Clock | None = None
    ) -> None:
        self._clock: Clock = clock or MonotonicClock()
        self._bucket = TokenBucket(qps, burst, self._clock.now())

    def when(self, key: K) -> float:
        return self._bucket.reserve(self._clock.now())

    def forget(self, key: K) -> None:
        return None

    def num_requeues(self, key: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """Combines limiters: the delay is the largest of theirs; requeues the largest count; forget forgets in all."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("need at least one rate limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        return max(limiter.when(key) for limiter in self._limiters)

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[K]:
    """max(per-key 5 ms·2^n capped at 1000 s, token bucket 10 QPS burst 100).

    client-go ``DefaultTypedControllerRateLimiter``.
    """
    return MaxOfRateLimiter(ItemExponentialBackoff(), BucketRateLimiter(clock=clock))


# --- metrics hook -----------------------------------------------------------------------------------------


class QueueMetrics(Protocol):
    """What the queue reports; :class:`shared.kube.metrics.WorkQueueMetrics` implements it for Prometheus."""

    def added(self) -> None:
        """A key entered the queue (not counted when deduplicated)."""
        ...

    def queued_for(self, seconds: float, exemplar: Mapping[str, str] | None = None) -> None:
        """Time a key waited between its add and its hand-out; ``exemplar``: the labels (trace and span id) of
        the reconcile that took it, kept as the bucket's OpenMetrics exemplar."""
        ...

    def worked_for(self, seconds: float, exemplar: Mapping[str, str] | None = None) -> None:
        """Time between a key's hand-out and its ``done``; ``exemplar`` as for :meth:`queued_for`."""
        ...

    def retried(self) -> None:
        """A key was added with a non-zero delay (add_after, add_rate_limited)."""
        ...

    def track(self, probe: Callable[[], tuple[int, float, float]]) -> None:
        """Register ``probe() -> (depth, unfinished, longest)``, read at scrape time: keys ready now, and the sum
        and the max of the in-flight keys' processing ages in seconds (gauges cost nothing on the hot path)."""
        ...


# --- the queue --------------------------------------------------------------------------------------------


class WorkQueue(Generic[K]):
    """A deduplicating FIFO of keys with dirty-while-processing, delayed adds and rate-limited requeues.

    ``clock`` defaults to :class:`MonotonicClock`; ``rate_limiter`` to :func:`default_controller_rate_limiter`
    on the same clock; ``metrics`` (optional) receives the ``workqueue_*`` updates.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[K] | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self._clock: Clock = clock or MonotonicClock()
        self._limiter: RateLimiter[K] = rate_limiter or default_controller_rate_limiter(self._clock)
        self._metrics = metrics
        self._ready: deque[K] = deque()
        self._urgent: deque[K] = deque()
        self._urgent_keys: set[K] = set()  # keys queued (or to be queued by done) in _urgent
        self._urgent_waiting: set[K] = set()  # parked keys to queue urgent at their deadline
        self._dirty: set[K] = set()
        self._processing: dict[K, float] = {}  # key -> hand-out time
        self._added_at: dict[K, float] = {}  # key -> add time, for the queue-duration metric
        self.waits: dict[K, float] | None = None
        """When a dict (tracing on), each hand-out records here the seconds its key waited queued, and the
        queue-duration observation waits for :meth:`take_wait`, which gives it the taker's exemplar."""
        self._waiting: dict[K, tuple[float, int]] = {}  # key -> (ready_at, seq) of its live heap entry
        self._heap: list[tuple[float, int, K]] = []
        self._seq = 0
        self._getters: deque[anyio.Event] = deque()
        self._shutting_down = False
        self._drained = anyio.Event()
        if metrics is not None:
            metrics.track(self._gauges)

    # -- adding

    def add(self, key: K, *, urgent: bool = False) -> None:
        """Queue ``key`` unless it is already queued; if it is processing, mark it dirty. Ignored after shutdown.

        ``urgent``: ahead of the keys queued without it (a queued key moves up; see the module docstring).
        """
        if self._shutting_down:
            return
        self._promote_due()
        self._add(key, urgent=urgent)

    def add_after(self, key: K, seconds: float, *, urgent: bool = False) -> None:
        """Queue ``key`` after ``seconds`` (<= 0: now). If it already waits, the earlier deadline wins.

        ``urgent``: queued as :meth:`add` with ``urgent`` does when the deadline comes (also when an
        earlier deadline was already set). Ignored after shutdown.
        """
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key, urgent=urgent)
            return
        if self._metrics is not None:
            self._metrics.retried()
        if urgent:
            self._urgent_waiting.add(key)
        ready_at = self._clock.now() + seconds
        current = self._waiting.get(key)
        if current is not None and current[0] <= ready_at:
            return
        earliest = self._heap[0][0] if self._heap else math.inf
        self._seq += 1
        self._waiting[key] = (ready_at, self._seq)
        heapq.heappush(self._heap, (ready_at, self._seq, key))
        if ready_at < earliest:  # waiting getters re-arm their timers on the new earliest deadline
            self._wake(len(self._getters))

    def add_rate_limited(self, key: K) -> None:
        """Queue ``key`` after the rate limiter's delay (and count a requeue for it)."""
        if self._shutting_down:
            return
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (call after a successful reconcile). Does not remove it from the queue."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Rate-limited requeues of ``key`` since it was last forgotten."""
        return self._limiter.num_requeues(key)

    # -- taking

    async def get(self) -> K:
        """Wait for a ready key and mark it processing; the caller must call :meth:`done` with it.

        Raises :class:`ShutDown` once :meth:`shutdown` was called (keys still queued are not handed out).
        Cancel-safe: a cancelled ``get`` takes nothing. Returns without yielding to the loop when a key is
        ready, like ``asyncio.Queue.get``; the handler's own awaits are the workers' scheduling points.
        """
        while True:
            if self._shutting_down:
                raise ShutDown
            self._promote_due()
            if self._urgent or self._ready:
                if self._urgent:
                    key = self._urgent.popleft()
                    self._urgent_keys.discard(key)
                else:
                    key = self._ready.popleft()
                self._hand_out(key)
                if self._urgent or self._ready:
                    self._wake(1)
                return key
            woken = anyio.Event()
            self._getters.append(woken)
            try:
                if self._heap:
                    await self._clock.wait(woken, self._heap[0][0])
                else:
                    await woken.wait()
            except BaseException:  # cancelled: pass on a wake-up we will not consume
                self._discard_getter(woken)
                if woken.is_set() and self._ready:
                    self._wake(1)
                raise
            self._discard_getter(woken)

    def take_wait(self, key: K, exemplar: Mapping[str, str] | None = None) -> float:
        """With :attr:`waits` on: the seconds ``key`` waited before its hand-out, observed now as the queue
        duration with ``exemplar`` (the trace of the reconcile that took it); 0.0 when none was recorded."""
        if self.waits is None or key not in self.waits:
            return 0.0
        seconds = self.waits.pop(key)
        if self._metrics is not None:
            self._metrics.queued_for(seconds, exemplar)
        return seconds

    def done(self, key: K, *, exemplar: Mapping[str, str] | None = None) -> None:
        """Finish processing ``key``; if it was re-added meanwhile, queue it again. ``exemplar``: kept with the
        work-duration observation (the trace of the reconcile that did the work).

        Raises ValueError if ``key`` is not processing (a double ``done`` is a bug in the caller).
        """
        try:
            started = self._processing.pop(key)
        except KeyError:
            raise ValueError(f"done() for a key that is not processing: {key!r}") from None
        self.take_wait(key)  # a wait nobody took is still observed, without an exemplar (a no-op with waits off)
        if self._metrics is not None:
            self._metrics.worked_for(self._clock.now() - started, exemplar)
        if self._shutting_down:
            self._dirty.discard(key)
            if not self._processing:
                self._drained.set()
            return
        if key in self._dirty:
            (self._urgent if key in self._urgent_keys else self._ready).append(key)
            self._wake(1)

    # -- lifecycle

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop handing out keys: pending and future ``get`` calls raise :class:`ShutDown`; adds are ignored.

        Queued and waiting keys are dropped (reconcilers are level-triggered: the next start lists again).
        With ``drain`` this waits until every in-flight key is ``done``; bound it with ``anyio.fail_after``.
        Idempotent.
        """
        if not self._shutting_down:
            self._shutting_down = True
            self._ready.clear()
            self._urgent.clear()
            self._urgent_keys.clear()
            self._urgent_waiting.clear()
            self._dirty.clear()
            self._waiting.clear()
            self._heap.clear()
            self._added_at.clear()
            self._wake(len(self._getters))
            if not self._processing:
                self._drained.set()
        if drain:
            await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        """True once :meth:`shutdown` was called."""
        return self._shutting_down

    def __len__(self) -> int:
        """Keys ready to be handed out now (not the waiting or processing ones)."""
        self._promote_due()
        return len(self._ready) + len(self._urgent)

    @property
    def waiting(self) -> int:
        """Keys parked by add_after / add_rate_limited until their deadline."""
        return len(self._waiting)

    @property
    def processing(self) -> int:
        """Keys handed out and not yet done."""
        return len(self._processing)

    # -- internals

    def _add(self, key: K, *, urgent: bool = False) -> None:
        if key in self._dirty:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                if key not in self._processing:  # queued: move it up (rare: the usual urgent key is not queued)
                    self._ready.remove(key)
                    self._urgent.append(key)
            return
        self._dirty.add(key)
        if self._metrics is not None:
            self._metrics.added()
        if self._metrics is not None or self.waits is not None:
            self._added_at.setdefault(key, self._clock.now())
        if urgent:
            self._urgent_keys.add(key)
        if key in self._processing:
            return
        (self._urgent if urgent else self._ready).append(key)
        self._wake(1)

    def _hand_out(self, key: K) -> None:
        self._dirty.discard(key)
        now = self._clock.now()
        self._processing[key] = now
        if self._metrics is not None or self.waits is not None:
            added = self._added_at.pop(key, now)
            if self.waits is not None:
                self.waits[key] = now - added  # observed by take_wait, with the taker's exemplar
            elif self._metrics is not None:
                self._metrics.queued_for(now - added)

    def _promote_due(self) -> None:
        heap = self._heap
        if not heap:
            return
        now = self._clock.now()
        while heap and heap[0][0] <= now:
            ready_at, seq, key = heapq.heappop(heap)
            if self._waiting.get(key) == (ready_at, seq):
                del self._waiting[key]
                self._add(key, urgent=key in self._urgent_waiting)
                self._urgent_waiting.discard(key)

    def _wake(self, n: int) -> None:
        getters = self._getters
        while n > 0 and getters:
            event = getters.popleft()
            if not event.is_set():
                event.set()
                n -= 1

    def _discard_getter(self, event: anyio.Event) -> None:
        with contextlib.suppress(ValueError):  # ValueError: already popped by _wake
            self._getters.remove(event)

    def _gauges(self) -> tuple[int, float, float]:
        # May run on a scrape thread: reads only (due keys still parked count once they are promoted).
        now = self._clock.now()
        ages = [now - started for started in tuple(self._processing.values())]
        return (len(self._ready) + len(self._urgent), sum(ages), max(ages, default=0.0))
