"""The ``EphemeralAllocation`` kind: a request to hold one pool member.

— docs/wire-format.md#ephemeralallocation; the rules: docs/behaviour.md#allocations.
"""

from __future__ import annotations

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.condition import StatusCondition
from shared.domain.api.grammar import Duration
from shared.domain.api.wire import Timestamp, UInt64, WireStruct
from shared.domain.group import API_VERSION
from shared.kube.meta import ObjectMeta

__all__ = [
    "AllocationCondition",
    "AllocationPhase",
    "AllocationRef",
    "AllocationSpec",
    "AllocationStatus",
    "EphemeralAllocation",
    "Requestor",
    "RequestorKind",
]


class AllocationRef(WireStruct):
    """``{name, namespace}`` of a pool, allocation or Process."""

    name: str
    """Name of the object referred to."""
    namespace: str
    """Namespace of the object referred to."""


class RequestorKind(ClosedSet):
    """The known values of the open ``requestor.kind`` string."""

    GITHUB_PR = "github-pr"
    MANUAL = "manual"
    CI_RUN = "ci-run"
    SCHEDULED = "scheduled"


class Requestor(WireStruct):
    """Who asks for a member; also the pool-routing key."""

    kind: str
    """Open set; see :class:`RequestorKind` for the known values."""
    repo: str | None = None
    """Repository asking, ``owner/name``; matched against the pools' ``selector.repos``."""
    branch: str | None = None
    """Branch asking; matched against the pools' ``selector.branches``."""
    pr_number: UInt64 | None = None
    """Pull request number."""
    sha: str | None = None
    """Commit sha the environment is for."""
    pr_labels: list[str] = []
    """Labels of the pull request; matched against the pools' ``selector.prLabels``. Default: none."""
    actor: str | None = None
    """Who asked, e.g. the pull request author's login."""

    def known_kind(self) -> RequestorKind | None:
        """The RequestorKind spelled exactly ``kind``, or None for other strings."""
        try:
            return RequestorKind.parse(self.kind)
        except ValueError:
            return None


class AllocationSpec(WireStruct):
    """``spec`` of an allocation."""

    pool_ref: AllocationRef | None = None
    """Explicit pool (same namespace); skips selector routing."""
    requestor: Requestor
    ttl: Duration | None = None
    """Hold duration (humantime); falls back to the pool template ``ttl``, then ``1h``."""
    note: str | None = None
    """Free-text note for the audit trail."""


class AllocationPhase(ClosedSet):
    """``status.phase`` of an allocation. Default ``Pending``."""

    PENDING = "Pending"
    QUEUED = "Queued"
    BOUND = "Bound"
    RELEASING = "Releasing"
    RELEASED = "Released"
    NO_MATCHING_POOL = "NoMatchingPool"
    FAILED = "Failed"

    @property
    def is_terminal(self) -> bool:
        """Released and Failed."""
        return self in (AllocationPhase.RELEASED, AllocationPhase.FAILED)

    @property
    def needs_pool_routing(self) -> bool:
        """Pending, Queued and NoMatchingPool."""
        return self in (AllocationPhase.PENDING, AllocationPhase.QUEUED, AllocationPhase.NO_MATCHING_POOL)


AllocationCondition = StatusCondition
"""``status.conditions[]`` of an allocation (docs/behaviour.md#allocation-conditions)."""


class AllocationStatus(WireStruct):
    """``status`` of an allocation."""

    phase: AllocationPhase = AllocationPhase.PENDING
    phase_since: Timestamp | None = None
    """When the allocation entered its current phase (RFC 3339)."""
    bound_pool: AllocationRef | None = None
    assigned_process: AllocationRef | None = None
    allocated_at: Timestamp | None = None
    """When a member was bound (RFC 3339)."""
    expires_at: Timestamp | None = None
    """When the hold ends and the member is released (RFC 3339)."""
    message: str | None = None
    """What the pool reconciler last said about the allocation, in words."""
    conditions: list[AllocationCondition] = []
    """``Ready``, ``Reconciling`` and ``Stalled``, recomputed from the phase on every status write."""
    observed_generation: int | None = None
    """The ``metadata.generation`` the status was written for."""


class EphemeralAllocation(WireStruct):
    """An ``EphemeralAllocation`` object (namespaced)."""

    api_version: str = API_VERSION
    kind: str = "EphemeralAllocation"
    metadata: ObjectMeta = ObjectMeta()
    spec: AllocationSpec
    status: AllocationStatus | None = None

    @property
    def phase(self) -> AllocationPhase:
        """``status.phase``, Pending when there is no status."""
        return self.status.phase if self.status is not None else AllocationPhase.PENDING
