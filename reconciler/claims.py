"""Stable-name claims arbiter: who holds ``<cluster>/<app>`` in ``ProcessTable.status.claims``.

Pure decisions of docs/behaviour.md#stable-name-claims (the record's shape: docs/wire-format.md#claims).
The reference's write never lands (its apply body lacks apiVersion/kind,
docs/divergences.md#stable-name-claims); the executor here writes :func:`arbitrate`'s result with
a status merge patch when :func:`claims_changed`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import ClaimRecord

__all__ = ["ELIGIBLE_PHASES", "Candidate", "ClaimAction", "ClaimDecision", "arbitrate", "candidates_by_key",
           "claims_changed", "decide_claim", "holds_any_claim"]

ELIGIBLE_PHASES = frozenset({ProcessPhase.RUNNING, ProcessPhase.ATTESTED})
"""Only Processes in these phases may hold a claim."""


@dataclass(frozen=True)
class Candidate:
    """One (Process, hostname) bid for a key."""

    ref: str
    """``<namespace>/<name>``."""
    pid: str
    priority: int
    phase: ProcessPhase
    created_at: datetime


class ClaimAction(enum.Enum):
    HOLD = "Hold"
    TRANSFER = "Transfer"
    VACATE = "Vacate"


@dataclass(frozen=True)
class ClaimDecision:
    """``record`` is the key's record afterwards (None after Vacate)."""

    action: ClaimAction
    record: ClaimRecord | None


def candidates_by_key(processes: Iterable[Process], fleet_cluster: str, now: datetime) -> dict[str, list[Candidate]]:
    """Candidates per ``<hostname.cluster or fleet_cluster>/<hostname.app>`` key, in input order then
    hostname order, duplicates kept. Only ``routing.stableNameClaim: true`` bids."""
    out: dict[str, list[Candidate]] = {}
    for process in processes:
        routing = process.spec.routing
        if routing is None or not routing.stable_name_claim:
            continue
        status = process.status
        candidate = Candidate(
            ref=f"{process.metadata.namespace or 'default'}/{process.metadata.name}",
            pid=(status.pid if status is not None else None) or "",
            priority=routing.priority,
            phase=status.phase if status is not None else ProcessPhase.PENDING,
            created_at=process.metadata.creation_timestamp or now,
        )
        for hostname in routing.hostnames:
            out.setdefault(f"{hostname.cluster or fleet_cluster}/{hostname.app}", []).append(candidate)
    return out


def _better(challenger: Candidate, best: Candidate) -> bool:
    """Higher priority; then earlier createdAt; then the smaller ref; an exact tie keeps the later."""
    if challenger.priority != best.priority:
        return challenger.priority > best.priority
    if challenger.created_at != best.created_at:
        return challenger.created_at < best.created_at
    return challenger.ref <= best.ref


def decide_claim(current: ClaimRecord | None, candidates: Iterable[Candidate], now: datetime) -> ClaimDecision:
    """The decision for one key: Vacate without an eligible candidate; Hold when the
    current holder (same ref and pid) still wins; otherwise Transfer with ``grantedAt = now``."""
    winner: Candidate | None = None
    for candidate in candidates:
        if candidate.phase not in ELIGIBLE_PHASES:
            continue
        if winner is None or _better(candidate, winner):
            winner = candidate
    if winner is None:
        return ClaimDecision(ClaimAction.VACATE, None)
    if current is not None and current.holder == winner.ref and current.pid == winner.pid:
        return ClaimDecision(ClaimAction.HOLD, current)
    record = ClaimRecord(holder=winner.ref, pid=winner.pid, granted_at=now, priority=winner.priority)
    return ClaimDecision(ClaimAction.TRANSFER, record)


def arbitrate(current: Mapping[str, ClaimRecord], candidates: Mapping[str, list[Candidate]],
              now: datetime) -> tuple[dict[str, ClaimRecord], dict[str, ClaimDecision]]:
    """New claims map and the decision per key, for every key in current ∪ candidates, sorted."""
    claims: dict[str, ClaimRecord] = {}
    decisions: dict[str, ClaimDecision] = {}
    for key in sorted(set(current) | set(candidates)):
        decision = decide_claim(current.get(key), candidates.get(key, ()), now)
        decisions[key] = decision
        if decision.record is not None:
            claims[key] = decision.record
    return claims, decisions


def claims_changed(current: Mapping[str, ClaimRecord], new: Mapping[str, ClaimRecord]) -> bool:
    """Whether the map differs, records compared field by field including ``grantedAt``."""
    return dict(current) != dict(new)


def holds_any_claim(claims: Mapping[str, ClaimRecord], namespace: str, name: str) -> bool:
    """True when any record's holder is ``<namespace>/<name>``; pid not compared."""
    ref = f"{namespace}/{name}"
    return any(record.holder == ref for record in claims.values())
