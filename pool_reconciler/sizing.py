"""How many members a pool should have: the two sizing tables, pure and with table tests of their own.

- legacy sizing (``spec.desired == 0``): :func:`legacy_sizing` over the member ledger
  (``desiredSize``/``minSize``/``maxSize``/``freeTtl``), first matching rule wins;
- desired-count sizing (``spec.desired > 0``): :func:`desired_count_sizing` over member snapshots,
  with the replacement policy for failed members.

Rules: docs/behaviour.md#legacy-sizing, docs/behaviour.md#desired-count-sizing,
docs/behaviour.md#scale-down; how desired-count sizing differs from the reference's:
docs/divergences.md#pool-desired-count-sizing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

import msgspec

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import MemberState, ReplacementPolicy
from shared.domain.duration import DurationError, parse_duration

__all__ = [
    "ConvergenceAction",
    "LedgerEntry",
    "LegacyDecision",
    "MemberSnapshot",
    "desired_count_sizing",
    "legacy_sizing",
]

_HEALTHY: Final = frozenset({ProcessPhase.RUNNING, ProcessPhase.ATTESTED})
_FAILED: Final = frozenset({ProcessPhase.FAILED, ProcessPhase.ZOMBIE, ProcessPhase.REAPED})
_STARTING: Final = frozenset(
    {ProcessPhase.PENDING, ProcessPhase.FORKING, ProcessPhase.EXECING, ProcessPhase.RECONVERGING}
)
"""Phases that lead (back) to Attested: counted toward ``desired``, so nothing overshoots while members start."""


# ── legacy sizing ────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class LedgerEntry:
    """One member as legacy sizing sees it: name, member state, when it entered that state."""

    name: str
    state: MemberState
    entered_state_at: datetime


@dataclass(frozen=True)
class LegacyDecision:
    """``NoOp``, ``Spawn(count)``, ``ReapExcess(count)``, ``ReplaceMembers(names)`` or ``Drain``."""

    kind: Literal["NoOp", "Spawn", "ReapExcess", "ReplaceMembers", "Drain"]
    count: int = 0
    names: tuple[str, ...] = ()


def _seconds_or_zero(text: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except DurationError:
        return 0.0


def legacy_sizing(
    *,
    deleting: bool,
    desired_size: int,
    min_size: int,
    max_size: int,
    free_ttl: str,
    ledger: Sequence[LedgerEntry],
    now: datetime,
) -> LegacyDecision:
    """The legacy table, first matching rule wins; counts never go negative.

    1. deleting → Drain; 2. Failed members → replace them; 3. Free members older than ``free_ttl``
    (strictly; a zero or unparsable TTL turns this off) → replace them; 4. active < ``min_size`` →
    spawn the difference; 5. active > ``max_size`` → reap the excess; 6. Free + Spawning <
    ``desired_size`` → spawn the difference; 7. Free > max(``desired_size`` − Spawning, 0) → reap the
    excess; 8. NoOp. Active = every member but the Failed ones.

    Unlike the reference, every spawn is capped by ``max_size − active`` when ``max_size > 0``: a pool
    never creates what rule 5 would delete on the next pass (docs/divergences.md#pool-max-size-cap).
    A spawn capped to nothing does not match, and the next rule is tried.
    """
    counts = Counter(e.state for e in ledger)
    free, spawning = counts[MemberState.FREE], counts[MemberState.SPAWNING]
    active = len(ledger) - counts[MemberState.FAILED]
    ttl = _seconds_or_zero(free_ttl)
    stale = tuple(
        e.name
        for e in ledger
        if ttl > 0 and e.state is MemberState.FREE and (now - e.entered_state_at).total_seconds() > ttl
    )
    failed = tuple(e.name for e in ledger if e.state is MemberState.FAILED)
    budget = max(desired_size - spawning, 0)
    room = max(max_size - active, 0) if max_size > 0 else None

    def capped(count: int) -> int:
        return count if room is None else min(count, room)

    if deleting:
        return LegacyDecision("Drain")
    if failed:
        return LegacyDecision("ReplaceMembers", names=failed)
    if stale:
        return LegacyDecision("ReplaceMembers", names=stale)
    if min_size > 0 and active < min_size and capped(min_size - active) > 0:
        return LegacyDecision("Spawn", count=capped(min_size - active))
    if max_size > 0 and active > max_size:
        return LegacyDecision("ReapExcess", count=active - max_size)
    if free + spawning < desired_size and capped(desired_size - (free + spawning)) > 0:
        return LegacyDecision("Spawn", count=capped(desired_size - (free + spawning)))
    if free > budget:
        return LegacyDecision("ReapExcess", count=free - budget)
    return LegacyDecision("NoOp")


# ── desired-count sizing ─────────────────────────────────────────────────────


@dataclass(frozen=True)
class MemberSnapshot:
    """One member as desired-count sizing sees it.

    ``bound``: held by an allocation (or being returned to Free): counted, never scaled down.
    ``leaving``: deletion or a Replace return is under way: not counted, never acted on.
    """

    name: str
    phase: ProcessPhase
    created_at: datetime
    bound: bool = False
    leaving: bool = False

    @property
    def healthy(self) -> bool:
        """Running or Attested."""
        return self.phase in _HEALTHY

    @property
    def failed(self) -> bool:
        """Failed, Zombie or Reaped."""
        return self.phase in _FAILED

    @property
    def starting(self) -> bool:
        """Pending, Forking, Execing or Reconverging."""
        return self.phase in _STARTING


class ConvergenceAction(msgspec.Struct, frozen=True):
    """One step of desired-count sizing: ``CreateMember``, ``SignalSigterm(name)``, ``ReapFailed(name)``
    or ``Pause(reason)``."""

    kind: Literal["CreateMember", "SignalSigterm", "ReapFailed", "Pause"]
    name: str = ""
    reason: str = ""


def desired_count_sizing(
    desired: int, policy: ReplacementPolicy, members: Sequence[MemberSnapshot]
) -> list[ConvergenceAction]:
    """The desired-count steps, in order.

    PausePool with a failed member → only ``Pause``. ReplaceImmediate → ``ReapFailed`` per failed
    member. Then members healthy or still starting count toward ``desired``: fewer → that many
    ``CreateMember``; more → ``SignalSigterm`` the excess, never a bound member, free ones first (oldest
    first), then starting ones (newest first). Members ``leaving`` are ignored throughout.
    """
    present = [m for m in members if not m.leaving]
    failed = [m for m in present if m.failed]
    if policy.pauses_on_failure and failed:
        return [
            ConvergenceAction("Pause", reason=f"{len(failed)} member(s) reached Failed/Zombie/Reaped; policy=PausePool")
        ]
    actions = [ConvergenceAction("ReapFailed", m.name) for m in failed] if policy.replaces_failed else []
    live = [m for m in present if m.healthy or m.starting]
    if len(live) < desired:
        actions += [ConvergenceAction("CreateMember")] * (desired - len(live))
    elif len(live) > desired:
        free = sorted((m for m in live if m.healthy and not m.bound), key=lambda m: m.created_at)
        starting = sorted((m for m in live if m.starting and not m.bound), key=lambda m: m.created_at, reverse=True)
        victims = (free + starting)[: len(live) - desired]
        actions += [ConvergenceAction("SignalSigterm", m.name) for m in victims]
    return actions
