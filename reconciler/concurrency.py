"""``lifetime.ephemeral.maxConcurrent``: the cluster-wide cap on ephemeral Processes of one chart.

Pure. Which Processes share a cap (:func:`concurrency_key`), which phases hold a slot
(:func:`holds_slot`), and whether a Pending Process may go on to Forking (:func:`admission`):
docs/behaviour.md#maxconcurrent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process

__all__ = ["Admission", "Sibling", "admission", "concurrency_key", "holds_slot", "queue_order", "ring_key",
           "sibling_of"]

_P = ProcessPhase


def concurrency_key(process: Process) -> str | None:
    """The group whose members share a ``maxConcurrent`` budget, or None (not capped).

    Only a resolvably ephemeral Process has one: ``name:<spec.identity.nameOverride>`` (trimmed) when
    set, else ``chart:<spec.intent.aplicacao.chartRef>``. Any other Process is in no group.
    """
    if process.spec.lifetime.resolved_ephemeral() is None:
        return None
    override = (process.spec.identity.name_override or "").strip()
    if override:
        return f"name:{override}"
    app = process.spec.intent.aplicacao
    if app is not None and app.chart_ref:
        return f"chart:{app.chart_ref}"
    return None


def ring_key(process: Process) -> str:
    """The key dynamic sharding hashes ``process`` by (docs/architecture.md#dynamic-sharding): its
    :func:`concurrency_key` when it has one, so a ``maxConcurrent`` group is reconciled by one member and its cap
    holds; else ``<namespace>/<name>``."""
    return concurrency_key(process) or f"{process.metadata.namespace or 'default'}/{process.metadata.name}"


def holds_slot(phase: ProcessPhase) -> bool:
    """True from Forking until Reaped (Failed and Zombie included): the Process may still have
    children in the cluster. Pending waits for a slot; Reaped has given it back."""
    return phase not in (_P.PENDING, _P.REAPED)


@dataclass(frozen=True)
class Sibling:
    """Another Process of the same group, as the gate reads it: ``<ns>/<name>``, its phase and creation time."""

    ref: str
    phase: ProcessPhase
    created: datetime | None
    deleting: bool = False


def sibling_of(process: Process, phase: ProcessPhase | None = None) -> Sibling:
    """``process`` as a :class:`Sibling` (``phase`` overrides its cached phase)."""
    meta = process.metadata
    return Sibling(ref=f"{meta.namespace or 'default'}/{meta.name}", phase=phase or process.phase,
                   created=meta.creation_timestamp, deleting=meta.deletion_timestamp is not None)


def queue_order(sibling: Sibling) -> tuple[datetime, str]:
    """Who runs first among waiting Processes: the older, then the smaller ``<ns>/<name>``."""
    return (sibling.created or datetime.max.replace(tzinfo=UTC), sibling.ref)


@dataclass(frozen=True)
class Admission:
    """The gate's answer: go on to Forking, or wait with ``message``."""

    admitted: bool
    message: str = ""


def admission(process: Process, siblings: Sequence[Sibling]) -> Admission:
    """Whether ``process`` (Pending) may go on to Forking under its own ``maxConcurrent``.

    ``siblings``: the other Processes of its group. Admitted when it has no group, its cap is 0, or
    fewer than ``maxConcurrent`` siblings hold a slot **and** it is within the free slots in queue
    order (:func:`queue_order`) among the Pending siblings not being deleted, so two waiting
    Processes never both take the last slot. Otherwise the message is
    ``waiting: <n> of maxConcurrent=<m> running: <ns/name, …>`` (and ``; ahead in line: …`` when it
    waits behind older Pending siblings).
    """
    eph = process.spec.lifetime.resolved_ephemeral()
    if eph is None or eph.max_concurrent == 0 or concurrency_key(process) is None:
        return Admission(True)
    cap = eph.max_concurrent
    running = sorted(s.ref for s in siblings if holds_slot(s.phase))
    me = sibling_of(process)
    waiting = sorted((s for s in siblings if s.phase is _P.PENDING and not s.deleting), key=queue_order)
    ahead = [s.ref for s in waiting if queue_order(s) < queue_order(me)]
    free = cap - len(running)
    if len(ahead) < free:
        return Admission(True)
    message = f"waiting: {len(running)} of maxConcurrent={cap} running"
    if running:
        message += ": " + ", ".join(running)
    if free > 0:
        message += "; ahead in line: " + ", ".join(ahead)
    return Admission(False, message)
