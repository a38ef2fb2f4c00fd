"""The ``/status`` a pool pass writes: phase, member counts, the member ledger, the kstatus conditions and
``observedGeneration``; and :func:`max_size_stall`, the words for a pool ``maxSize`` keeps from its target.

Written only when it differs from the stored status, and ``phaseSince`` / ``lastTransitionTime`` move
only when the phase / the condition change, so our own status writes never retrigger a pass
(docs/behaviour.md#pool-status, docs/divergences.md#pool-status).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

import msgspec
from msgspec import UNSET

from pool_reconciler.decision import PoolObserved
from pool_reconciler.members import entered_state_at
from pool_reconciler.patches import PoolStatusPatch
from pool_reconciler.reasons import PoolReason
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationRef
from shared.domain.api.codec import to_wire
from shared.domain.api.pool import EphemeralPool, MemberState, PoolCondition, PoolMember, PoolPhase
from shared.domain.api.process import Process
from shared.domain.kstatus import Truth, kstatus_conditions

__all__ = ["MAX_SIZE_REACHED", "ledger", "max_size_stall", "pool_conditions", "pool_phase", "pool_status_patch"]

MAX_SIZE_REACHED: Final = PoolReason.MAX_SIZE_REACHED
"""The condition reason (and Warning Event) of a pool whose target ``maxSize`` makes unreachable."""


def pool_phase(pool: EphemeralPool, states: Sequence[MemberState]) -> PoolPhase:
    """Deleting → Draining; no member → Initializing (Steady when the pool asks for none: ``desiredSize``,
    ``minSize`` and ``desired`` all 0); supply below ``minSize`` → Degraded; below /
    above / at the target → ScalingUp / ScalingDown / Steady.

    The target is the active mode's: ``desired`` (supply counts Allocated members too, as desired-count
    sizing does) or legacy ``desiredSize`` (supply = Free + Spawning).
    """
    spec = pool.spec
    if pool.metadata.deletion_timestamp is not None:
        return PoolPhase.DRAINING
    wants = spec.desired if spec.desired > 0 else max(spec.desired_size, spec.min_size)
    if not states:
        return PoolPhase.STEADY if wants == 0 else PoolPhase.INITIALIZING
    counted = {MemberState.FREE, MemberState.SPAWNING}
    if spec.desired > 0:
        counted.add(MemberState.ALLOCATED)
    supply = sum(1 for s in states if s in counted)
    target = spec.desired if spec.desired > 0 else spec.desired_size
    if spec.min_size > 0 and supply < spec.min_size:
        return PoolPhase.DEGRADED
    if supply < target:
        return PoolPhase.SCALING_UP
    if supply > target:
        return PoolPhase.SCALING_DOWN
    return PoolPhase.STEADY


def ledger(obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState]) -> list[PoolMember]:
    """``status.members``: one row per member, in the order given, with the allocation that holds it
    (Allocated or Returning members)."""
    rows = []
    for member, state in zip(members, states, strict=True):
        allocation = member.metadata.annotations.get(ann.ALLOCATION)
        held_by = None
        if allocation and state in (MemberState.ALLOCATED, MemberState.RETURNING):
            held_by = AllocationRef(name=allocation, namespace=member.metadata.namespace or "")
        rows.append(PoolMember(process_name=member.metadata.name or "", state=state,
                               entered_state_at=entered_state_at(member, obs.now), allocation_ref=held_by))
    return rows


def max_size_stall(pool: EphemeralPool, states: Sequence[MemberState]) -> str | None:
    """Why a legacy-sized pool (``desired`` 0) with ``maxSize > 0`` cannot reach its target, or None
    (docs/behaviour.md#pool-status):

    - ``minSize`` or ``desiredSize`` above ``maxSize``: never reachable, whatever the members do;
    - ScalingUp or Degraded with as many active members (all but Failed) as ``maxSize`` allows and none
      Returning: sizing may create nothing more (docs/behaviour.md#legacy-sizing), so only a raised
      ``maxSize`` or a released allocation moves it. A Returning member will be Free again or replaced,
      so the pool is still on its way then.

    The message gives the numbers; a deleting or desired-count pool never stalls here.
    """
    spec = pool.spec
    if spec.desired > 0 or spec.max_size == 0 or pool.metadata.deletion_timestamp is not None:
        return None
    cap = spec.max_size
    above = [f"{field} {value}" for field, value in (("minSize", spec.min_size), ("desiredSize", spec.desired_size))
             if value > cap]
    if above:
        return f"{' and '.join(above)} above maxSize {cap}: the pool never holds more than {cap} member(s)"
    counts = Counter(states)
    active = len(states) - counts[MemberState.FAILED]
    if counts[MemberState.RETURNING] or active < cap:
        return None
    if pool_phase(pool, states) not in (PoolPhase.SCALING_UP, PoolPhase.DEGRADED):
        return None
    supply = counts[MemberState.FREE] + counts[MemberState.SPAWNING]
    wanted = f"desiredSize {spec.desired_size}" + (f", minSize {spec.min_size}" if spec.min_size else "")
    return (f"at maxSize {cap}: {active} active member(s), {counts[MemberState.ALLOCATED]} allocated and {supply} "
            f"free or starting, short of {wanted}; raise maxSize or release an allocation")


def pool_conditions(obs: PoolObserved, phase: PoolPhase, message: str | None,
                    reason: str | None = None) -> list[PoolCondition]:
    """kstatus ``Ready`` / ``Reconciling`` / ``Stalled`` (docs/behaviour.md#pool-status): Ready iff Steady;
    Stalled when not Steady and ``message`` says why (a PausePool pause, an invalid template, a target
    above ``maxSize``: nothing moves until someone acts); Reconciling otherwise. Reason = ``reason`` or
    the phase, message = ``message`` or ``pool is <phase>``, ``observedGeneration`` = the pool's
    generation; ``lastTransitionTime`` kept while a condition's status holds."""
    steady = phase is PoolPhase.STEADY
    stalled = not steady and message is not None
    truth = Truth(ready=steady, reconciling=not steady and not stalled, stalled=stalled)
    old = obs.pool.status
    text = message or f"pool is {phase.value}"
    why = reason or phase.value
    generation = obs.pool.metadata.generation
    return kstatus_conditions(
        truth, old.conditions if old else [], obs.now,
        lambda type_, status, since: PoolCondition(type_=type_, status=status, reason=why, message=text,
                                                   last_transition_time=since, observed_generation=generation))


def pool_status_patch(
    obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState], message: str | None
) -> PoolStatusPatch | None:
    """The pool's ``/status`` for this pass, or None when the stored status already holds every value;
    ``phaseSince`` is kept while the phase stays the same. ``message`` (a pause or invalid-template
    reason) wins; without one, :func:`max_size_stall` gives the message (reason
    :data:`MAX_SIZE_REACHED`); with neither the message is cleared."""
    phase = pool_phase(obs.pool, states)
    reason = None
    if message is None:
        message = max_size_stall(obs.pool, states)
        reason = MAX_SIZE_REACHED if message is not None else None
    counts = Counter(states)
    patch = PoolStatusPatch(
        phase=phase,
        ready_count=counts[MemberState.FREE],
        allocated_count=counts[MemberState.ALLOCATED],
        spawning_count=counts[MemberState.SPAWNING],
        returning_count=counts[MemberState.RETURNING],
        members=ledger(obs, members, states),
        message=message,
        conditions=pool_conditions(obs, phase, message, reason),
        observed_generation=obs.pool.metadata.generation if obs.pool.metadata.generation is not None else UNSET,
    )
    old = obs.pool.status
    if old is not None:
        stored = {"message": None, **to_wire(old)}
        if all(stored.get(k) == v for k, v in patch.to_json().items()):
            return None
    since = obs.now
    if old is not None and old.phase is phase and old.phase_since is not None:
        since = old.phase_since
    return msgspec.structs.replace(patch, phase_since=since)
