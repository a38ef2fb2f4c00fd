"""The ephemeral lifetime clock: teardown policy and TTL from ``metadata.creationTimestamp``.

The rules and reason texts: docs/behaviour.md#ttl and docs/behaviour.md#teardown-policy; durations
are humantime (docs/wire-format.md#durations, :mod:`shared.domain.duration`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.duration import DurationError, parse_duration

__all__ = ["evaluate", "requeue_with_ttl"]


def _ttl(text: str) -> timedelta | None:
    """The TTL, or None when it does not parse (silently ignored)."""
    try:
        return parse_duration(text)
    except DurationError:
        return None


def _ttl_state(process: Process, now: datetime) -> tuple[str, timedelta, timedelta] | None:
    """(ttl as written, ttl, elapsed) when the TTL can be evaluated, else None."""
    eph = process.spec.lifetime.resolved_ephemeral()
    created = process.metadata.creation_timestamp
    if eph is None or created is None:
        return None
    ttl = _ttl(eph.ttl)
    elapsed = now - created
    if ttl is None or elapsed < timedelta(0):
        return None
    return eph.ttl, ttl, elapsed


def evaluate(process: Process, phase: ProcessPhase, now: datetime) -> str | None:
    """The clock: the terminate reason text when it fires now, else None (Skip).

    Teardown policy first (``ephemeral lifetime: teardown_policy=<P> fired on <Phase>``), then the
    TTL from ``metadata.creationTimestamp`` outside the exit phases
    (``ephemeral lifetime: ttl=<ttl> expired (elapsed=<N>s)``).
    """
    eph = process.spec.lifetime.resolved_ephemeral()
    if eph is None:
        return None
    if eph.teardown_policy.should_teardown_on(phase):
        return f"ephemeral lifetime: teardown_policy={eph.teardown_policy.value} fired on {phase.value}"
    if phase in (ProcessPhase.EXITING, ProcessPhase.ZOMBIE, ProcessPhase.REAPED):
        return None
    state = _ttl_state(process, now)
    if state is None:
        return None
    written, ttl, elapsed = state
    if elapsed >= ttl:
        return f"ephemeral lifetime: ttl={written} expired (elapsed={int(elapsed.total_seconds())}s)"
    return None


def requeue_with_ttl(process: Process, now: datetime, default: float) -> float:
    """Seconds until the next check: ``max(min(default, ttl remaining), 1)``, or ``default``."""
    state = _ttl_state(process, now)
    if state is None:
        return default
    _, ttl, elapsed = state
    remaining = max((ttl - elapsed).total_seconds(), 0.0)
    return max(min(default, remaining), 1.0)
