"""The cluster-scoped ``ProcessTable`` ("/proc") singleton, named ``proc``.

— docs/wire-format.md#processtable; what is written: docs/behaviour.md#processtable-status.
"""

from __future__ import annotations

from typing import ClassVar, Final

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
]

PROCESS_TABLE_NAME: Final = "proc"
"""Name of the singleton table."""


class ProcessTableSpec(WireStruct):
    """``spec`` of the table. Every field defaults, so ``spec: {}`` is valid."""

    next_sequence: UInt32 = 1
    """The next PID sequence number; bumped with optimistic concurrency."""
    parent_pid: str | None = None
    dns_domain: str | None = None
    dns_zone_id: str | None = None
    max_depth: UInt32 = 0
    """Maximum PID depth; 0 = unlimited."""
    max_children: UInt32 = 0
    """Maximum children per Process; 0 = unlimited."""
    sigterm_timeout_seconds: UInt32 = 480
    zombie_timeout_seconds: UInt32 = 600
    orphan_reaping_enabled: bool = True


class ProcessEntry(WireStruct):
    """One row of ``status.processes``."""

    name: str
    namespace: str
    pid: str
    parent_pid: str | None = None
    phase: ProcessPhase
    point_type: str
    """The ConvergencePointType label, as a plain string."""
    substrate: str
    """The SubstrateType label, as a plain string."""
    content_hash: str | None = None
    attestation_root: str | None = None
    last_updated: Timestamp | None = None


class ClaimRecord(WireStruct):
    """Holder of a stable hostname, keyed ``<cluster>/<app>`` in ``status.claims``."""

    holder: str
    """``<namespace>/<name>`` of the holding Process."""
    pid: str
    granted_at: Timestamp
    priority: Int32


class ProcessTableStatus(WireStruct):
    """``status`` of the table. ``claims`` is left out when empty.

    The reference requires ``processCount`` / ``readyCount``; we default them to 0
    so a status holding only claims still decodes (docs/divergences.md#processtable-status-counters).
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"claims"})

    process_count: UInt32 = 0
    ready_count: UInt32 = 0
    processes: list[ProcessEntry] = []
    last_reconciled: Timestamp | None = None
    claims: dict[str, ClaimRecord] = {}


class ProcessTable(WireStruct):
    """A ``ProcessTable`` object (cluster-scoped)."""

    api_version: str = API_VERSION
    kind: str = "ProcessTable"
    metadata: ObjectMeta = ObjectMeta()
    spec: ProcessTableSpec = ProcessTableSpec()
    status: ProcessTableStatus | None = None
