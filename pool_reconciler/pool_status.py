"""The ``/status`` a pool pass writes: phase, member counts, the member ledger, the kstatus conditions and
``observedGeneration``.

Written only when it differs from the stored status, and ``phaseSince`` / ``lastTransitionTime`` move
only when the phase / the condition change, so our own status writes never retrigger a pass
(docs/behaviour.md#pool-status, docs/divergences.md#pool-status).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec
from msgspec import UNSET

from pool_reconciler.decision import PoolObserved
from pool_reconciler.members import entered_state_at
from pool_reconciler.patches import PoolStatusPatch
from shared.domain import annotations as ann
from shared.domain.api.allocation import AllocationRef
from shared.domain.api.codec import to_wire
from shared.domain.api.pool import EphemeralPool, MemberState, PoolCondition, PoolMember, PoolPhase
from shared.domain.api.process import Process
from shared.domain.kstatus import Truth, kstatus_conditions

__all__ = ["ledger", "pool_conditions", "pool_phase", "pool_status_patch"]


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


def pool_conditions(obs: PoolObserved, phase: PoolPhase, message: str | None) -> list[PoolCondition]:
    """kstatus ``Ready`` / ``Reconciling`` / ``Stalled`` (docs/behaviour.md#pool-status): Ready iff Steady;
    Stalled when not Steady and ``message`` says why (a PausePool pause, an invalid template: nothing
    moves until someone acts); Reconciling otherwise. Reason = the phase, message = ``message`` or
    ``pool is <phase>``, ``observedGeneration`` = the pool's generation; ``lastTransitionTime`` kept while
    a condition's status holds."""
    steady = phase is PoolPhase.STEADY
    stalled = not steady and message is not None
    truth = Truth(ready=steady, reconciling=not steady and not stalled, stalled=stalled)
    old = obs.pool.status
    text = message or f"pool is {phase.value}"
    generation = obs.pool.metadata.generation
    return kstatus_conditions(
        truth, old.conditions if old else [], obs.now,
        lambda type_, status, since: PoolCondition(type_=type_, status=status, reason=phase.value, message=text,
                                                   last_transition_time=since, observed_generation=generation))


def pool_status_patch(
    obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState], message: str | None
) -> PoolStatusPatch | None:
    """The pool's ``/status`` for this pass (``message`` None clears it), or None when the stored status
    already holds every value; ``phaseSince`` is kept while the phase stays the same."""
    phase = pool_phase(obs.pool, states)
    counts = Counter(states)
    patch = PoolStatusPatch(
        phase=phase,
        ready_count=counts[MemberState.FREE],
        allocated_count=counts[MemberState.ALLOCATED],
        spawning_count=counts[MemberState.SPAWNING],
        returning_count=counts[MemberState.RETURNING],
        members=ledger(obs, members, states),
        message=message,
        conditions=pool_conditions(obs, phase, message),
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
