"""Runs the ``Cel`` conditions of a pass out of process, bounded, with results reused for equal inputs.

— docs/behaviour.md#cel-conditions. The pure parts (compiling, the variables, the worker-side limits)
are in :mod:`reconciler.cel`; this is the executor the controller calls before ``decide``, so the
decision reads finished results from ``Observed.cel``.

Each evaluation runs in a worker process (``anyio.to_process``, one per event loop: evaluations queue
behind each other) under :data:`~reconciler.cel.MAX_CPU_SECONDS` of CPU time and
:data:`~reconciler.cel.MAX_MEMORY_BYTES` of memory (:func:`reconciler.cel.run_bounded`). A worker ended
by them gives :func:`reconciler.cel.cost_exceeded`; the next evaluation starts a fresh worker. A worker
that gives no answer within :data:`WALL_SECONDS` (its start included) is killed and the evaluation is
an error for this pass only.

An expression that exceeded its cost is not run again for :data:`OVERRUN_BACKOFF_SECONDS`, whatever its
inputs: each overrun costs a worker (its CPU time and a fresh start), and an expression that reads ``now``
has new inputs on every pass.

Results are cached by :func:`reconciler.cel.inputs_digest` — the expression and the exact JSON of the
variables it reads — so a hit is provably the same evaluation. ``metadata.generation`` alone would not
do: the Process's status, its children and ``now`` change without a new generation.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.to_process
from anyio.lowlevel import RunVar

from reconciler import cel
from shared.domain.api.boundary import Condition, ConditionKind

__all__ = ["CACHE_SIZE", "OVERRUN_BACKOFF_SECONDS", "WALL_SECONDS", "CelRunner", "CelStats", "expressions"]

WALL_SECONDS: Final = 30.0
"""Wall-clock bound on one evaluation, the worker's start included (a start may take seconds on a busy host)."""

OVERRUN_BACKOFF_SECONDS: Final = 300.0
"""How long an expression that exceeded its cost gives that result without being run again."""

CACHE_SIZE: Final = 4096
"""Results kept (least recently used dropped first)."""

_limiter: RunVar[anyio.CapacityLimiter] = RunVar("cel_worker_limiter")


def _worker_limiter() -> anyio.CapacityLimiter:
    """One CEL worker per event loop."""
    try:
        return _limiter.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _limiter.set(limiter)
        return limiter


def expressions(conditions: Sequence[Condition]) -> list[str]:
    """The expressions of the ``Cel`` conditions among ``conditions`` that compile, deduplicated in order
    (one that does not compile is reported by the pure evaluation, which needs no worker)."""
    out: list[str] = []
    for c in conditions:
        if c.kind is not ConditionKind.CEL or not isinstance(c.params, Mapping):
            continue
        source = c.params.get("expression")
        if isinstance(source, str) and cel.compile_problem(source) is None:
            out.append(source)
    return list(dict.fromkeys(out))


@dataclass
class CelStats:
    """Counters: evaluations sent to a worker, results reused from the cache, workers ended by their limits,
    evaluations not run because the expression exceeded its cost recently."""

    evaluations: int = 0
    hits: int = 0
    exceeded: int = 0
    held_back: int = 0


class CelRunner:
    """Evaluates expressions in a bounded worker process and caches the results.

    Args:
        cpu_seconds: CPU time per evaluation (default :data:`~reconciler.cel.MAX_CPU_SECONDS`).
        memory_bytes: memory per worker beyond its size at start (default :data:`~reconciler.cel.MAX_MEMORY_BYTES`).
        wall_seconds: wall-clock bound per evaluation, worker start included.
        cache_size: results kept.
        overrun_backoff: seconds an expression that exceeded its cost is not run again.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, *, cpu_seconds: float = cel.MAX_CPU_SECONDS, memory_bytes: int = cel.MAX_MEMORY_BYTES,
                 wall_seconds: float = WALL_SECONDS, cache_size: int = CACHE_SIZE,
                 overrun_backoff: float = OVERRUN_BACKOFF_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.wall_seconds = wall_seconds
        self.cache_size = cache_size
        self.overrun_backoff = overrun_backoff
        self.clock = clock
        self.stats = CelStats()
        self._cache: OrderedDict[bytes, cel.CelResult] = OrderedDict()
        self._overruns: dict[str, float] = {}
        """Expression → when it last exceeded its cost."""

    async def evaluate_all(self, sources: Sequence[str], variables: Mapping[str, Any]) -> dict[str, cel.CelResult]:
        """Each source's result over ``variables`` (one after the other)."""
        return {source: await self.evaluate(source, variables) for source in sources}

    async def evaluate(self, source: str, variables: Mapping[str, Any]) -> cel.CelResult:
        """``source`` over ``variables``: from the cache when the inputs it reads are unchanged, else from a
        worker. Never raises (cancellation aside)."""
        try:
            key = cel.inputs_digest(source, variables)
        except cel.CelError as err:
            return cel.CelResult(None, f"CEL expression does not compile: {err}")
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.stats.hits += 1
            return cached
        overrun = self._overruns.get(source)
        if overrun is not None and self.clock() - overrun < self.overrun_backoff:
            self.stats.held_back += 1
            return cel.cost_exceeded(self.cpu_seconds, self.memory_bytes)
        self._overruns.pop(source, None)
        self.stats.evaluations += 1
        result: cel.CelResult | None = None
        with anyio.move_on_after(self.wall_seconds):
            try:
                result = await anyio.to_process.run_sync(
                    cel.run_bounded, source, dict(variables), self.cpu_seconds, self.memory_bytes,
                    cancellable=True, limiter=_worker_limiter())
            except anyio.BrokenWorkerProcess:
                self.stats.exceeded += 1
                self._overruns[source] = self.clock()
                result = cel.cost_exceeded(self.cpu_seconds, self.memory_bytes)
        if result is None:  # no answer in time: not a property of the inputs, so not cached
            return cel.CelResult(None, f"CEL evaluation error: no answer within {self.wall_seconds:g} s")
        self._cache[key] = result
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return result
