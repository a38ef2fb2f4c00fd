"""The ``EphemeralPool`` kind: pre-warmed member Processes and the routing selector.

— docs/wire-format.md#ephemeralpool; the rules: docs/behaviour.md#pools.
"""

from __future__ import annotations

from typing import Annotated, Final, NamedTuple

from msgspec import Meta

from shared.domain.api.allocation import AllocationRef, Requestor
from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.condition import StatusCondition
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.grammar import Duration
from shared.domain.api.wire import Timestamp, UInt32, WireStruct
from shared.domain.group import API_VERSION
from shared.kube.meta import ObjectMeta

__all__ = [
    "MAX_POOL_SIZE",
    "SIZE_ORDER_RULES",
    "AdmittedPoolSpec",
    "EphemeralPool",
    "MatchKey",
    "MemberState",
    "PoolCondition",
    "PoolMember",
    "PoolPhase",
    "PoolSelector",
    "PoolSize",
    "PoolSpec",
    "PoolStatus",
    "ReplacementPolicy",
    "ReturnPolicy",
    "glob_match",
]


class ReturnPolicy(ClosedSet):
    """What happens to a member after release. Default ``Replace``."""

    REPLACE = "Replace"
    RESET = "Reset"
    KEEP = "Keep"

    @property
    def keeps_process(self) -> bool:
        """Reset and Keep keep the member Process."""
        return self is not ReturnPolicy.REPLACE

    @property
    def runs_reset_job(self) -> bool:
        """Reset only."""
        return self is ReturnPolicy.RESET


class ReplacementPolicy(ClosedSet):
    """What the desired-count loop does with failed members."""

    REPLACE_IMMEDIATE = "ReplaceImmediate"
    HOLD_FAILED = "HoldFailed"
    PAUSE_POOL = "PausePool"

    @property
    def replaces_failed(self) -> bool:
        return self is ReplacementPolicy.REPLACE_IMMEDIATE

    @property
    def pauses_on_failure(self) -> bool:
        return self is ReplacementPolicy.PAUSE_POOL


class MatchKey(NamedTuple):
    """The routing key of an allocation (docs/behaviour.md#allocation-routing); not on the wire."""

    repo: str
    branch: str
    pr_labels: tuple[str, ...]
    kind: str

    @classmethod
    def of(cls, requestor: Requestor) -> MatchKey:
        """Absent repo/branch become ``""``."""
        return cls(requestor.repo or "", requestor.branch or "", tuple(requestor.pr_labels), requestor.kind)


def glob_match(pattern: str, value: str) -> bool:
    """Selector glob: ``""`` matches anything; a trailing ``*`` makes a prefix
    match (one ``*`` removed); otherwise exact equality."""
    if not pattern:
        return True
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return pattern == value


class PoolSelector(WireStruct):
    """Which allocations a pool serves. Empty lists match everything."""

    repos: list[str] = []
    """Glob patterns of repositories (``owner/name``); empty (the default) matches any."""
    branches: list[str] = []
    """Glob patterns of branches; empty (the default) matches any."""
    pr_labels: list[str] = []
    """Every entry must be among the requestor's labels (AND)."""
    kinds: list[str] = []
    """Requestor kinds, compared exactly (e.g. ``github-pr``); empty (the default) matches any."""

    def matches(self, key: MatchKey) -> bool:
        """All four clauses hold: repos, branches, prLabels and kinds (docs/behaviour.md#allocation-routing)."""
        return (
            (not self.repos or any(glob_match(p, key.repo) for p in self.repos))
            and (not self.branches or any(glob_match(p, key.branch) for p in self.branches))
            and all(label in key.pr_labels for label in self.pr_labels)
            and (not self.kinds or key.kind in self.kinds)
        )

    @property
    def specificity(self) -> int:
        """8·[repos] + 4·[branches] + 2·len(prLabels) + 1·[kinds]; higher wins."""
        return (
            (8 if self.repos else 0) + (4 if self.branches else 0) + 2 * len(self.pr_labels) + (1 if self.kinds else 0)
        )


MAX_POOL_SIZE: Final = 1000
"""The largest pool size the CRD admits (``desiredSize``, ``minSize``, ``maxSize``, ``desired``)."""

PoolSize = Annotated[UInt32, Meta(extra_json_schema={"x-kubernetes-validations": [{
    "rule": f"self <= {MAX_POOL_SIZE}",
    "message": f"must be at most {MAX_POOL_SIZE}: a pool keeps at most {MAX_POOL_SIZE} members",
}]})]
"""A member count, refused at admission above :data:`MAX_POOL_SIZE` (docs/divergences.md#pool-size-cap);
still decoded up to the Rust ``u32`` range, so an object stored before is read as it was."""


class PoolSpec(WireStruct):
    """``spec`` of a pool."""

    desired_size: PoolSize
    """Legacy mode: target Free + Spawning members."""
    min_size: PoolSize = 0
    """Fewest active members (Free, Allocated, Spawning, Returning); 0 (the default) disables the floor."""
    max_size: PoolSize = 0
    """Most active members; 0 (the default) means no cap."""
    return_policy: ReturnPolicy = ReturnPolicy.REPLACE
    selector: PoolSelector = PoolSelector()
    template: EphemeralSpec
    free_ttl: Duration = "24h"
    """A Free member older than this duration is recycled. Default ``24h``."""
    max_allocation_ttl: Duration = "4h"
    """Longest an allocation may hold a member, as a duration. Default ``4h``."""
    desired: PoolSize = 0
    """> 0 selects the desired-count (healthy members) loop."""
    replacement_policy: ReplacementPolicy = ReplacementPolicy.REPLACE_IMMEDIATE
    stable_name_claim: bool = False
    """Whether one healthy member holds the pool's unprefixed host names. Default false; not read yet."""


SIZE_ORDER_RULES: Final = [
    {
        "rule": "self.desired > 0 || self.minSize <= self.desiredSize",
        "message": "minSize must be at most desiredSize when desired is 0 (legacy sizing)",
        "fieldPath": ".minSize",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "self.desired > 0 || self.maxSize == 0 || self.desiredSize <= self.maxSize",
        "message": "desiredSize must be at most maxSize when desired is 0 (legacy sizing; maxSize 0 means no cap)",
        "fieldPath": ".desiredSize",
        "reason": "FieldValueInvalid",
    },
]
"""CEL rules on ``spec``: a legacy-sized pool (``desired`` 0) needs ``minSize ≤ desiredSize ≤ maxSize``,
``maxSize`` 0 meaning no cap (docs/behaviour.md#pool-size-admission). Each names its field (``fieldPath``);
plain messages, since a ``messageExpression`` printing the numbers (``string(int)``) is estimated far over
the API server's cost budget. Desired-count pools, where the three play no part in sizing, are not checked."""

AdmittedPoolSpec = Annotated[PoolSpec, Meta(extra_json_schema={"x-kubernetes-validations": SIZE_ORDER_RULES})]
"""``spec`` of a pool as the CRD admits it: :class:`PoolSpec` under :data:`SIZE_ORDER_RULES`."""


class MemberState(ClosedSet):
    """State of a pool member, derived from its Process. No default."""

    SPAWNING = "Spawning"
    FREE = "Free"
    ALLOCATED = "Allocated"
    RETURNING = "Returning"
    FAILED = "Failed"

    @property
    def is_failed(self) -> bool:
        return self is MemberState.FAILED

    @property
    def counts_toward_supply(self) -> bool:
        """Spawning and Free."""
        return self in (MemberState.SPAWNING, MemberState.FREE)


class PoolPhase(ClosedSet):
    """``status.phase`` of a pool. Default ``Initializing``."""

    INITIALIZING = "Initializing"
    STEADY = "Steady"
    SCALING_UP = "ScalingUp"
    SCALING_DOWN = "ScalingDown"
    DEGRADED = "Degraded"
    DRAINING = "Draining"

    @property
    def is_steady(self) -> bool:
        return self is PoolPhase.STEADY

    @property
    def is_terminal(self) -> bool:
        """Draining is absorbing."""
        return self is PoolPhase.DRAINING


class PoolMember(WireStruct):
    """One row of ``status.members``."""

    process_name: str
    """Name of the member Process (in the pool's namespace)."""
    state: MemberState
    entered_state_at: Timestamp
    """When the member entered its state (RFC 3339)."""
    allocation_ref: AllocationRef | None = None


PoolCondition = StatusCondition
"""``status.conditions[]`` of a pool (docs/behaviour.md#pool-status)."""


class PoolStatus(WireStruct):
    """``status`` of a pool."""

    phase: PoolPhase = PoolPhase.INITIALIZING
    phase_since: Timestamp | None = None
    """When the pool entered its current phase (RFC 3339)."""
    ready_count: UInt32 = 0
    """Members in Free."""
    allocated_count: UInt32 = 0
    """Members held by an allocation."""
    spawning_count: UInt32 = 0
    """Members still starting."""
    returning_count: UInt32 = 0
    """Members released and being recycled."""
    members: list[PoolMember] = []
    """Every member Process and its state."""
    message: str | None = None
    """What the pool reconciler last said about the pool, in words."""
    conditions: list[PoolCondition] = []
    """kstatus ``Ready`` (the pool is Steady), ``Reconciling`` (sizing under way) and ``Stalled`` (paused,
    or its template cannot be created)."""
    observed_generation: int | None = None
    """The ``metadata.generation`` the status was written for. Not in the reference.

    Why: docs/divergences.md#status-observedgeneration. (The first paragraph is this field's CRD description.)"""


class EphemeralPool(WireStruct):
    """An ``EphemeralPool`` object (namespaced)."""

    api_version: str = API_VERSION
    kind: str = "EphemeralPool"
    metadata: ObjectMeta = ObjectMeta()
    spec: AdmittedPoolSpec
    status: PoolStatus | None = None
