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

import msgspec

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.routing import RoutingHostname
from shared.domain.api.table import ClaimRecord

__all__ = [
    "ELIGIBLE_PHASES",
    "Candidate",
    "ClaimAction",
    "ClaimDecision",
    "ClaimStanding",
    "arbitrate",
    "bid_keys",
    "candidates_by_key",
    "claim_key",
    "claims_after",
    "claims_changed",
    "decide_claim",
    "foreign_holders",
    "held_keys",
    "holder_keys",
    "holds_any_claim",
    "in_phase",
    "process_ref",
    "standing",
]

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


def claim_key(host: RoutingHostname, fleet_cluster: str) -> str:
    """The claims key of one hostname: ``<hostname.cluster or fleet_cluster>/<hostname.app>``."""
    return f"{host.cluster or fleet_cluster}/{host.app}"


def process_ref(process: Process) -> str:
    """``<namespace>/<name>``, the form of a claim's ``holder``."""
    return f"{process.metadata.namespace or 'default'}/{process.metadata.name}"


def bid_keys(process: Process, fleet_cluster: str) -> list[str]:
    """The keys ``process`` bids for, sorted, each once; none without ``routing.stableNameClaim: true``."""
    routing = process.spec.routing
    if routing is None or not routing.stable_name_claim:
        return []
    return sorted({claim_key(host, fleet_cluster) for host in routing.hostnames})


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
            ref=process_ref(process),
            pid=(status.pid if status is not None else None) or "",
            priority=routing.priority,
            phase=status.phase if status is not None else ProcessPhase.PENDING,
            created_at=process.metadata.creation_timestamp or now,
        )
        for hostname in routing.hostnames:
            out.setdefault(claim_key(hostname, fleet_cluster), []).append(candidate)
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


def foreign_holders(claims: Mapping[str, ClaimRecord], namespace: str | None) -> list[str]:
    """Holders (``<namespace>/<name>``, sorted, each once) outside the watched ``namespace``: a reconciler
    scoped to one namespace cannot see them in its cache, so it reads them before arbitrating
    (docs/behaviour.md#stable-name-claims). None watches every namespace: no holder is foreign."""
    if namespace is None:
        return []
    return sorted({record.holder for record in claims.values() if record.holder.partition("/")[0] != namespace})


def holder_keys(claims: Mapping[str, ClaimRecord], ref: str) -> tuple[str, ...]:
    """Every key (sorted) whose record names ``ref`` (``<namespace>/<name>``) as holder, pid not compared,
    whether or not the Process still bids for it."""
    return tuple(sorted(key for key, record in claims.items() if record.holder == ref))


def claims_after(claims: Mapping[str, ClaimRecord], ref: str, phase: ProcessPhase) -> dict[str, ClaimRecord]:
    """``claims`` as the Process ``ref`` sees them once it is in ``phase``: unchanged in Running or
    Attested, else without the records naming it, which it gives up in the step that leaves
    (docs/behaviour.md#handing-a-stable-name-over)."""
    if phase in ELIGIBLE_PHASES:
        return dict(claims)
    return {key: record for key, record in claims.items() if record.holder != ref}


def in_phase(process: Process, phase: ProcessPhase) -> Process:
    """``process`` as a bidder once its next status write puts it in ``phase`` (a copy; only
    ``status.phase`` differs)."""
    status = process.status
    if status is None or status.phase is phase:
        return process
    return msgspec.structs.replace(process, status=msgspec.structs.replace(status, phase=phase))


def held_keys(claims: Mapping[str, ClaimRecord], process: Process, fleet_cluster: str) -> frozenset[str]:
    """The keys ``process`` bids for whose record names it as holder (pid not compared): the
    hostnames whose stable form it renders."""
    ref = process_ref(process)
    return frozenset(key for key in bid_keys(process, fleet_cluster)
                     if (record := claims.get(key)) is not None and record.holder == ref)


@dataclass(frozen=True)
class ClaimStanding:
    """Where one Process stands on each key it bids for: held by it, held by another (key, holder),
    or not arbitrated yet (no record)."""

    held: tuple[str, ...] = ()
    lost: tuple[tuple[str, str], ...] = ()
    unsettled: tuple[str, ...] = ()


def standing(claims: Mapping[str, ClaimRecord], process: Process, fleet_cluster: str) -> ClaimStanding:
    """The :class:`ClaimStanding` of ``process`` in ``claims``, keys sorted."""
    ref = process_ref(process)
    held: list[str] = []
    lost: list[tuple[str, str]] = []
    unsettled: list[str] = []
    for key in bid_keys(process, fleet_cluster):
        record = claims.get(key)
        if record is None:
            unsettled.append(key)
        elif record.holder == ref:
            held.append(key)
        else:
            lost.append((key, record.holder))
    return ClaimStanding(tuple(held), tuple(lost), tuple(unsettled))
