"""``ProcessTable.status`` as pure functions: Processes in, the status merge patch out.

The reference never writes ``processCount``, ``readyCount``, ``processes`` or ``lastReconciled``;
tatara maintains them (docs/behaviour.md#processtable-status, docs/divergences.md#processtable-status).
The writer that sends them is :mod:`reconciler.table_writer`.

- ``processCount`` and ``readyCount`` are exact, whatever the number of Processes. A Process is
  *ready* when its kstatus ``Ready`` condition is ``True``, or, when it has no ``Ready``
  condition, when its phase is ``Attested`` (the converged phase).
- ``processes`` (the rows) is **capped** so the object stays far below etcd's 1.5 MiB limit:
  at most :data:`DEFAULT_MAX_ROWS` rows and at most :data:`DEFAULT_MAX_ROWS_BYTES` bytes of
  row JSON, whichever is hit first. A row is about 300–500 bytes, so 500 rows are ~250 KiB;
  the byte budget bounds the worst case (253-character names, long PIDs) at 256 KiB.
  Rows are sorted by PID in hierarchy order (numeric segments compare as numbers, so
  ``seph.2`` < ``seph.10``; parents before their children), then namespace/name; Processes
  without a PID yet come last. The rows kept are the first ones in that order: the oldest
  PIDs. The CRD has no "truncated" field (the wire format is the reference's), so a
  truncated table is one where ``len(processes) < processCount``.
- ``lastReconciled`` is the time of the write.
- :func:`claims_patch` is the guarded JSON patch of ``status.claims`` (docs/behaviour.md#stable-name-claims).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from reconciler.reasons import Reason
from shared.domain.api.codec import to_wire
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import (
    ClaimRecord,
    ProcessEntry,
    ProcessTable,
    ProcessTableStatus,
    TableCondition,
)
from shared.domain.api.wire import MergePatch
from shared.domain.kstatus import Truth, kstatus_conditions

__all__ = [
    "DEFAULT_MAX_ROWS",
    "DEFAULT_MAX_ROWS_BYTES",
    "Compared",
    "TableStatusPatch",
    "claims_patch",
    "is_ready",
    "pid_sort_key",
    "process_entry",
    "stored_compared",
    "table_status",
    "with_table_conditions",
]

DEFAULT_MAX_ROWS: Final = 500
"""Row cap of ``status.processes``."""

DEFAULT_MAX_ROWS_BYTES: Final = 256 * 1024
"""Byte budget of the rows' JSON (etcd's object limit is 1.5 MiB)."""


class TableStatusPatch(MergePatch, frozen=True):
    """The merge patch of ``ProcessTable.status`` the writer sends: counts, rows, the write time, and the
    kstatus conditions with ``observedGeneration`` (:func:`with_table_conditions`). ``claims`` is not
    named, so a merge patch keeps it."""

    process_count: int
    ready_count: int
    processes: list[ProcessEntry]
    last_reconciled: datetime
    conditions: list[TableCondition] | UnsetType = UNSET
    observed_generation: int | UnsetType = UNSET

    @property
    def compared(self) -> Compared:
        """What decides whether a write is needed: counts, rows and the generation, not ``lastReconciled``."""
        seen = self.observed_generation if not isinstance(self.observed_generation, UnsetType) else None
        return self.process_count, self.ready_count, self.processes, seen


Compared = tuple[int, int, list[ProcessEntry], int | None]


def stored_compared(status: ProcessTableStatus | None) -> Compared:
    """What :attr:`TableStatusPatch.compared` is for the status as stored (no status: nothing counted)."""
    if status is None:
        return 0, 0, [], None
    return status.process_count, status.ready_count, status.processes, status.observed_generation


def with_table_conditions(status: TableStatusPatch, table: ProcessTable, now: datetime) -> TableStatusPatch:
    """``status`` with ``observedGeneration`` = the table's generation and kstatus conditions: ``Ready``
    True (reason ``Counted``, the counts as message) for a table the writer keeps, False with
    ``Reconciling`` True for one being deleted while Processes still hold PIDs (reason ``Deleting``);
    ``lastTransitionTime`` kept while a condition's status holds (docs/behaviour.md#processtable-status)."""
    deleting = table.metadata.deletion_timestamp is not None
    reason = Reason.TABLE_DELETING if deleting else Reason.TABLE_COUNTED
    message = f"{status.process_count} Process(es), {status.ready_count} ready"
    generation = table.metadata.generation
    conditions = kstatus_conditions(
        Truth(ready=not deleting, reconciling=deleting), table.status.conditions if table.status else [], now,
        lambda type_, value, since: TableCondition(type_=type_, status=value, reason=reason, message=message,
                                                   last_transition_time=since, observed_generation=generation))
    return msgspec.structs.replace(status, conditions=conditions,
                                   observed_generation=generation if generation is not None else UNSET)



def is_ready(process: Process) -> bool:
    """``Ready`` condition ``True``; without a ``Ready`` condition, phase ``Attested``."""
    status = process.status
    if status is None:
        return False
    for condition in status.conditions:
        if condition.type_ == "Ready":
            return condition.status == "True"
    return status.phase is ProcessPhase.ATTESTED


def pid_sort_key(pid: str) -> tuple[tuple[int, int, str], ...]:
    """Hierarchy order of PIDs: segment by segment, numbers numerically and before names."""
    return tuple((0, int(s), "") if s.isdigit() else (1, 0, s) for s in pid.split("."))


def _row_order(process: Process) -> tuple[bool, tuple[tuple[int, int, str], ...], str, str]:
    pid = process.status.pid if process.status is not None else None
    return (pid is None or pid == "", pid_sort_key(pid or ""), process.metadata.namespace or "",
            process.metadata.name or "")


def process_entry(process: Process) -> ProcessEntry:
    """The ``status.processes`` row of ``process``.

    ``pid`` is ``""`` before Forking; ``lastUpdated`` is ``status.phaseSince``.
    """
    status = process.status
    attestation = status.attestation if status is not None else None
    return ProcessEntry(
        name=process.metadata.name or "",
        namespace=process.metadata.namespace or "default",
        pid=(status.pid if status is not None else None) or "",
        parent_pid=status.parent if status is not None else None,
        phase=status.phase if status is not None else ProcessPhase.PENDING,
        point_type=str(process.spec.classification.point_type),
        substrate=str(process.spec.classification.substrate),
        content_hash=status.identity.content_hash if status is not None and status.identity is not None else None,
        attestation_root=attestation.composed_root if attestation is not None else None,
        last_updated=status.phase_since if status is not None else None,
    )


def table_status(
    processes: Iterable[Process],
    now: datetime,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_ROWS_BYTES,
) -> TableStatusPatch:
    """The ``ProcessTable.status`` merge patch for ``processes`` at ``now``: counts exact, rows capped
    by ``max_rows`` and ``max_bytes`` of row JSON (see the module docstring)."""
    everything = list(processes)
    ready = sum(1 for p in everything if is_ready(p))
    rows: list[ProcessEntry] = []
    size = 0
    for process in sorted(everything, key=_row_order):
        if len(rows) >= max_rows:
            break
        row = process_entry(process)
        size += len(msgspec.json.encode(to_wire(row))) + 1
        if size > max_bytes:
            break
        rows.append(row)
    return TableStatusPatch(process_count=len(everything), ready_count=ready, processes=rows, last_reconciled=now)


def claims_patch(document: Mapping[str, Any], new: Mapping[str, ClaimRecord]) -> list[dict[str, object]]:
    """The JSON patch (RFC 6902) that replaces the stored ``status.claims`` of the table ``document``
    (its JSON as stored) with ``new`` — only if nobody changed them since ``document`` was read.

    The guard is a ``test`` of the table's ``uid`` and of the stored claims themselves, so the counts
    and rows the writer merges in, and PID bumps on ``spec``, never make it fail; when no claims are
    stored yet (a ``test`` cannot check for absence) it tests the ``resourceVersion`` instead. An empty
    ``new`` removes the key (``claims`` is left out when empty, docs/wire-format.md#claims). A failed
    ``test`` is answered 422.
    """
    meta = document.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    status = document.get("status")
    value = {key: to_wire(record) for key, record in sorted(new.items())}
    ops: list[dict[str, object]] = []
    if meta.get("uid"):
        ops.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
    if isinstance(status, Mapping) and "claims" in status:
        ops.append({"op": "test", "path": "/status/claims", "value": status["claims"]})
        if value:
            return [*ops, {"op": "replace", "path": "/status/claims", "value": value}]
        return [*ops, {"op": "remove", "path": "/status/claims"}]
    ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")})
    if isinstance(status, Mapping):
        return [*ops, {"op": "add", "path": "/status/claims", "value": value}]
    return [*ops, {"op": "add", "path": "/status", "value": {"claims": value}}]
