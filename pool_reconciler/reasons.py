"""Every condition and Event reason the pool reconciler writes that is not a phase's name: one closed
set, :class:`PoolReason` (docs/behaviour.md#pool-reasons, generated from it by
``python -m tools.gen_reasons``).

The values are the wire spellings and must not change. Other pool and allocation conditions (and an
allocation's phase-change Events) carry the phase as reason (:class:`~shared.domain.api.pool.PoolPhase`,
:class:`~shared.domain.api.pool.AllocationPhase`). The Process reconciler has its own set
(:mod:`reconciler.reasons`): ``Draining`` means children exiting there, members deleted here.
"""

from __future__ import annotations

from shared.domain.reasons import On, ReasonSet

__all__ = ["PoolReason"]

_C, _N, _W = On.CONDITION, On.NORMAL, On.WARNING


class PoolReason(ReasonSet):
    """The pool reconciler's reasons: a pool's, then an allocation's."""

    MEMBERS_CREATED = "MembersCreated", _N, "pool: new members are created on the lowest free slots"
    INVALID_TEMPLATE = "InvalidTemplate", _W, "pool: `spec.template` is not a valid Process spec; nothing is created"
    MEMBERS_DELETED = "MembersDeleted", _N, "pool: sizing deletes members (names in the message)"
    PAUSED = "Paused", _W, "pool: sizing paused the pool (`PausePool` policy)"
    MAX_SIZE_REACHED = "MaxSizeReached", _C | _W, "pool, stalled: the target is out of reach under `maxSize`"
    DRAINING = "Draining", _N, "pool deleted: its members are deleted"
    MEMBER_RETURNED = "MemberReturned", _N, "pool: a returned member is free again (Keep, or reset)"
    RESET_STARTED = "ResetStarted", _N, "pool: a returned member's reset Job started"
    RESET_FAILED = "ResetFailed", _W, "pool: a reset Job failed; the member is replaced"
    RESET_REFUSED = "ResetRefused", _W, "pool: the API server refused a reset Job (RBAC, validation); retried"
    MEMBER_REPLACING = "MemberReplacing", _N, "pool: a returned member is sent SIGTERM to be replaced"
    BOUND = "Bound", _C | _N, "allocation: bound to a free member"
    INVALID_TTL = "InvalidTtl", _W, "allocation: its TTL does not parse; it holds for 1 h"
    MEMBER_LOST = "MemberLost", _C | _W, "allocation → Failed: its member is gone or serves another allocation"
    SPAWN_TIMEOUT = "SpawnTimeout", _C | _W, "allocation → Failed: no free member within the spawn timeout"
    POOL_ON_OTHER_SHARD = ("PoolOnOtherShard", _C | _W,
                           "allocation, NoMatchingPool: its `poolRef` names a pool another shard owns")
