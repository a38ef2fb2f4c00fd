"""The cluster-scoped ``ProcessTable`` ("/proc") singleton, named ``proc``.

— docs/wire-format.md#processtable; what is written: docs/behaviour.md#processtable-status.
"""

from __future__ import annotations

from typing import ClassVar, Final

from shared.domain.api.condition import StatusCondition
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.wire import Int32, Timestamp, UInt32, WireStruct
from shared.domain.group import API_VERSION
from shared.kube.meta import ObjectMeta

__all__ = [
    "PROCESS_TABLE_NAME",
    "ClaimRecord",
    "ProcessEntry",
    "ProcessTable",
    "ProcessTableSpec",
    "ProcessTableStatus",
    "TableCondition",
]

PROCESS_TABLE_NAME: Final = "proc"
"""Name of the singleton table."""


class ProcessTableSpec(WireStruct):
    """``spec`` of the table. Every field defaults, so ``spec: {}`` is valid."""

    next_sequence: UInt32 = 1
    """The next PID sequence number; bumped with optimistic concurrency."""
    parent_pid: str | None = None
    """PID path of a parent table; carried, not read."""
    dns_domain: str | None = None
    """DNS domain of the cluster's host names; carried, not read."""
    dns_zone_id: str | None = None
    """Identifier of the DNS zone of ``dnsDomain``; carried, not read."""
    max_depth: UInt32 = 0
    """Maximum PID depth; 0 = unlimited."""
    max_children: UInt32 = 0
    """Maximum children per Process; 0 = unlimited."""
    sigterm_timeout_seconds: UInt32 = 480
    """Seconds a Process has to exit after SIGTERM. Default 480; carried, not read."""
    zombie_timeout_seconds: UInt32 = 600
    """Seconds a Zombie waits before it is reaped. Default 600; carried, not read."""
    orphan_reaping_enabled: bool = True
    """Whether Processes whose parent is gone are reaped. Default true; carried, not read."""


class ProcessEntry(WireStruct):
    """One row of ``status.processes``."""

    name: str
    """Name of the Process."""
    namespace: str
    """Namespace of the Process."""
    pid: str
    """PID path of the Process."""
    parent_pid: str | None = None
    """PID path of its parent; absent for a root."""
    phase: ProcessPhase
    point_type: str
    """The ConvergencePointType label, as a plain string."""
    substrate: str
    """The SubstrateType label, as a plain string."""
    content_hash: str | None = None
    """Content hash of the Process's spec."""
    attestation_root: str | None = None
    """``composedRoot`` of its latest attestation."""
    last_updated: Timestamp | None = None
    """When this row was last written (RFC 3339)."""


class ClaimRecord(WireStruct):
    """Holder of a stable hostname, keyed ``<cluster>/<app>`` in ``status.claims``."""

    holder: str
    """``<namespace>/<name>`` of the holding Process."""
    pid: str
    """PID path of the holding Process."""
    granted_at: Timestamp
    """When the claim was granted (RFC 3339)."""
    priority: Int32
    """``spec.routing.priority`` of the holder; a higher priority takes the claim over."""


TableCondition = StatusCondition
"""``status.conditions[]`` of the table (docs/behaviour.md#processtable-status)."""


class ProcessTableStatus(WireStruct):
    """``status`` of the table. ``claims`` is left out when empty.

    The reference requires ``processCount`` / ``readyCount``; we default them to 0
    so a status holding only claims still decodes (docs/divergences.md#processtable-status-counters).
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"claims"})

    process_count: UInt32 = 0
    """Number of Processes in the cluster. Default 0."""
    ready_count: UInt32 = 0
    """Number of Processes that are ready (``Ready`` condition True, else Attested). Default 0."""
    processes: list[ProcessEntry] = []
    """One row per Process, sorted by PID; capped, so fewer rows than ``processCount`` means truncated."""
    last_reconciled: Timestamp | None = None
    """When the table status was last written (RFC 3339)."""
    claims: dict[str, ClaimRecord] = {}
    """Holders of stable host names, keyed ``<cluster>/<app>``. Default empty."""
    conditions: list[TableCondition] = []
    """kstatus ``Ready`` (the counts and rows are current), ``Reconciling``, ``Stalled``. Not in the reference.

    Why: docs/divergences.md#status-observedgeneration. (The first paragraph is this field's CRD description.)"""
    observed_generation: int | None = None
    """The ``metadata.generation`` (it moves with every ``nextSequence`` bump) the status was written for.

    Why: docs/divergences.md#status-observedgeneration. (The first paragraph is this field's CRD description.)"""


class ProcessTable(WireStruct):
    """A ``ProcessTable`` object (cluster-scoped)."""

    api_version: str = API_VERSION
    kind: str = "ProcessTable"
    metadata: ObjectMeta = ObjectMeta()
    spec: ProcessTableSpec = ProcessTableSpec()
    status: ProcessTableStatus | None = None
