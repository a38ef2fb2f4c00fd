"""Pool members: which Processes belong to a pool, the state each is in, and the Process a new one is.

Membership is by the ``tatara.pleme.io/pool`` annotation alone; the member state is derived from the
Process on every pass (nothing is remembered between passes); a new member is the pool's template
lowered to a Process spec with a permanent lifetime, named per slot (docs/behaviour.md#pool-membership,
docs/behaviour.md#member-states, docs/behaviour.md#member-processes, docs/wire-format.md#member-names).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import msgspec

from shared.domain import annotations as ann
from shared.domain.api.lifetime import Lifetime, PermanentLifetime
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import EphemeralPool, MemberState
from shared.domain.api.process import Process
from shared.domain.group import API_VERSION
from shared.domain.identity import member_process_name
from shared.domain.sharding import shard_labels
from shared.kube.meta import ObjectMeta, OwnerReference

__all__ = [
    "belongs_to_pool",
    "entered_state_at",
    "free_slots",
    "member_process",
    "member_state",
    "pool_members",
]


def belongs_to_pool(process: Process, pool_name: str) -> bool:
    """True iff the ``tatara.pleme.io/pool`` annotation equals ``pool_name`` exactly."""
    return process.metadata.annotations.get(ann.POOL) == pool_name


def pool_members(pool: EphemeralPool, processes: Collection[Process]) -> tuple[Process, ...]:
    """The members of ``pool`` among ``processes``, by name."""
    name = pool.metadata.name or ""
    return tuple(sorted((p for p in processes if belongs_to_pool(p, name)), key=lambda p: p.metadata.name or ""))


def _returning(process: Process) -> bool:
    """Leaving or being returned: deletion started, or the allocation stamped ``return-trigger``."""
    return process.metadata.deletion_timestamp is not None or ann.RETURN_TRIGGER in process.metadata.annotations


def member_state(process: Process) -> MemberState:
    """The member state of a Process: Failed/Reaped → Failed; Exiting/Zombie, deleting, or stamped
    ``return-trigger`` → Returning; Attested → Allocated with an ephemeral lifetime, else Free; any
    other phase (or no status) → Spawning."""
    phase = process.phase if process.status is not None else None
    if phase in (ProcessPhase.FAILED, ProcessPhase.REAPED):
        return MemberState.FAILED
    if _returning(process) or phase in (ProcessPhase.EXITING, ProcessPhase.ZOMBIE):
        return MemberState.RETURNING
    if phase is ProcessPhase.ATTESTED:
        return MemberState.ALLOCATED if process.spec.lifetime.is_ephemeral else MemberState.FREE
    return MemberState.SPAWNING


def entered_state_at(process: Process, now: datetime) -> datetime:
    """The Process's ``phaseSince``, else its creation time (stable from pass to pass), else ``now``."""
    if process.status is not None and process.status.phase_since is not None:
        return process.status.phase_since
    return process.metadata.creation_timestamp or now


def member_process(pool: EphemeralPool, slot: int) -> Process:
    """The member Process for ``slot``: the template lowered with a permanent lifetime, annotations
    ``pool``/``pool-slot``, the pool's shard label (docs/architecture.md#sharding), one controller
    ownerReference to the pool (when it has a uid); no status.

    Raises:
        ValueError: the pool has no name or namespace.
    """
    name, namespace, uid = pool.metadata.name, pool.metadata.namespace, pool.metadata.uid
    if not name or not namespace:
        raise ValueError("pool has no metadata.name / metadata.namespace")
    spec = msgspec.structs.replace(
        pool.spec.template.to_process_spec(), lifetime=Lifetime(permanent=PermanentLifetime())
    )
    owners = [OwnerReference(api_version=API_VERSION, kind="EphemeralPool", name=name, uid=uid, controller=True,
                             block_owner_deletion=True)] if uid else []
    meta = ObjectMeta(
        name=member_process_name(name, uid, slot),
        namespace=namespace,
        annotations={ann.POOL: name, ann.POOL_SLOT: str(slot)},
        labels=shard_labels(pool.metadata.labels),
        owner_references=owners,
    )
    return Process(metadata=meta, spec=spec)


def free_slots(pool: EphemeralPool, taken: Collection[str], count: int) -> list[tuple[int, str]]:
    """The first ``count`` ``(slot, member name)`` pairs whose name no current member holds, lowest first."""
    out: list[tuple[int, str]] = []
    slot = 0
    while len(out) < count:
        name = member_process_name(pool.metadata.name or "", pool.metadata.uid, slot)
        if name not in taken:
            out.append((slot, name))
        slot += 1
    return out
