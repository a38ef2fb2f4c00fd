"""One EphemeralPool pass, pure, in named steps: ``pool_decide(observed) -> PoolDecision``.

1. :func:`~pool_reconciler.members.pool_members` and their states;
2. a deleting pool: :func:`drain` (delete every member; released once none is left);
3. otherwise :func:`return_members` (the return policy for members stamped ``return-trigger``),
   :func:`size_pool` (desired-count or legacy sizing, :mod:`pool_reconciler.sizing`),
   :func:`spawn_members` (the member Processes to create, or why none can be),
   :func:`sizing_events`, and :func:`~pool_reconciler.pool_status.pool_status_patch`.

Each step is a small pure function with table tests of its own (docs/behaviour.md#pools).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from msgspec import UnsetType

from pool_reconciler.decision import DeleteReason, MemberCreate, MemberDelete, PoolDecision, PoolObserved
from pool_reconciler.members import entered_state_at, free_slots, member_process, member_state, pool_members
from pool_reconciler.patches import PoolStatusPatch
from pool_reconciler.pool_status import MAX_SIZE_REACHED, pool_status_patch
from pool_reconciler.reasons import PoolReason
from pool_reconciler.returns import ReturnWrites, return_member
from pool_reconciler.sizing import LedgerEntry, MemberSnapshot, desired_count_sizing, legacy_sizing
from shared.domain import annotations as ann
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import EphemeralPool, MemberState
from shared.domain.api.process import Process
from shared.kube.events import Event

__all__ = [
    "CREATE_BATCH",
    "NEXT_BATCH_AFTER",
    "Sizing",
    "Spawn",
    "claimed",
    "desired_count_step",
    "drain",
    "guarded",
    "ledger_state",
    "legacy_step",
    "pool_decide",
    "return_members",
    "size_pool",
    "sizing_events",
    "snapshot",
    "spawn_members",
    "stall_events",
]


CREATE_BATCH: Final = 16
"""Most members one pass creates; the pass after (:data:`NEXT_BATCH_AFTER`) creates the next batch, so the
status is written, and a deletion noticed, between batches (docs/behaviour.md#member-processes)."""

NEXT_BATCH_AFTER: Final = 0.1
"""Seconds before the next batch of creates when sizing asked for more than :data:`CREATE_BATCH`."""


def pool_decide(obs: PoolObserved) -> PoolDecision:
    """One pass over ``obs.pool``: drain when it is being deleted, else returns, sizing, spawns (at most
    :data:`CREATE_BATCH`, the rest in the next pass) and status."""
    members = pool_members(obs.pool, obs.members)
    states = tuple(member_state(m) for m in members)
    if obs.pool.metadata.deletion_timestamp is not None:
        return drain(obs, members, states)
    returned = return_members(obs, members)
    sizing = size_pool(obs, members, states)
    spawn = spawn_members(obs.pool, members, min(sizing.spawn, CREATE_BATCH))
    more = sizing.spawn > len(spawn.create) and bool(spawn.create)
    deletes = tuple({d.name: d for d in returned.delete + sizing.delete}.values())
    gone = {d.name for d in deletes}
    status = pool_status_patch(obs, members, states, spawn.message or sizing.pause)
    return PoolDecision(
        create=spawn.create,
        patch=tuple(p for p in returned.patch if p.name not in gone),
        delete=deletes,
        apply=returned.apply,
        status=status,
        events=returned.events + spawn.events + sizing_events(sizing) + stall_events(obs, status),
        requeue_after=NEXT_BATCH_AFTER if more else obs.heartbeat_seconds,
    )


def drain(obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState]) -> PoolDecision:
    """A deleting pool (either sizing mode): delete every member not already being deleted, keep the
    status current; once no member is left the pool is released (its finalizer goes)."""
    if not members:
        return PoolDecision(released=True)
    delete = tuple(MemberDelete(m.metadata.name or "", "Drain") for m in members
                   if m.metadata.deletion_timestamp is None)
    return PoolDecision(
        delete=delete,
        status=pool_status_patch(obs, members, states, None),
        events=(Event.normal(PoolReason.DRAINING, f"deleting {len(delete)} member(s)"),) if delete else (),
        requeue_after=obs.heartbeat_seconds,
    )


def return_members(obs: PoolObserved, members: Sequence[Process]) -> ReturnWrites:
    """The return policy for each member stamped ``return-trigger`` and not being deleted."""
    out = ReturnWrites()
    for member in members:
        if ann.RETURN_TRIGGER in member.metadata.annotations and member.metadata.deletion_timestamp is None:
            out += return_member(obs, member)
    return out


# ── sizing ───────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Sizing:
    """What sizing asks for: ``spawn`` members to create, members to ``delete``, a ``pause`` reason."""

    spawn: int = 0
    delete: tuple[MemberDelete, ...] = ()
    pause: str | None = None


def size_pool(obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState]) -> Sizing:
    """``spec.desired > 0`` selects desired-count sizing, else legacy sizing."""
    if obs.pool.spec.desired > 0:
        return desired_count_step(obs, members)
    return legacy_step(obs, members, states)


def snapshot(obs: PoolObserved, member: Process) -> MemberSnapshot:
    """A member as desired-count sizing sees it: ``bound`` (ephemeral lifetime or an ``allocation``
    annotation), ``leaving`` (deleting, or returned under Replace)."""
    triggered = ann.RETURN_TRIGGER in member.metadata.annotations
    leaving = member.metadata.deletion_timestamp is not None or (
        triggered and not obs.pool.spec.return_policy.keeps_process)
    return MemberSnapshot(
        name=member.metadata.name or "",
        phase=member.phase if member.status is not None else ProcessPhase.PENDING,
        created_at=member.metadata.creation_timestamp or obs.now,
        bound=member.spec.lifetime.is_ephemeral or ann.ALLOCATION in member.metadata.annotations,
        leaving=leaving,
    )


def desired_count_step(obs: PoolObserved, members: Sequence[Process]) -> Sizing:
    """Desired-count sizing: creates counted, SIGTERMs and failed members deleted, a pause reason kept."""
    spec = obs.pool.spec
    actions = desired_count_sizing(spec.desired, spec.replacement_policy, [snapshot(obs, m) for m in members])
    by_name = {m.metadata.name or "": m for m in members}
    return Sizing(
        spawn=sum(1 for a in actions if a.kind == "CreateMember"),
        delete=tuple(guarded(by_name[a.name], "ScaleDown" if a.kind == "SignalSigterm" else "ReplaceFailed")
                     for a in actions if a.kind in ("SignalSigterm", "ReapFailed")),
        pause=next((a.reason for a in actions if a.kind == "Pause"), None),
    )


def ledger_state(obs: PoolObserved, member: Process, state: MemberState) -> MemberState:
    """The state legacy sizing counts: a member being returned to Free (Keep/Reset) counts as Spawning —
    it will be supply again, so no replacement is spawned for it; a Free member an allocation has
    already claimed (:func:`claimed`) counts as Allocated — it is no supply, and never reaped."""
    if state is MemberState.FREE and claimed(member):
        return MemberState.ALLOCATED
    if (
        state is MemberState.RETURNING
        and member.metadata.deletion_timestamp is None
        and ann.RETURN_TRIGGER in member.metadata.annotations
        and obs.pool.spec.return_policy.keeps_process
    ):
        return MemberState.SPAWNING
    return state


def claimed(member: Process) -> bool:
    """Bound, or being bound: an ephemeral lifetime, or an ``allocation`` / ``requestor`` annotation."""
    annotations = member.metadata.annotations
    return member.spec.lifetime.is_ephemeral or ann.ALLOCATION in annotations or ann.REQUESTOR in annotations


def guarded(member: Process, reason: DeleteReason) -> MemberDelete:
    """A sizing delete of ``member`` guarded by its observed resourceVersion (a claim in between wins)."""
    return MemberDelete(member.metadata.name or "", reason, resource_version=member.metadata.resource_version)


def legacy_step(obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState]) -> Sizing:
    """Legacy sizing: Spawn → a count; ReplaceMembers → delete those not already being deleted;
    ReapExcess → delete the first Free members by name that no allocation has claimed. Every delete is
    guarded by the member's observed resourceVersion."""
    spec = obs.pool.spec
    entries = [LedgerEntry(m.metadata.name or "", ledger_state(obs, m, s), entered_state_at(m, obs.now))
               for m, s in zip(members, states, strict=True)]
    legacy = legacy_sizing(deleting=False, desired_size=spec.desired_size, min_size=spec.min_size,
                           max_size=spec.max_size, free_ttl=spec.free_ttl, ledger=entries, now=obs.now)
    if legacy.kind == "Spawn":
        return Sizing(spawn=legacy.count)
    by_name = {m.metadata.name or "": m for m in members}
    if legacy.kind == "ReplaceMembers":
        return Sizing(delete=tuple(guarded(by_name[n], "Replace") for n in legacy.names
                                   if by_name[n].metadata.deletion_timestamp is None))
    if legacy.kind == "ReapExcess":
        free = [by_name[e.name] for e in entries if e.state is MemberState.FREE and not claimed(by_name[e.name])]
        return Sizing(delete=tuple(guarded(m, "ScaleDown") for m in free[: legacy.count]))
    return Sizing()


def sizing_events(sizing: Sizing) -> tuple[Event, ...]:
    """``Paused`` (Warning) when sizing paused the pool; ``MembersDeleted`` naming what sizing deletes."""
    events = []
    if sizing.pause:
        events.append(Event.warning(PoolReason.PAUSED, sizing.pause))
    if sizing.delete:
        events.append(Event.normal(PoolReason.MEMBERS_DELETED, "deleting " + ", ".join(d.name for d in sizing.delete)))
    return tuple(events)


def stall_events(obs: PoolObserved, status: PoolStatusPatch | None) -> tuple[Event, ...]:
    """A Warning ``MaxSizeReached`` with the status message when this pass's status starts saying that
    ``maxSize`` keeps the pool from its target (or says it with other numbers); none while it holds."""
    if status is None or isinstance(status.conditions, UnsetType) or not status.conditions:
        return ()
    if status.conditions[0].reason != MAX_SIZE_REACHED:
        return ()
    before = obs.pool.status.message if obs.pool.status is not None else None
    if not isinstance(status.message, str) or status.message == before:
        return ()
    return (Event.warning(MAX_SIZE_REACHED, status.message),)


# ── spawning ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Spawn:
    """The members to create, their Events, and a status ``message`` when none can be created."""

    create: tuple[MemberCreate, ...] = ()
    events: tuple[Event, ...] = ()
    message: str | None = None


def spawn_members(pool: EphemeralPool, members: Sequence[Process], count: int) -> Spawn:
    """``count`` new members on the lowest free slots; none, with a Warning and a status message, when the
    template does not lower to a valid Process spec."""
    if count <= 0:
        return Spawn()
    problems = pool.spec.template.to_process_spec().problems()
    if problems:
        message = "invalid template: " + "; ".join(problems)
        return Spawn(events=(Event.warning(PoolReason.INVALID_TEMPLATE, message),), message=message)
    taken = {m.metadata.name or "" for m in members}
    create = tuple(MemberCreate(slot, member_process(pool, slot)) for slot, _ in free_slots(pool, taken, count))
    return Spawn(create=create, events=(Event.normal(PoolReason.MEMBERS_CREATED, f"creating {count} member(s)"),))
